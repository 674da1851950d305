// Package check confirms that every image a dataset's records call for is in
// a registry: per instance, each per-arch name REPO/sweb.eval.<arch>.<id>
// for the platforms the instance is built for (the decision plan makes,
// passed in as Options.Platforms), and the multi-arch index
// REPO/sweb.eval.<id> listing exactly those platforms at the per-arch
// digests. Optionally it also checks each record's own image name
// (core.Instance.Image), re-rooted at another registry.
//
// Every reference costs at most one request: a HEAD for a per-arch name or
// a record's image, a GET for an index (its children are read from the
// body). Requests go through the project's registry client (retry budget,
// credentials, plain HTTP for loopback or named registries only).
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
)

// DefaultTag is the tag checked when Options.Tag is empty.
const DefaultTag = manifests.LatestTag

// Options configure a check.
type Options struct {
	// Repo is the repository prefix images were published under, e.g.
	// "127.0.0.1:5000/swebench" (required).
	Repo string
	// KeepDoubleUnderscore names images with "__" kept (as publish's
	// option of the same name).
	KeepDoubleUnderscore bool
	// Tag is the tag checked on every name (default DefaultTag).
	Tag string
	// Platforms returns the platforms an instance is built for, amd64
	// first: the same decision plan uses (spec.Tables.Platforms). Required.
	Platforms func(*core.Instance) []core.Platform
	// RecordRoot, when set, also checks each record's Image name with its
	// registry replaced by RecordRoot (a host, optionally with a path
	// prefix): "swebench/sweb.eval.x86_64.x:latest" at root
	// "127.0.0.1:5000" is "127.0.0.1:5000/swebench/sweb.eval.x86_64.x:latest".
	RecordRoot string
	// Client talks to the registry (required).
	Client *registry.Client
	// Jobs is how many references are checked at once (default 8).
	Jobs int
}

// Ref kinds.
const (
	KindArch   = "arch"   // REPO/sweb.eval.<arch>.<id>:TAG
	KindIndex  = "index"  // REPO/sweb.eval.<id>:TAG
	KindRecord = "record" // the record's own image name, re-rooted
)

// Ref is one checked reference and what the registry said.
type Ref struct {
	Kind       string        `json:"kind"`
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform,omitzero"` // arch refs
	Name       string        `json:"name"`
	Present    bool          `json:"present"`
	Digest     string        `json:"digest,omitempty"`
	// Problem says what is wrong: "missing", the registry's refusal
	// ("registry answered 401: ..."), or for a present index what it lacks
	// or holds at another digest; "" when all is well.
	Problem string `json:"problem,omitempty"`
}

// OK reports whether the reference is present and consistent.
func (r Ref) OK() bool { return r.Present && r.Problem == "" }

// Report is what a check found, references in dataset order (per
// instance: per-arch names amd64 first, the index, the record's image).
type Report struct {
	Instances int   `json:"instances"`
	Refs      []Ref `json:"refs"`
	// NoImage lists the instances whose record names no image (only when
	// RecordRoot is set).
	NoImage []string `json:"no_image,omitempty"`
}

// Counts returns how many references are fine, of how many.
func (r *Report) Counts() (ok, total int) {
	for _, ref := range r.Refs {
		if ref.OK() {
			ok++
		}
	}
	return ok, len(r.Refs)
}

// Gaps returns the references that are missing or inconsistent.
func (r *Report) Gaps() []Ref {
	var out []Ref
	for _, ref := range r.Refs {
		if !ref.OK() {
			out = append(out, ref)
		}
	}
	return out
}

// Err is non-nil when any reference is missing or inconsistent.
func (r *Report) Err() error {
	ok, total := r.Counts()
	if ok == total {
		return nil
	}
	return fmt.Errorf("%d of %d images missing or inconsistent", total-ok, total)
}

// Print writes "N/M images present" and one line per gap.
func (r *Report) Print(w io.Writer) {
	ok, total := r.Counts()
	fmt.Fprintf(w, "%d/%d images present (%d instances)\n", ok, total, r.Instances)
	gaps := r.Gaps()
	if len(gaps) > 0 {
		fmt.Fprintf(w, "missing or inconsistent (%d):\n", len(gaps))
	}
	for _, g := range gaps {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", g.InstanceID, g.Name, g.Problem)
	}
	if len(r.NoImage) > 0 {
		fmt.Fprintf(w, "%d record(s) name no image (not checked): %s\n", len(r.NoImage), strings.Join(r.NoImage, ", "))
	}
}

// DigestLine is one line of the --digests file (JSON lines, one per
// instance, dataset order): the index digest and each platform's per-arch
// digest, as found; a missing image has no entry.
type DigestLine struct {
	InstanceID string            `json:"instance_id"`
	Index      string            `json:"index,omitempty"`
	Platforms  map[string]string `json:"platforms"`
	Record     string            `json:"record_image,omitempty"`
	RecordRef  string            `json:"record_ref,omitempty"`
}

// WriteDigests writes one DigestLine per instance (keys sorted by
// encoding/json, so the bytes are deterministic).
func (r *Report) WriteDigests(w io.Writer) error {
	var lines []*DigestLine
	byID := map[string]*DigestLine{}
	for _, ref := range r.Refs {
		l := byID[ref.InstanceID]
		if l == nil {
			l = &DigestLine{InstanceID: ref.InstanceID, Platforms: map[string]string{}}
			byID[ref.InstanceID] = l
			lines = append(lines, l)
		}
		if !ref.Present {
			continue
		}
		switch ref.Kind {
		case KindArch:
			l.Platforms[ref.Platform.String()] = ref.Digest
		case KindIndex:
			l.Index = ref.Digest
		case KindRecord:
			l.Record, l.RecordRef = ref.Digest, ref.Name
		}
	}
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("writing digests: %w", err)
		}
	}
	return nil
}

// Reroot returns image (a record's image name, Docker Hub implied when it
// names no registry) with its registry replaced by root.
func Reroot(image, root string) (string, error) {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	out := strings.TrimSuffix(root, "/") + "/" + ref.Context().RepositoryStr()
	switch r := ref.(type) {
	case name.Digest:
		out += "@" + r.DigestStr()
	case name.Tag:
		out += ":" + r.TagStr()
	}
	return out, nil
}

// Run checks insts (in order) and returns the report. An error is returned
// for bad options, a name that cannot be parsed, or a registry that could
// not be asked (after the client's retries): never for a missing image,
// which the report holds.
func Run(ctx context.Context, insts []core.Instance, o Options) (*Report, error) {
	if o.Repo == "" || o.Client == nil || o.Platforms == nil {
		return nil, errors.New("check: repository prefix, registry client and platform decision are required")
	}
	tag := o.Tag
	if tag == "" {
		tag = DefaultTag
	}
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = 8
	}
	namer := manifests.Namer{Repo: o.Repo, KeepDoubleUnderscore: o.KeepDoubleUnderscore}
	rep := &Report{Instances: len(insts)}
	// index i of rep.Refs -> the arch refs an index ref compares against.
	type indexWant struct {
		platforms []core.Platform
		archRefs  []int
	}
	wants := map[int]indexWant{}
	seen := map[string]int{} // name -> index in rep.Refs
	aliases := map[int]int{} // record ref -> the ref with its name
	add := func(r Ref) {
		seen[r.Name] = len(rep.Refs)
		rep.Refs = append(rep.Refs, r)
	}
	for i := range insts {
		inst := &insts[i]
		plats := o.Platforms(inst)
		var archIdx []int
		for _, p := range plats {
			n := namer.ArchRepo(p.Arch(), inst.InstanceID) + ":" + tag
			archIdx = append(archIdx, len(rep.Refs))
			add(Ref{Kind: KindArch, InstanceID: inst.InstanceID, Platform: p, Name: n})
		}
		wants[len(rep.Refs)] = indexWant{platforms: plats, archRefs: archIdx}
		add(Ref{Kind: KindIndex, InstanceID: inst.InstanceID, Name: namer.IndexRepo(inst.InstanceID) + ":" + tag})
		if o.RecordRoot != "" {
			if inst.Image == "" {
				rep.NoImage = append(rep.NoImage, inst.InstanceID)
				continue
			}
			n, err := Reroot(inst.Image, o.RecordRoot)
			if err != nil {
				return nil, fmt.Errorf("%s: record image: %w", inst.InstanceID, err)
			}
			if _, dup := seen[n]; dup && rep.Refs[seen[n]].Kind == KindRecord {
				continue // two records naming one image: listed once
			}
			// A record image that is also one of the names above (the
			// prefix and the re-rooted namespace coincide) is listed but
			// not asked again: one request per reference.
			if j, ok := seen[n]; ok {
				aliases[len(rep.Refs)] = j
			}
			seen[n] = len(rep.Refs)
			rep.Refs = append(rep.Refs, Ref{Kind: KindRecord, InstanceID: inst.InstanceID, Name: n})
		}
	}

	// Ask the registry: every reference once, jobs at a time. Index bodies
	// are kept to compare with the per-arch digests afterwards.
	bodies := make([][]byte, len(rep.Refs))
	errs := make([]error, len(rep.Refs))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i := range rep.Refs {
		ref := &rep.Refs[i]
		if _, ok := aliases[i]; ok {
			continue
		}
		parsed, err := o.Client.ParseReference(ref.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: image name %s: %w", ref.InstanceID, ref.Name, err)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ref.Kind == KindIndex {
				d, err := o.Client.Get(ctx, parsed)
				switch {
				case err != nil && isNotFound(err):
				case err != nil && httpStatus(err) != 0:
					ref.Problem = fmt.Sprintf("registry answered %d: %v", httpStatus(err), err)
				case err != nil:
					errs[i] = err
				default:
					ref.Present, ref.Digest, bodies[i] = true, d.Digest.String(), d.Manifest
					if !d.MediaType.IsIndex() {
						ref.Problem = fmt.Sprintf("is a %s, not an image index", d.MediaType)
					}
				}
				return
			}
			d, err := o.Client.Head(ctx, parsed)
			if err != nil {
				// An HTTP answer (Docker Hub says 401 for a repository
				// that does not exist) is this reference's gap; anything
				// else (the registry unreachable after the client's
				// retries) stops the check.
				if st := httpStatus(err); st != 0 {
					ref.Problem = fmt.Sprintf("registry answered %d: %v", st, err)
					return
				}
				errs[i] = err
				return
			}
			if d != nil {
				ref.Present, ref.Digest = true, d.Digest.String()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, j := range aliases {
		rep.Refs[i].Present, rep.Refs[i].Digest = rep.Refs[j].Present, rep.Refs[j].Digest
	}
	for i := range rep.Refs {
		ref := &rep.Refs[i]
		if !ref.Present {
			if ref.Problem == "" {
				ref.Problem = "missing"
			}
			continue
		}
		w, ok := wants[i]
		if !ok || ref.Problem != "" {
			continue
		}
		var archDigests []string
		for _, j := range w.archRefs {
			archDigests = append(archDigests, rep.Refs[j].Digest)
		}
		ref.Problem = indexProblem(bodies[i], w.platforms, archDigests)
	}
	return rep, nil
}

// indexProblem compares an index body with the platforms it must list and
// the per-arch digests found ("" for a per-arch name that is missing: its
// own gap is reported, the index child is not compared).
func indexProblem(body []byte, plats []core.Platform, archDigests []string) string {
	im, err := v1.ParseIndexManifest(strings.NewReader(string(body)))
	if err != nil {
		return fmt.Sprintf("index does not parse: %v", err)
	}
	var problems []string
	children := map[core.Platform]string{}
	for _, m := range im.Manifests {
		if m.Platform == nil {
			continue
		}
		p, err := core.ParsePlatform(m.Platform.OS + "/" + m.Platform.Architecture)
		if err != nil {
			continue
		}
		children[p] = m.Digest.String()
	}
	want := map[core.Platform]bool{}
	for k, p := range plats {
		want[p] = true
		got, ok := children[p]
		switch {
		case !ok:
			problems = append(problems, "index lacks "+p.String())
		case archDigests[k] != "" && got != archDigests[k]:
			problems = append(problems, fmt.Sprintf("index's %s child is %s, the per-arch name is at %s", p, got, archDigests[k]))
		}
	}
	for _, p := range core.AllPlatforms() {
		if _, ok := children[p]; ok && !want[p] {
			problems = append(problems, "index lists "+p.String()+", which this instance is not built for")
		}
	}
	return strings.Join(problems, "; ")
}

// isNotFound reports a registry's 404 (MANIFEST_UNKNOWN, NAME_UNKNOWN).
func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// httpStatus is the registry's HTTP status in err, 0 when err is not a
// registry answer.
func httpStatus(err error) int {
	var terr *transport.Error
	if errors.As(err, &terr) {
		return terr.StatusCode
	}
	return 0
}
