package drift

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/sbom"
)

// Target is one image of a publication to read the document of.
type Target struct {
	Kind     string
	Name     string
	Platform core.Platform
	// Ref pins the image: REPO@sha256:....
	Ref string
	// Why is the record's reason for having no document
	// (core.Image.SBOMError), if any.
	Why string
	// SBOM is the digest of the document's artifact manifest when the
	// record names it (core.Image.SBOM): read directly, in Ref's
	// repository, instead of listing the image's referrers.
	SBOM string
	// Inputs are the record's spec key and pin rules (nil: no record).
	Inputs *Inputs
}

// TargetsFromRecords returns the env and instance images of records (a
// build metadata file or a publish ledger, as core.ReadRecords reads
// them): the last successful record per image, in record order. Base,
// index and blob records are not compared. where names the file in
// errors; a record with no registry reference is an error.
func TargetsFromRecords(where string, recs []core.Image) ([]Target, error) {
	var ok []core.Image
	for _, r := range recs {
		if (r.Kind == core.KindEnv || r.Kind == core.KindInstance) && r.OK() {
			ok = append(ok, r)
		}
	}
	var out []Target
	seen := map[string]int{}
	for _, r := range ok {
		t := Target{Platform: r.Platform, Ref: r.Ref, Why: r.SBOMError, SBOM: r.SBOM.String(), Inputs: InputsOf(r)}
		if r.Kind == core.KindEnv {
			t.Kind, t.Name = KindEnv, strings.TrimSuffix(r.Key, ":latest")
		} else {
			t.Kind, t.Name = KindInstance, r.InstanceID
		}
		if t.Ref == "" || !strings.Contains(t.Ref, "@") {
			return nil, fmt.Errorf("%s: %s %s %s: no registry reference pinned by digest (ref %q): was it pushed?", where, r.Kind, t.Name, r.Platform, r.Ref)
		}
		id := t.Kind + " " + t.Name + " " + t.Platform.String()
		if i, dup := seen[id]; dup {
			out[i] = t // the later record wins
			continue
		}
		seen[id] = len(out)
		out = append(out, t)
	}
	return out, nil
}

// InputsOf is what record r says its image was built from; nil when it
// has no spec key.
func InputsOf(r core.Image) *Inputs {
	if r.SpecKey == "" {
		return nil
	}
	return &Inputs{SpecKey: r.SpecKey, Pins: slices.Clone(r.Pins)}
}

// AddInputs gives the targets of a prefix-named publication the inputs of
// their records in recs (its publish ledger): the last published record of
// the same instance, platform and digest.
func AddInputs(targets []Target, recs []core.Image) {
	byImage := map[string]core.Image{}
	for _, r := range recs {
		if r.Kind == core.KindInstance && r.OK() && r.Digest != "" {
			byImage[r.InstanceID+" "+r.Platform.String()+" "+r.Digest.String()] = r
		}
	}
	for i := range targets {
		t := &targets[i]
		if r, ok := byImage[t.Name+" "+t.Platform.String()+" "+digestOf(t.Ref)]; ok && t.Kind == KindInstance && t.Inputs == nil {
			t.Inputs = InputsOf(r)
		}
	}
}

// TargetsFromPublication returns the per-arch instance images of a
// prefix-named publication as the reader found them (pinned to the digest
// found), and how many it lacks (not compared). An image the registry
// refused (or answered otherwise) is an error naming it.
func TargetsFromPublication(insts []publication.Instance) (out []Target, missing int, err error) {
	for _, in := range insts {
		for _, img := range in.Images {
			if img.Problem != nil {
				return nil, 0, fmt.Errorf("%s: %w", img.Name, img.Problem)
			}
			if !img.Present {
				missing++
				continue
			}
			ref := strings.TrimSuffix(img.Name, ":"+tagOf(img.Name)) + "@" + img.Descriptor.Digest.String()
			out = append(out, Target{Kind: KindInstance, Name: in.ID, Platform: img.Platform, Ref: ref})
		}
	}
	return out, missing, nil
}

// tagOf is the tag of REPO:TAG ("" for none).
func tagOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// Fetcher reads the environment documents attached to images.
type Fetcher struct {
	Reader *publication.Reader
	// Jobs is how many images are read at once (default 8).
	Jobs int
	// Save, when set, is a directory each document read is written to
	// (SaveName), as attached: the input of a frozen rebuild.
	Save string
}

// maxDocument bounds an environment document's size.
const maxDocument = 64 << 20

// Fetch reads the document of every target, in order. An image with no
// document attached gets a nil Doc; a document that cannot be read (or
// several differing ones on one image) is an error naming the image.
func (f *Fetcher) Fetch(ctx context.Context, targets []Target) ([]Image, error) {
	jobs := f.Jobs
	if jobs <= 0 {
		jobs = 8
	}
	out := make([]Image, len(targets))
	errs := make([]error, len(targets))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, t := range targets {
		out[i] = Image{Kind: t.Kind, Name: t.Name, Platform: t.Platform, Ref: t.Ref, Why: t.Why, Inputs: t.Inputs}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			doc, raw, err := f.one(ctx, t)
			if err != nil {
				errs[i] = fmt.Errorf("%s %s %s (%s): reading its environment document: %w", t.Kind, t.Name, t.Platform, t.Ref, err)
				return
			}
			out[i].Doc = doc
			if doc != nil && f.Save != "" {
				p := filepath.Join(f.Save, SaveName(t))
				if err := os.WriteFile(p, raw, 0o644); err != nil {
					errs[i] = fmt.Errorf("saving the document of %s %s: %w", t.Kind, t.Name, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SaveName is the file name a saved document gets:
// <kind>.<name>.<os>-<arch>.cdx.json.
func SaveName(t Target) string {
	return t.Kind + "." + strings.ReplaceAll(t.Name, "/", "_") + "." + t.Platform.Slug() + ".cdx.json"
}

func (f *Fetcher) one(ctx context.Context, t Target) (*sbom.Document, []byte, error) {
	ref, err := f.Reader.Client.ParseReference(t.Ref)
	if err != nil {
		return nil, nil, err
	}
	dg, ok := ref.(name.Digest)
	if !ok {
		return nil, nil, fmt.Errorf("reference %q is not pinned by digest", t.Ref)
	}
	subject, err := v1.NewHash(dg.DigestStr())
	if err != nil {
		return nil, nil, err
	}
	repo := dg.Context()
	if t.SBOM != "" {
		h, err := v1.NewHash(t.SBOM)
		if err != nil {
			return nil, nil, fmt.Errorf("the record's sbom %q: %w", t.SBOM, err)
		}
		raw, err := f.documentBlob(ctx, repo, h, &subject)
		if err != nil {
			return nil, nil, err
		}
		d, err := sbom.Decode(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("document %s: %w", h, err)
		}
		return d, raw, nil
	}
	refs, err := f.Reader.Referrers(ctx, repo, subject)
	if err != nil {
		return nil, nil, err
	}
	var doc *sbom.Document
	var docRaw []byte
	for _, d := range refs {
		if d.ArtifactType != sbom.MediaType {
			continue
		}
		raw, err := f.documentBlob(ctx, repo, d.Digest, nil)
		if err != nil {
			return nil, nil, err
		}
		dd, err := sbom.Decode(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("document %s: %w", d.Digest, err)
		}
		if doc != nil && !samePackages(doc.Packages, dd.Packages) {
			return nil, nil, fmt.Errorf("several documents with different packages are attached (%s and another)", d.Digest)
		}
		if doc == nil {
			doc, docRaw = dd, raw
		}
	}
	return doc, docRaw, nil
}

// documentBlob reads the document layer of artifact manifest dg; with
// subject, the manifest must name it as its subject.
func (f *Fetcher) documentBlob(ctx context.Context, repo name.Repository, dg v1.Hash, subject *v1.Hash) ([]byte, error) {
	d, err := f.Reader.Manifest(ctx, repo.Digest(dg.String()))
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(d.Raw))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", dg, err)
	}
	if subject != nil && (m.Subject == nil || m.Subject.Digest != *subject) {
		return nil, fmt.Errorf("artifact %s is not a referrer of %s", dg, subject)
	}
	var layer *v1.Descriptor
	for i := range m.Layers {
		if string(m.Layers[i].MediaType) == sbom.MediaType {
			layer = &m.Layers[i]
			break
		}
	}
	if layer == nil {
		return nil, fmt.Errorf("manifest %s has no %s layer", dg, sbom.MediaType)
	}
	return f.Reader.ReadBlob(ctx, repo, *layer, maxDocument, "document")
}

func samePackages(a, b []sbom.Package) bool {
	key := func(ps []sbom.Package) []string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.Key() + "\x00" + p.Version + "\x00" + p.URL + "\x00" + p.Arch
		}
		slices.Sort(s)
		return s
	}
	return slices.Equal(key(a), key(b))
}
