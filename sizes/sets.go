package sizes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/manifests/naming"
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
	// Repo is the repository prefix of a named scheme.
	Repo string
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
		spec.Scheme, spec.Template, spec.Repo = head, fmt.Sprintf(schemeTemplates[head], repo), repo
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
	spec.Repo = strings.TrimSuffix(s, "/")
	spec.Scheme, spec.Template = SchemeSwebuild, fmt.Sprintf(schemeTemplates[SchemeSwebuild], spec.Repo)
	return spec, nil
}

// ExpandTemplate fills a reference template for one instance and platform.
func ExpandTemplate(tmpl, instanceID string, p core.Platform) string {
	arch, goarch := p.Arch(), p.GOARCH()
	id := strings.ToLower(instanceID)
	r := strings.NewReplacer(
		"{arch}", arch,
		"{goarch}", goarch,
		"{id_1776}", naming.NoDoubleUnderscore(id),
		"{id}", id,
	)
	return r.Replace(tmpl)
}

// Instance is what sizes needs to know about one dataset instance.
type Instance struct {
	ID string
	// Repo is the GitHub repository ("django/django"); derived from the id
	// when the source does not say.
	Repo string
	// Version is the record's version ("" for an id list): the platform
	// decision of some specs depends on it.
	Version string
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
	Platform core.Platform
	Ref      string
	// Err is set when no reference could be made (bad template, platform,
	// an entry with no registry reference); the image is reported as error.
	Err string
	// Missing is set when the source already says the image does not
	// exist (a ledger's failed push); the image is reported as missing.
	Missing string
}

// Ref names the image of one instance and platform in this set. Our
// naming goes through the manifests package (the one naming module); the
// other schemes expand their template.
func (s SetSpec) Ref(instanceID string, platform core.Platform) (string, error) {
	if s.Scheme == SchemeSwebuild {
		return manifests.Namer{Repo: s.Repo}.ArchRepo(platform.Arch(), instanceID) + ":" + manifests.LatestTag, nil
	}
	if s.Template == "" {
		return "", fmt.Errorf("image set %q has no naming scheme", s.Arg)
	}
	return ExpandTemplate(s.Template, instanceID, platform), nil
}

// PlatformPolicy says which platforms an instance has images for; nil
// means every requested platform.
type PlatformPolicy func(instanceID string) []core.Platform

// Targets lists the images of a naming-scheme set for the given instances
// and requested platforms, sorted by instance then platform. With a policy,
// a platform the instance has no image for (x86-only instances on arm64) is
// left out and counted in skipped.
func (s SetSpec) Targets(instances []Instance, platforms []core.Platform, policy PlatformPolicy) (out []Target, skipped int) {
	for _, in := range instances {
		var allowed map[core.Platform]bool
		if policy != nil {
			allowed = map[core.Platform]bool{}
			for _, p := range policy(in.ID) {
				allowed[p] = true
			}
		}
		for _, p := range platforms {
			if allowed != nil && !allowed[p] {
				skipped++
				continue
			}
			t := Target{Instance: in.ID, Repo: in.Repo, Platform: p}
			ref, err := s.Ref(in.ID, p)
			if err != nil {
				t.Err = err.Error()
			} else {
				t.Ref = ref
			}
			out = append(out, t)
		}
	}
	sortTargets(out)
	return out, skipped
}

func sortTargets(ts []Target) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Instance != ts[j].Instance {
			return ts[i].Instance < ts[j].Instance
		}
		return ts[i].Platform.Compare(ts[j].Platform) < 0
	})
}

// LoadInstances reads instance ids (and repos) from a dataset file: any
// file the dataset package reads (JSONL, JSON array, parquet; records are
// validated there, errors name file, line and field), or a .txt file with
// one instance id per line ('#' starts a comment). Duplicate ids are an
// error. The result is sorted by id.
func LoadInstances(ctx context.Context, path string) ([]Instance, error) {
	if strings.EqualFold(filepath.Ext(path), ".txt") {
		return ReadIDList(path)
	}
	recs, err := dataset.Load(ctx, path, dataset.LoadOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]Instance, 0, len(recs))
	for _, r := range recs {
		repo := r.Repo
		if repo == "" {
			repo = RepoFromID(r.InstanceID)
		}
		out = append(out, Instance{ID: r.InstanceID, Repo: repo, Version: r.Version})
	}
	return checkInstances(path, out, nil)
}

// ReadIDList reads a file of instance ids, one per line ('#' starts a
// comment); each id's repo is derived from it. Duplicate ids are an error.
// The result is sorted by id.
func ReadIDList(path string) ([]Instance, error) {
	var out []Instance
	var errs []error
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the id list: %w", err)
	}
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
	return checkInstances(path, out, errs)
}

// checkInstances refuses duplicate ids and an empty list, and sorts by id.
func checkInstances(path string, out []Instance, errs []error) ([]Instance, error) {
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
