// Package check confirms that every image a dataset's records call for is in
// a registry: per instance, each per-arch name REPO/sweb.eval.<arch>.<id>
// for the platforms the instance is built for (the decision plan makes,
// passed in as Options.Platforms, narrowed by Options.Only), and the
// multi-arch index REPO/sweb.eval.<id> listing those platforms at the
// per-arch digests, each child present in the index's own repository (a
// pull of the index's platform reads it there). Optionally it also checks
// each record's own image name (core.Instance.Image), re-rooted at
// another registry.
//
// Every reference costs one request: a HEAD for a per-arch name, an index
// child or a record's image, a GET for an index. Everything is read
// through the publication reader (package publication: the registry
// client's credentials, token realm route and retry budget).
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/publication"
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
	// Only, when not empty, checks only these of each instance's
	// platforms (--platform): the per-arch names and index children of
	// the others are not asked for.
	Only []core.Platform
	// RecordRoot, when set, also checks each record's Image name with its
	// registry replaced by RecordRoot (a host, optionally with a path
	// prefix): "swebench/sweb.eval.x86_64.x:latest" at root
	// "127.0.0.1:5000" is "127.0.0.1:5000/swebench/sweb.eval.x86_64.x:latest".
	RecordRoot string
	// Reader reads the publication (required); its Jobs is how many
	// references are asked at once.
	Reader *publication.Reader
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
	// ("login refused by HOST (...)"), another answer ("registry answered
	// 500: ..."), or for a present index what it lacks, holds at another
	// digest or lists without having it; "" when all is well.
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
	// Platforms are the platforms checked when Options.Only narrowed them.
	Platforms []core.Platform `json:"platforms,omitempty"`
	// Refused lists the registry hosts that refused the login.
	Refused []string `json:"refused,omitempty"`
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
	if len(r.Refused) > 0 {
		return fmt.Errorf("%d of %d images missing or inconsistent: login refused by %s", total-ok, total, strings.Join(r.Refused, ", "))
	}
	return fmt.Errorf("%d of %d images missing or inconsistent", total-ok, total)
}

// Print writes "N/M images present" and one line per gap.
func (r *Report) Print(w io.Writer) {
	ok, total := r.Counts()
	only := ""
	if len(r.Platforms) > 0 {
		only = ", " + joinPlatforms(r.Platforms)
	}
	fmt.Fprintf(w, "%d/%d images present (%d instances%s)\n", ok, total, r.Instances, only)
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
// not be asked (after the client's retries): never for a missing or
// refused image, which the report holds.
func Run(ctx context.Context, insts []core.Instance, o Options) (*Report, error) {
	if o.Repo == "" || o.Reader == nil || o.Platforms == nil {
		return nil, errors.New("check: repository prefix, publication reader and platform decision are required")
	}
	set := publication.Prefix{Repo: o.Repo, Tag: o.Tag, KeepDoubleUnderscore: o.KeepDoubleUnderscore}
	if set.Tag == "" {
		set.Tag = DefaultTag
	}
	wants, built := o.wants(insts)
	pub, err := o.Reader.Read(ctx, set, wants)
	if err != nil {
		return nil, err
	}
	rep := &Report{Instances: len(insts), Platforms: o.Only}
	groups := make([][]Ref, len(pub)) // per instance: per-arch names, index, record
	for i, in := range pub {
		groups[i] = rep.instanceRefs(in, built[i])
	}
	if o.RecordRoot != "" {
		if err := rep.records(ctx, insts, o, groups); err != nil {
			return nil, err
		}
	}
	for _, g := range groups {
		for _, ref := range g {
			if !ref.Present && ref.Problem == "" {
				ref.Problem = "missing"
			}
			rep.Refs = append(rep.Refs, ref)
		}
	}
	return rep, nil
}

// wants are the instances as the publication should hold them: the
// platforms checked (the plan's, narrowed by Only), and every platform each
// is built for.
func (o Options) wants(insts []core.Instance) (wants []publication.Want, built [][]core.Platform) {
	for i := range insts {
		plats := o.Platforms(&insts[i])
		w := publication.Want{ID: insts[i].InstanceID}
		for _, p := range plats {
			if len(o.Only) == 0 || slices.Contains(o.Only, p) {
				w.Platforms = append(w.Platforms, p)
			}
		}
		wants, built = append(wants, w), append(built, plats)
	}
	return wants, built
}

// instanceRefs are one instance's per-arch names and its index, as read.
func (r *Report) instanceRefs(in publication.Instance, built []core.Platform) []Ref {
	var out []Ref
	var want []core.Platform
	var archDigests []string
	for _, img := range in.Images {
		ref := Ref{Kind: KindArch, InstanceID: in.ID, Platform: img.Platform}
		r.found(&ref, img.Found)
		out = append(out, ref)
		want, archDigests = append(want, img.Platform), append(archDigests, ref.Digest)
	}
	ref := Ref{Kind: KindIndex, InstanceID: in.ID}
	r.found(&ref, in.Index.Found)
	switch {
	case !ref.Present || ref.Problem != "":
	case in.Index.NotIndex:
		ref.Problem = fmt.Sprintf("is a %s, not an image index", in.Index.Descriptor.MediaType)
	default:
		ref.Problem = r.indexProblem(in.Index, want, built, archDigests)
	}
	return append(out, ref)
}

// found fills ref from what the reader found.
func (r *Report) found(ref *Ref, f publication.Found) {
	ref.Name, ref.Present = f.Name, f.Present
	if f.Present {
		ref.Digest = f.Descriptor.Digest.String()
	}
	if f.Problem != nil {
		ref.Problem = f.Problem.Error()
		r.refused(f.Problem)
	}
}

// refused remembers the host of a refusal.
func (r *Report) refused(problem error) {
	var re *publication.RefusedError
	if errors.As(problem, &re) && !slices.Contains(r.Refused, re.Host) {
		r.Refused = append(r.Refused, re.Host)
	}
}

// records adds each record's own image name, re-rooted at RecordRoot,
// after its instance's refs. A name listed already (a per-arch name) is
// listed but not asked again, and two records naming one image are listed
// once: one request per reference.
func (r *Report) records(ctx context.Context, insts []core.Instance, o Options, groups [][]Ref) error {
	type pos struct{ i, k int }
	listed := map[string]pos{}
	for i, g := range groups {
		for k, ref := range g {
			listed[ref.Name] = pos{i, k}
		}
	}
	var ask []string
	var askAt []pos
	var aliases [][2]pos // record, the ref of the same name
	for i := range insts {
		if insts[i].Image == "" {
			r.NoImage = append(r.NoImage, insts[i].InstanceID)
			continue
		}
		n, err := Reroot(insts[i].Image, o.RecordRoot)
		if err != nil {
			return fmt.Errorf("%s: record image: %w", insts[i].InstanceID, err)
		}
		p, dup := listed[n]
		if dup && groups[p.i][p.k].Kind == KindRecord {
			continue
		}
		at := pos{i, len(groups[i])}
		groups[i] = append(groups[i], Ref{Kind: KindRecord, InstanceID: insts[i].InstanceID, Name: n})
		if dup {
			aliases = append(aliases, [2]pos{at, p})
		} else {
			ask, askAt = append(ask, n), append(askAt, at)
		}
		listed[n] = at
	}
	found, err := o.Reader.HeadAll(ctx, ask)
	if err != nil {
		return err
	}
	for k, f := range found {
		r.found(&groups[askAt[k].i][askAt[k].k], f)
	}
	for _, a := range aliases {
		src, dst := groups[a[1].i][a[1].k], &groups[a[0].i][a[0].k]
		dst.Present, dst.Digest = src.Present, src.Digest
	}
	return nil
}

// indexProblem compares a present index with the platforms it must list
// (want), the platforms its instance is built for, and the per-arch digests
// found ("" for a per-arch name that is missing: its own gap is reported,
// the index child is not compared). Each wanted child, and the attestation
// manifest of each, must be in the index's repository.
func (r *Report) indexProblem(x publication.Index, want, built []core.Platform, archDigests []string) string {
	var problems []string
	for k, p := range want {
		c, ok := x.ChildOf(p)
		switch {
		case !ok:
			problems = append(problems, "index lacks "+p.String())
		case archDigests[k] != "" && c.Descriptor.Digest.String() != archDigests[k]:
			problems = append(problems, fmt.Sprintf("index's %s child is %s, the per-arch name is at %s", p, c.Descriptor.Digest, archDigests[k]))
		}
	}
	for _, c := range x.Children {
		switch {
		case !c.Attestation && !c.Platform.IsZero() && !slices.Contains(built, c.Platform):
			problems = append(problems, "index lists "+c.Platform.String()+", which this instance is not built for")
			continue
		case !r.wanted(x, c, want):
			continue
		case c.Problem != nil:
			problems = append(problems, fmt.Sprintf("index's %s: %v", c.What(), c.Problem))
			r.refused(c.Problem)
		case !c.Present:
			problems = append(problems, fmt.Sprintf("index's %s is not in %s (a pull of it from the index fails)", c.What(), repoOf(x.Name)))
		}
	}
	return strings.Join(problems, "; ")
}

// wanted reports whether child c of x is checked: an image child of a
// wanted platform, or the attestation manifest of one.
func (r *Report) wanted(x publication.Index, c publication.Child, want []core.Platform) bool {
	if !c.Attestation {
		return slices.Contains(want, c.Platform)
	}
	for _, s := range x.Children {
		if !s.Attestation && s.Descriptor.Digest.String() == c.Subject {
			return slices.Contains(want, s.Platform)
		}
	}
	return len(want) > 0
}

// repoOf is the repository of REPO:TAG.
func repoOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

func joinPlatforms(ps []core.Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
