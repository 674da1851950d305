// Package drift compares the resolved environments of two publications:
// per env and per instance image (matched by kind, image name and
// platform), the packages added, removed or changed between the
// environment document (package sbom) attached to the image in set A and
// the one attached in set B, grouped by change so that one change seen on
// forty images is one group listing them. Compare is pure; Fetcher reads
// the documents from a registry (fetch.go); Write renders a report as
// JSON, Markdown or one self-contained HTML page (format.go).
package drift

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// Image kinds compared.
const (
	KindEnv      = "env"
	KindInstance = "instance"
)

// Image is one image of a publication and the environment document found
// attached to it (nil when it has none).
type Image struct {
	// Kind is KindEnv or KindInstance.
	Kind string
	// Name identifies the image within its kind: an env image's key
	// without its tag (sweb.env.fixture.x86_64.0123abcd), an instance
	// image's instance id.
	Name     string
	Platform core.Platform
	// Ref is where the image was read (REPO@sha256:...).
	Ref string
	// Doc is the image's environment document; nil: none attached.
	Doc *sbom.Document
	// Why says why an image has no document, when its record says
	// (core.Image.SBOMError: the capture or the attachment failed).
	Why string
	// Inputs are the image's recorded build inputs (its record's spec
	// key and pin rules); nil: no record says (a side read by name only).
	Inputs *Inputs
}

// Inputs are what a record says an image was built from.
type Inputs struct {
	SpecKey string
	Pins    []string
}

// Label names an image in reports: "env NAME linux/amd64".
func (im Image) Label() string { return im.Kind + " " + im.Name + " " + im.Platform.String() }

func (im Image) id() string { return im.Kind + "\x00" + im.Name + "\x00" + im.Platform.String() }

// Change kinds.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one package that differs between an image's two documents.
// From is empty for an added package, To for a removed one.
type Change struct {
	Kind      string `json:"kind"`
	Key       string `json:"key"` // sbom.Package.Key: ecosystem/name
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
}

// String is "pypi/fixdep 1.0 -> 1.1", "pypi/fixdep added 1.1" or
// "pypi/fixdep removed 1.0".
func (c Change) String() string {
	switch c.Kind {
	case Added:
		return c.Key + " added " + c.To
	case Removed:
		return c.Key + " removed " + c.From
	}
	return c.Key + " " + c.From + " -> " + c.To
}

// Image statuses in a report.
const (
	StatusUnchanged = "unchanged"   // both documents list the same packages
	StatusDrift     = "drift"       // Changes lists the differences
	StatusNoDoc     = "no-document" // one side (or both) has no document: Missing says which
	StatusOnlyA     = "only-in-a"   // the image is in set A only
	StatusOnlyB     = "only-in-b"   // the image is in set B only
)

// ImageResult is what Compare found for one image.
type ImageResult struct {
	Kind     string        `json:"kind"`
	Name     string        `json:"name"`
	Platform core.Platform `json:"platform"`
	// NameB is set B's name of an env image paired by its document's
	// repo, version and platform rather than by name (a frozen rebuild's
	// env image has a key of its own).
	NameB  string `json:"name_b,omitempty"`
	RefA   string `json:"ref_a,omitempty"`
	RefB   string `json:"ref_b,omitempty"`
	Status string `json:"status"`
	// Missing says which side has no document: "a", "b" or "both";
	// WhyA/WhyB why, when the side's record says (its capture failed).
	Missing   string   `json:"missing,omitempty"`
	WhyA      string   `json:"why_a,omitempty"`
	WhyB      string   `json:"why_b,omitempty"`
	PackagesA int      `json:"packages_a"`
	PackagesB int      `json:"packages_b"`
	Changes   []Change `json:"changes,omitempty"`
	// Cause says why the image's digest changed from A to B (an image in
	// both sets at two digests): the recorded change that explains it
	// (CauseRepair, CausePin, CauseSpec), CauseRebuild (same inputs, same
	// packages), CauseUnrecorded (same inputs, other packages: a silent
	// change) or CauseUnknown (a side without records). CauseDetail
	// names the rules added (+ID) and removed (-ID).
	Cause       string `json:"cause,omitempty"`
	CauseDetail string `json:"cause_detail,omitempty"`
}

// Label names the image in reports: "env NAME linux/amd64".
func (r ImageResult) Label() string { return r.Kind + " " + r.Name + " " + r.Platform.String() }

// Group is one change and every image showing it (labels, sorted).
type Group struct {
	Change
	Images []string `json:"images"`
}

// Summary counts a report.
type Summary struct {
	Images     int `json:"images"`
	Unchanged  int `json:"unchanged"`
	Drifted    int `json:"drifted"`
	NoDocument int `json:"no_document"`
	OnlyA      int `json:"only_in_a"`
	OnlyB      int `json:"only_in_b"`
	// Changes is the number of distinct package changes (groups): one
	// (package, from, to) counts once however many images show it. This
	// is what --max-drift limits.
	Changes int `json:"changes"`
	// ImageChanges is the number of (image, package) changes.
	ImageChanges int `json:"image_changes"`
	// Causes counts the images whose digest changed, by Cause.
	Causes map[string]int `json:"causes,omitempty"`
}

// Causes of a digest change (ImageResult.Cause), the recorded ones first.
const (
	// CauseRepair: the image gained a rule of a nightly's repair
	// (package repair, ids "repair-..."): a recorded repair.
	CauseRepair = "repair"
	// CausePin: the pin rules applied to its recipe changed.
	CausePin = "pin"
	// CauseSpec: its spec key changed, same rules: the spec tables, the
	// scripts or the build context changed.
	CauseSpec = "spec"
	// CauseRebuild: the same inputs built again, the same packages
	// resolved (the bytes differ, e.g. file times).
	CauseRebuild = "rebuild"
	// CauseUnrecorded: the same inputs built again resolved other
	// packages: nothing recorded says why it changed.
	CauseUnrecorded = "unrecorded"
	// CauseUnknown: a side has no record of the image's inputs.
	CauseUnknown = "unknown"
)

// RepairRulePrefix starts the id of every rule a nightly's repair
// proposes (repair.RuleID).
const RepairRulePrefix = "repair-"

// digestOf is the digest part of a pinned reference.
func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

// cause says why an image at a (A) and b (B) changed digest, from their
// records: the pin rules B gained or lost (a repair's first), the spec
// key, else whether its packages changed.
func cause(a, b *Image, changes int) (string, string) {
	if a.Inputs == nil || b.Inputs == nil {
		return CauseUnknown, "no record of the build inputs in " + map[bool]string{true: "A", false: "B"}[a.Inputs == nil]
	}
	var added, removed, detail []string
	for _, p := range b.Inputs.Pins {
		if !slices.Contains(a.Inputs.Pins, p) {
			added = append(added, p)
			detail = append(detail, "+"+p)
		}
	}
	for _, p := range a.Inputs.Pins {
		if !slices.Contains(b.Inputs.Pins, p) {
			removed = append(removed, p)
			detail = append(detail, "-"+p)
		}
	}
	spec := a.Inputs.SpecKey != b.Inputs.SpecKey
	switch {
	case slices.ContainsFunc(added, func(p string) bool { return strings.HasPrefix(p, RepairRulePrefix) }):
		return CauseRepair, strings.Join(detail, " ")
	case len(detail) > 0:
		return CausePin, strings.Join(detail, " ")
	case spec:
		return CauseSpec, "spec key " + short(a.Inputs.SpecKey) + " -> " + short(b.Inputs.SpecKey)
	case changes > 0:
		return CauseUnrecorded, fmt.Sprintf("same spec key and rules, %d package change(s)", changes)
	case changes < 0:
		return CauseUnknown, "same spec key and rules, packages unknown (no document)"
	}
	return CauseRebuild, "same spec key and rules, same packages"
}

func short(k string) string {
	k = strings.TrimPrefix(k, "sha256:")
	if len(k) > 12 {
		return k[:12]
	}
	return k
}

// Unrecorded are the images whose digest changed with no recorded cause
// and other packages.
func (r *Report) Unrecorded() []ImageResult {
	var out []ImageResult
	for _, im := range r.Images {
		if im.Cause == CauseUnrecorded {
			out = append(out, im)
		}
	}
	return out
}

// Report is a comparison of set A (the earlier publication, say last
// night's) against set B (say tonight's): a change goes from A to B, its
// From is A's version and To is B's.
type Report struct {
	// Schema names this JSON shape; it changes only with a new name.
	Schema string `json:"schema"`
	A      string `json:"a"`
	B      string `json:"b"`
	// Summary counts Images and Groups.
	Summary Summary `json:"summary"`
	// Groups are the changes, most widely shared first (then by key).
	Groups []Group `json:"groups"`
	// Images are every compared image: env images first, then instance
	// images, each by name and platform.
	Images []ImageResult `json:"images"`
}

// Schema is Report.Schema.
const Schema = "swebuild.drift/v1"

// Compare compares publication a (labelled labelA) against publication b
// (labelB). An image is matched by kind, name and platform; an env image
// left unmatched on both sides is then paired with one whose document has
// the same repo, version and platform when exactly one such image is left
// on each side. Images listed twice in one set are an error.
func Compare(labelA string, a []Image, labelB string, b []Image) (*Report, error) {
	ia, err := index(labelA, a)
	if err != nil {
		return nil, err
	}
	ib, err := index(labelB, b)
	if err != nil {
		return nil, err
	}
	rep := &Report{Schema: Schema, A: labelA, B: labelB, Groups: []Group{}, Images: []ImageResult{}}
	groups := map[Change][]string{}
	for _, p := range pairImages(ia, ib) {
		r := p.compare()
		for _, c := range r.Changes {
			groups[c] = append(groups[c], r.Label())
		}
		rep.Images = append(rep.Images, r)
	}
	slices.SortFunc(rep.Images, func(x, y ImageResult) int {
		return cmp.Or(cmp.Compare(kindOrder(x.Kind), kindOrder(y.Kind)), cmp.Compare(x.Name, y.Name),
			x.Platform.Compare(y.Platform), cmp.Compare(x.NameB, y.NameB))
	})
	for c, imgs := range groups {
		slices.Sort(imgs)
		rep.Groups = append(rep.Groups, Group{Change: c, Images: imgs})
	}
	slices.SortFunc(rep.Groups, func(x, y Group) int {
		return cmp.Or(-cmp.Compare(len(x.Images), len(y.Images)), cmp.Compare(x.Key, y.Key),
			cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To))
	})
	rep.summarize()
	return rep, nil
}

// imagePair is an image of publication a and its match in b; either is nil
// for an image only one side has.
type imagePair struct {
	a, b *Image
}

// pairImages matches the images of ia and ib (by id, which they lose):
// by kind, name and platform, then env images unmatched by name by the
// document's repo, version and platform when that is unambiguous on both
// sides; the rest are alone.
func pairImages(ia, ib map[string]*Image) []imagePair {
	var pairs []imagePair
	for id, x := range ia {
		if y, ok := ib[id]; ok {
			pairs = append(pairs, imagePair{x, y})
			delete(ib, id)
			delete(ia, id)
		}
	}
	ka, kb := envsByDoc(ia), envsByDoc(ib)
	for k, ids := range ka {
		if len(ids) == 1 && len(kb[k]) == 1 {
			pairs = append(pairs, imagePair{ia[ids[0]], ib[kb[k][0]]})
			delete(ia, ids[0])
			delete(ib, kb[k][0])
		}
	}
	for _, x := range ia {
		pairs = append(pairs, imagePair{x, nil})
	}
	for _, y := range ib {
		pairs = append(pairs, imagePair{nil, y})
	}
	return pairs
}

// envsByDoc are the ids of the env images of m with a document, by the
// document's repo, version and platform.
func envsByDoc(m map[string]*Image) map[string][]string {
	out := map[string][]string{}
	for id, im := range m {
		if im.Kind != KindEnv || im.Doc == nil || im.Doc.Repo == "" {
			continue
		}
		k := im.Doc.Repo + "\x00" + im.Doc.Version + "\x00" + im.Platform.String()
		out[k] = append(out[k], id)
	}
	return out
}

// compare is the pair's result, with the cause of a changed digest.
func (p imagePair) compare() ImageResult {
	r := compareOne(p.a, p.b)
	if p.a != nil && p.b != nil {
		if da, db := digestOf(p.a.Ref), digestOf(p.b.Ref); da != "" && db != "" && da != db {
			n := len(r.Changes)
			if r.Status == StatusNoDoc {
				n = -1
			}
			r.Cause, r.CauseDetail = cause(p.a, p.b, n)
		}
	}
	return r
}

// summarize counts the report's images and groups.
func (rep *Report) summarize() {
	s := &rep.Summary
	s.Images = len(rep.Images)
	s.Changes = len(rep.Groups)
	for _, r := range rep.Images {
		if r.Cause != "" {
			if s.Causes == nil {
				s.Causes = map[string]int{}
			}
			s.Causes[r.Cause]++
		}
		switch r.Status {
		case StatusUnchanged:
			s.Unchanged++
		case StatusDrift:
			s.Drifted++
		case StatusNoDoc:
			s.NoDocument++
		case StatusOnlyA:
			s.OnlyA++
		case StatusOnlyB:
			s.OnlyB++
		}
		s.ImageChanges += len(r.Changes)
	}
}

func kindOrder(k string) int {
	if k == KindEnv {
		return 0
	}
	return 1
}

func index(label string, set []Image) (map[string]*Image, error) {
	m := make(map[string]*Image, len(set))
	for i := range set {
		im := &set[i]
		if im.Kind != KindEnv && im.Kind != KindInstance {
			return nil, fmt.Errorf("set %s: image %q: kind %q (want %s or %s)", label, im.Name, im.Kind, KindEnv, KindInstance)
		}
		if _, dup := m[im.id()]; dup {
			return nil, fmt.Errorf("set %s: %s listed twice", label, im.Label())
		}
		m[im.id()] = im
	}
	return m, nil
}

func compareOne(a, b *Image) ImageResult {
	var r ImageResult
	one := a
	if one == nil {
		one = b
	}
	r.Kind, r.Name, r.Platform = one.Kind, one.Name, one.Platform
	if a != nil {
		r.RefA = a.Ref
		if a.Doc != nil {
			r.PackagesA = len(a.Doc.Packages)
		}
	}
	if b != nil {
		r.RefB = b.Ref
		if b.Doc != nil {
			r.PackagesB = len(b.Doc.Packages)
		}
		if a != nil && b.Name != a.Name {
			r.NameB = b.Name
		}
	}
	switch {
	case b == nil:
		r.Status = StatusOnlyA
		return r
	case a == nil:
		r.Status = StatusOnlyB
		return r
	case a.Doc == nil || b.Doc == nil:
		if a.Doc == nil {
			r.WhyA = a.Why
		}
		if b.Doc == nil {
			r.WhyB = b.Why
		}
	}
	switch {
	case a.Doc == nil && b.Doc == nil:
		r.Status, r.Missing = StatusNoDoc, "both"
		return r
	case a.Doc == nil:
		r.Status, r.Missing = StatusNoDoc, "a"
		return r
	case b.Doc == nil:
		r.Status, r.Missing = StatusNoDoc, "b"
		return r
	}
	r.Changes = Diff(a.Doc.Packages, b.Doc.Packages)
	r.Status = StatusUnchanged
	if len(r.Changes) > 0 {
		r.Status = StatusDrift
	}
	return r
}

// Diff returns the changes from package list old to package list new, by
// sbom.Package.Key, sorted by key. A package is changed when its version
// differs, or, at one version, its URL or conda build; a key listed
// several times (a Debian package of two architectures) compares as the
// sorted set of its versions.
func Diff(old, new []sbom.Package) []Change {
	o, n := versions(old), versions(new)
	var out []Change
	for k, ov := range o {
		nv, ok := n[k]
		switch {
		case !ok:
			out = append(out, Change{Kind: Removed, Key: k, Ecosystem: ov.eco, Name: ov.name, From: ov.show})
		case ov.cmp != nv.cmp:
			from, to := ov.show, nv.show
			if from == to { // same version, another build (URL)
				from, to = ov.alt, nv.alt
			}
			out = append(out, Change{Kind: Changed, Key: k, Ecosystem: ov.eco, Name: ov.name, From: from, To: to})
		}
	}
	for k, nv := range n {
		if _, ok := o[k]; !ok {
			out = append(out, Change{Kind: Added, Key: k, Ecosystem: nv.eco, Name: nv.name, To: nv.show})
		}
	}
	slices.SortFunc(out, func(x, y Change) int { return cmp.Compare(x.Key, y.Key) })
	return out
}

type version struct {
	eco, name string
	show      string // the version(s) shown
	alt       string // the URL file name(s), shown when versions are equal
	cmp       string // what is compared: versions and URLs
}

func versions(pkgs []sbom.Package) map[string]version {
	type acc struct {
		eco, name string
		vs, urls  []string
	}
	m := map[string]*acc{}
	for _, p := range pkgs {
		k := p.Key()
		a := m[k]
		if a == nil {
			a = &acc{eco: p.Ecosystem, name: p.Name}
			m[k] = a
		}
		v := p.Version
		if p.Arch != "" && p.Ecosystem == sbom.Deb {
			v += ":" + p.Arch
		}
		a.vs = append(a.vs, v)
		// At one version, the conda build (or the pip source) tells two
		// packages apart: shown as the URL's file name, else version=build.
		alt := p.Version
		if p.Build != "" {
			alt += "=" + p.Build
		}
		if p.URL != "" {
			alt = path.Base(p.URL)
		}
		a.urls = append(a.urls, p.URL+"\x00"+alt)
	}
	out := make(map[string]version, len(m))
	for k, a := range m {
		slices.Sort(a.vs)
		slices.Sort(a.urls)
		files := make([]string, len(a.urls))
		for i, u := range a.urls {
			_, files[i], _ = strings.Cut(u, "\x00")
		}
		show := strings.Join(a.vs, ",")
		out[k] = version{eco: a.eco, name: a.name, show: show, alt: strings.Join(files, ","),
			cmp: show + "\x00" + strings.Join(a.urls, "\x00")}
	}
	return out
}

// Exceeds reports whether the report has more than max distinct package
// changes (Summary.Changes), with the sentence saying so.
func (r *Report) Exceeds(max int) (bool, string) {
	if r.Summary.Changes <= max {
		return false, ""
	}
	return true, fmt.Sprintf("%d distinct package changes on %d images, more than the %d allowed",
		r.Summary.Changes, r.Summary.Drifted, max)
}
