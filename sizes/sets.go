package sizes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Naming schemes known by name. Each expands to a reference template; the
// placeholders are {arch} (x86_64, arm64), {goarch} (amd64, arm64), {id}
// (the instance id in lower case) and {id_1776} (the same with "__" replaced
// by "_1776_", upstream's spelling for registries that forbid "__").
const (
	// SchemeSwebuild is ours: per-arch REPO/sweb.eval.<arch>.<id> with
	// "__" -> "_1776_", tag latest.
	SchemeSwebuild = "swebuild"
	// SchemeUpstream is upstream SWE-bench's Docker Hub naming
	// (swebench/sweb.eval.x86_64.<id with _1776_>:latest).
	SchemeUpstream = "upstream"
	// SchemeEpoch is Epoch AI's naming
	// (ghcr.io/epoch-research/swe-bench.eval.<arch>.<id>:latest).
	SchemeEpoch = "epoch"
	// SchemeTemplate is a user template holding {id} or {id_1776}.
	SchemeTemplate = "template"
	// SchemeFile is a metadata/ledger file listing references.
	SchemeFile = "file"
)

var schemeTemplates = map[string]string{
	SchemeSwebuild: "%s/sweb.eval.{arch}.{id_1776}:latest",
	SchemeUpstream: "%s/sweb.eval.{arch}.{id_1776}:latest",
	SchemeEpoch:    "%s/swe-bench.eval.{arch}.{id}:latest",
}

var schemeDefaultRepo = map[string]string{
	SchemeUpstream: "docker.io/swebench",
	SchemeEpoch:    "ghcr.io/epoch-research",
}

// SetSpec says where an image set comes from.
type SetSpec struct {
	// Arg is the command-line value, used as the set's label.
	Arg string
	// Scheme is one of the Scheme* constants.
	Scheme string
	// Template is the reference template (all schemes but file).
	Template string
	// File is the metadata/ledger file (scheme file).
	File string
}

// ParseSet parses an --images / --against value:
//
//	REPO                    ours (swebuild naming) under REPO
//	swebuild:REPO           the same, explicitly
//	upstream[:REPO]         upstream naming, default docker.io/swebench
//	epoch[:REPO]            Epoch naming, default ghcr.io/epoch-research
//	TEMPLATE                a reference holding {id} or {id_1776}, e.g.
//	                        "host/ns/img.{arch}.{id}:v1"
//	file:PATH, or PATH of an existing file: a metadata/ledger file
func ParseSet(arg string) (SetSpec, error) {
	s := strings.TrimSpace(arg)
	if s == "" {
		return SetSpec{}, errors.New("empty image set")
	}
	spec := SetSpec{Arg: arg}
	if rest, ok := strings.CutPrefix(s, "file:"); ok {
		spec.Scheme, spec.File = SchemeFile, rest
		return spec, nil
	}
	head, rest, hasColon := strings.Cut(s, ":")
	if _, known := schemeTemplates[head]; known {
		repo := schemeDefaultRepo[head]
		if hasColon {
			repo = strings.TrimSuffix(rest, "/")
		}
		if repo == "" {
			return SetSpec{}, fmt.Errorf("image set %q: scheme %s needs a repository (%s:REPO)", arg, head, head)
		}
		if strings.Contains(repo, "{") {
			return SetSpec{}, fmt.Errorf("image set %q: a named scheme takes a repository, not a template", arg)
		}
		spec.Scheme, spec.Template = head, fmt.Sprintf(schemeTemplates[head], repo)
		return spec, nil
	}
	if strings.Contains(s, "{id}") || strings.Contains(s, "{id_1776}") {
		spec.Scheme, spec.Template = SchemeTemplate, s
		return spec, nil
	}
	if st, err := os.Stat(s); err == nil && st.Mode().IsRegular() {
		spec.Scheme, spec.File = SchemeFile, s
		return spec, nil
	}
	switch strings.ToLower(filepath.Ext(s)) {
	case ".json", ".jsonl", ".csv":
		return SetSpec{}, fmt.Errorf("image set %q: file not found", arg)
	}
	if strings.Contains(s, "{") {
		return SetSpec{}, fmt.Errorf("image set %q: a template needs {id} or {id_1776}", arg)
	}
	spec.Scheme, spec.Template = SchemeSwebuild, fmt.Sprintf(schemeTemplates[SchemeSwebuild], strings.TrimSuffix(s, "/"))
	return spec, nil
}

// ArchName maps an OCI platform to upstream's arch name used in image
// names: linux/amd64 -> x86_64, linux/arm64[/v8] -> arm64.
func ArchName(platform string) (string, error) {
	switch platform {
	case "linux/amd64":
		return "x86_64", nil
	case "linux/arm64", "linux/arm64/v8":
		return "arm64", nil
	}
	return "", fmt.Errorf("unsupported platform %q (want linux/amd64 or linux/arm64)", platform)
}

// ExpandTemplate fills a reference template for one instance and platform.
func ExpandTemplate(tmpl, instanceID, platform string) (string, error) {
	arch, err := ArchName(platform)
	if err != nil {
		return "", err
	}
	goarch := strings.Split(platform, "/")[1]
	id := strings.ToLower(instanceID)
	r := strings.NewReplacer(
		"{arch}", arch,
		"{goarch}", goarch,
		"{id_1776}", strings.ReplaceAll(id, "__", "_1776_"),
		"{id}", id,
	)
	return r.Replace(tmpl), nil
}

// Instance is what sizes needs to know about one dataset instance.
type Instance struct {
	ID string
	// Repo is the GitHub repository ("django/django"); derived from the id
	// when the source does not say.
	Repo string
}

// RepoFromID derives "owner/name" from a SWE-bench instance id
// ("django__django-11099" -> "django/django"). Ids that do not follow the
// pattern give "".
func RepoFromID(id string) string {
	owner, rest, ok := strings.Cut(id, "__")
	if !ok || owner == "" {
		return ""
	}
	i := strings.LastIndex(rest, "-")
	if i <= 0 {
		return ""
	}
	return owner + "/" + rest[:i]
}

// Target is one image to measure.
type Target struct {
	Instance string
	Repo     string
	Platform string
	Ref      string
	// Err is set when no reference could be made (bad template, platform).
	Err string
}

// Targets lists the images of a naming-scheme set for the given instances
// and platforms, sorted by instance then platform.
func (s SetSpec) Targets(instances []Instance, platforms []string) []Target {
	var out []Target
	for _, in := range instances {
		for _, p := range platforms {
			t := Target{Instance: in.ID, Repo: in.Repo, Platform: p}
			ref, err := ExpandTemplate(s.Template, in.ID, p)
			if err != nil {
				t.Err = err.Error()
			} else {
				t.Ref = ref
			}
			out = append(out, t)
		}
	}
	sortTargets(out)
	return out
}

func sortTargets(ts []Target) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Instance != ts[j].Instance {
			return ts[i].Instance < ts[j].Instance
		}
		return ts[i].Platform < ts[j].Platform
	})
}

// LoadInstances reads instance ids (and repos) from a dataset file:
// JSONL or a JSON array of SWE-bench records (fields instance_id, repo), or
// a text file with one instance id per line ('#' starts a comment). Errors
// name the file, line and field. Duplicate ids are an error.
func LoadInstances(path string) ([]Instance, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading dataset: %w", err)
	}
	type rec struct {
		InstanceID *string `json:"instance_id"`
		Repo       string  `json:"repo"`
	}
	var out []Instance
	var errs []error
	add := func(where string, r rec) {
		if r.InstanceID == nil || strings.TrimSpace(*r.InstanceID) == "" {
			errs = append(errs, fmt.Errorf("%s: instance_id: missing or empty", where))
			return
		}
		repo := r.Repo
		if repo == "" {
			repo = RepoFromID(*r.InstanceID)
		}
		out = append(out, Instance{ID: *r.InstanceID, Repo: repo})
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case strings.EqualFold(filepath.Ext(path), ".txt"):
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.ContainsAny(line, " \t,") {
				errs = append(errs, fmt.Errorf("%s:%d: instance_id: %q is not a single id", path, n, line))
				continue
			}
			out = append(out, Instance{ID: line, Repo: RepoFromID(line)})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	case len(trimmed) > 0 && trimmed[0] == '[':
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("%s:1: %w", path, err)
		}
		for i := 0; dec.More(); i++ {
			off := int(dec.InputOffset())
			for off < len(data) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
				off++
			}
			line := 1 + bytes.Count(data[:off], []byte("\n"))
			var r rec
			if err := dec.Decode(&r); err != nil {
				return nil, fmt.Errorf("%s:%d: element %d: %w", path, line, i, err)
			}
			add(fmt.Sprintf("%s:%d", path, line), r)
		}
	default:
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<28)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var r rec
			if err := json.Unmarshal(line, &r); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", path, n, err))
				continue
			}
			add(fmt.Sprintf("%s:%d", path, n), r)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	seen := map[string]bool{}
	for _, in := range out {
		if seen[in.ID] {
			errs = append(errs, fmt.Errorf("%s: instance_id: duplicate %q", path, in.ID))
		}
		seen[in.ID] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no instances", path)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
