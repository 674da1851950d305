package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sign"
)

// Options configure Publish.
type Options struct {
	// Repo is the repository prefix, e.g. "127.0.0.1:5000/swebench".
	Repo string
	// KeepDoubleUnderscore disables "__" -> "_1776_" in names.
	KeepDoubleUnderscore bool
	// Client talks to the registries (required).
	Client *registry.Client
	// Ledger records progress (required).
	Ledger *Ledger
	// Jobs is how many instances are published at once (default 8).
	Jobs int
	// BlobJobs is how many blobs of one image are copied at once
	// (default 4).
	BlobJobs int
	// Version is the swebuild version written in index annotations.
	Version string
	// TrustLedger skips images and indexes the ledger records as published
	// at the same digest without asking the registry (zero requests); by
	// default each is confirmed with one HEAD.
	TrustLedger bool
	// RequireVerified refuses images whose gold verification did not pass.
	RequireVerified bool
	// Progress receives one line per image and index (nil: discarded).
	Progress io.Writer
	// Verification, when set, attaches to each per-arch image the in-toto
	// statement of what verify found on it (attest.go).
	Verification *VerificationSource
	// Signer, when set, signs every statement attached to a per-arch
	// image (its verification, provenance and SBOM) and attaches the
	// Sigstore bundles beside them (sign.go). nil publishes unsigned.
	Signer *sign.Signer
}

// Summary counts what a Publish run did.
type Summary struct {
	Instances      int
	Ignored        int // base/env records in the input
	ImagesPushed   int
	ImagesSkipped  int // present in the registry at the built digest
	ImagesFailed   int
	IndexesPushed  int
	IndexesSkipped int
	IndexesFailed  int // includes indexes not written because a platform failed
	// RefRetries counts manifest PUTs sent again because the registry
	// named a blob or child manifest unknown (putretry.go).
	RefRetries int
	// SignedBy names the signer (sign.Signer.Name); "" when the run was
	// unsigned. SignaturesWritten counts the signed statements this run
	// attached to per-arch images, SignaturesPresent those found attached
	// already.
	SignedBy                             string
	SignaturesWritten, SignaturesPresent int
	Failures                             []string
}

// Err returns an error when anything failed.
func (s *Summary) Err() error {
	if s.ImagesFailed == 0 && s.IndexesFailed == 0 && len(s.Failures) == 0 {
		return nil
	}
	return fmt.Errorf("%d image(s) and %d index(es) failed", s.ImagesFailed, s.IndexesFailed)
}

// String is the one-paragraph summary the CLI prints.
func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "instances: %d\n", s.Instances)
	fmt.Fprintf(&b, "images:    %d pushed, %d already present, %d failed\n", s.ImagesPushed, s.ImagesSkipped, s.ImagesFailed)
	fmt.Fprintf(&b, "indexes:   %d pushed, %d already present, %d failed\n", s.IndexesPushed, s.IndexesSkipped, s.IndexesFailed)
	if s.RefRetries > 0 {
		fmt.Fprintf(&b, "retried:   %d manifest PUT(s) whose references the registry did not see yet\n", s.RefRetries)
	}
	if s.Ignored > 0 {
		fmt.Fprintf(&b, "ignored:   %d base/env records\n", s.Ignored)
	}
	if s.SignedBy != "" {
		fmt.Fprintf(&b, "signed:    %d statement(s) signed and attached, %d already attached (%s)\n", s.SignaturesWritten, s.SignaturesPresent, s.SignedBy)
	} else if s.Instances > 0 {
		fmt.Fprintf(&b, "signed:    nothing: published UNSIGNED (no signer was given)\n")
	}
	for _, f := range s.Failures {
		fmt.Fprintf(&b, "FAILED %s\n", f)
	}
	return b.String()
}

type publisher struct {
	opts  Options
	namer manifests.Namer
	c     *registry.Client
	dest  string // registry host of opts.Repo

	mu    sync.Mutex // guards sum and progress output
	sum   Summary
	blobs sync.Map // digest.Digest -> *blobState

	layoutMu sync.Mutex
	layouts  map[string]*layoutIndex // OCI layout dir -> its images, read once per run

	refOnce sync.Once
	refs    *attest.Referrers // attachments (attest.go)
}

// layoutIndex is an OCI layout read once: every image manifest it names,
// top level or inside nested indexes, by digest.
type layoutIndex struct {
	once   sync.Once
	err    error
	images map[v1.Hash]v1.Image
}

// blobState serialises the copies of one blob, so a blob shared by many
// images goes up once and is mounted everywhere else.
type blobState struct {
	mu    sync.Mutex
	repos []string // destination repositories known to hold it in this run
}

// Publish publishes the instance images among images (per-arch
// repositories, by digest, tagged with the content key and latest), copies
// them into the instance's multi-arch repository and writes its index once
// every platform it names is present. Blobs stream from their source (an
// OCI layout or another registry) to the destination; a blob already in the
// destination registry is mounted, not uploaded again. Instances fail
// independently; the returned error is only for setup problems, check
// Summary.Err for failures.
func Publish(ctx context.Context, images []core.Image, opts Options) (*Summary, error) {
	if opts.Client == nil || opts.Ledger == nil {
		return nil, errors.New("publish: a registry client and a ledger are required")
	}
	if opts.Repo == "" {
		return nil, errors.New("publish: empty repository prefix")
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 8
	}
	if opts.BlobJobs <= 0 {
		opts.BlobJobs = 4
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	p := &publisher{
		opts:    opts,
		namer:   manifests.Namer{Repo: opts.Repo, KeepDoubleUnderscore: opts.KeepDoubleUnderscore},
		c:       opts.Client,
		layouts: map[string]*layoutIndex{},
	}
	probe, err := p.c.ParseRepository(p.namer.IndexRepo("probe"))
	if err != nil {
		return nil, fmt.Errorf("publish: repository prefix %q: %w", opts.Repo, err)
	}
	p.dest = probe.RegistryStr()
	if opts.Signer != nil {
		p.sum.SignedBy = opts.Signer.Name()
	}

	byID := map[string][]core.Image{}
	for _, im := range images {
		if im.Kind != core.KindInstance {
			p.sum.Ignored++
			continue
		}
		byID[im.InstanceID] = append(byID[im.InstanceID], im)
	}
	ids := slices.Sorted(maps.Keys(byID))
	p.sum.Instances = len(ids)
	// Ids that would get the same image names are refused before anything
	// is pushed: either would overwrite the other's images.
	collides := map[string]string{}
	for _, c := range p.namer.Collisions(ids) {
		msg := p.namer.Describe(ids, c)
		collides[ids[c.First]], collides[ids[c.Second]] = msg, msg
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Jobs)
	for _, id := range ids {
		if gctx.Err() != nil {
			break
		}
		if msg, ok := collides[id]; ok {
			p.refuse(id, byID[id], errors.New(msg))
			continue
		}
		g.Go(func() error {
			p.instance(gctx, id, byID[id])
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return &p.sum, fmt.Errorf("publish interrupted: %w", err)
	}
	return &p.sum, nil
}

func (p *publisher) progress(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.opts.Progress, format+"\n", args...)
}

func (p *publisher) count(f func(s *Summary)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.sum)
}

func (p *publisher) fail(what string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum.Failures = append(p.sum.Failures, fmt.Sprintf("%s: %v", what, err))
	fmt.Fprintf(p.opts.Progress, "FAILED  %s: %v\n", what, err)
}

// refuse fails every image of an instance and its index without a request.
func (p *publisher) refuse(id string, imgs []core.Image, err error) {
	for _, im := range imgs {
		p.count(func(s *Summary) { s.ImagesFailed++ })
		p.fail(fmt.Sprintf("image %s %s", id, im.Platform), err)
	}
	p.count(func(s *Summary) { s.IndexesFailed++ })
	rec := core.Image{Kind: core.KindIndex, InstanceID: id, Status: core.StatusFailed, Error: err.Error()}
	p.fail("index "+id, errors.Join(err, p.record("recording the failure", rec)))
}

// record appends r to the ledger; a failed write is an error of its own.
func (p *publisher) record(what string, r core.Image) error {
	if err := p.opts.Ledger.Append(r); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func short(d digest.Digest) string {
	s := d.String()
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

// published is what one per-arch image became.
type published struct {
	child manifests.Child
	src   v1.Image // the source image when it was just copied (saves a GET for the index)
	// verification is the verification statement's artifact attached to
	// the per-arch image (nil when there is none), and sbom the build's
	// SBOM artifact: both are attached in the index repository too
	// (indexrefs.go).
	verification *attest.Artifact
	sbom         digest.Digest
	// statement is the build's verification statement artifact
	// (core.Image.Verification), carried like the SBOM.
	statement digest.Digest
	// carried: this run copied the image's referrers into its repository
	// (the ledger did not record them published): the ones of the same
	// kinds from another build of the digest are superseded (supersede.go).
	carried bool
	// record is the ledger's record of the published image (written by
	// this run or found); signatures the signed statements' bundle
	// referrers attached to it (sign.go).
	record     core.Image
	signatures []digest.Digest
	// statementBytes is the verification statement, once read (summary.go).
	statementBytes []byte
}

// instance publishes one instance: its per-arch images, then its index.
func (p *publisher) instance(ctx context.Context, id string, imgs []core.Image) {
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Platform.Compare(imgs[j].Platform) < 0 })
	var done []published
	var failed []string
	seen := map[core.Platform]bool{}
	for _, im := range imgs {
		what := fmt.Sprintf("image %s %s", id, im.Platform)
		var pub published
		var skipped bool
		err := errors.New("platform listed twice")
		if !seen[im.Platform] {
			seen[im.Platform] = true
			var prev *core.Image
			if rec, ok := p.opts.Ledger.Lookup(core.KindInstance, id, im.Platform); ok {
				prev = &rec
			}
			pub, skipped, err = p.image(ctx, id, im)
			if err == nil {
				var attached bool
				pub.verification, attached, err = p.attachVerification(ctx, id, im, pub.child)
				pub.carried = pub.carried || attached
			}
			if err == nil {
				err = p.signImage(ctx, id, im, &pub, prev)
			}
			if err == nil && pub.carried {
				err = p.supersede(ctx, p.namer.ArchRepo(im.Platform.Arch(), id), im, pub)
			}
			pub.sbom, pub.statement = im.SBOM, im.Verification
		}
		if err != nil {
			p.count(func(s *Summary) { s.ImagesFailed++ })
			rec := core.Image{Kind: core.KindInstance, InstanceID: id, Platform: im.Platform, SpecKey: im.SpecKey, Verified: im.Verified, Status: core.StatusFailed, Error: err.Error()}
			if im.Digest.Validate() == nil {
				rec.Digest = im.Digest
			}
			p.fail(what, errors.Join(err, p.record("recording the failure", rec)))
			failed = append(failed, im.Platform.String())
			continue
		}
		if skipped {
			p.count(func(s *Summary) { s.ImagesSkipped++ })
			p.progress("present %s %s", what, short(im.Digest))
		} else {
			p.count(func(s *Summary) { s.ImagesPushed++ })
			p.progress("pushed  %s %s", what, short(im.Digest))
		}
		done = append(done, pub)
	}
	what := "index " + id
	if len(failed) > 0 {
		err := fmt.Errorf("not written: platform(s) %s failed", strings.Join(failed, ", "))
		p.count(func(s *Summary) { s.IndexesFailed++ })
		rec := core.Image{Kind: core.KindIndex, InstanceID: id, Status: core.StatusFailed, Error: err.Error()}
		p.fail(what, errors.Join(err, p.record("recording the failure", rec)))
		return
	}
	var prevIndex *core.Image
	if rec, ok := p.opts.Ledger.Lookup(core.KindIndex, id, core.Platform{}); ok {
		prevIndex = &rec
	}
	skipped, dg, err := p.index(ctx, id, imgs, done)
	if err == nil {
		err = p.indexReferrers(ctx, id, done)
	}
	if err == nil {
		err = p.summarize(ctx, id, dg, imgs, done, prevIndex)
	}
	for i := 0; err == nil && i < len(done); i++ {
		if pb := done[i]; pb.carried {
			err = p.supersede(ctx, p.namer.IndexRepo(id), imgs[slices.IndexFunc(imgs, func(im core.Image) bool { return im.Platform == pb.child.Platform })], pb)
		}
	}
	switch {
	case err != nil:
		p.count(func(s *Summary) { s.IndexesFailed++ })
		rec := core.Image{Kind: core.KindIndex, InstanceID: id, Digest: dg, Status: core.StatusFailed, Error: err.Error()}
		p.fail(what, errors.Join(err, p.record("recording the failure", rec)))
	case skipped:
		p.count(func(s *Summary) { s.IndexesSkipped++ })
		p.progress("present %s %s", what, short(dg))
	default:
		p.count(func(s *Summary) { s.IndexesPushed++ })
		p.progress("pushed  %s %s -> %s", what, short(dg), p.namer.IndexRepo(id))
	}
}

// admit refuses a record publish must not push: failed builds, unverified
// images when only verified ones go, unknown platforms.
func (p *publisher) admit(im core.Image) error {
	switch {
	case im.Status == core.StatusFailed:
		return fmt.Errorf("not built: %s", im.Error)
	case p.opts.RequireVerified && !im.IsVerified() && !im.IsFlaky():
		// A flaky gold (resolved in some runs only) is published,
		// labelled: its index says flaky (manifests.AnnotationGold).
		return errors.New("not verified: only images whose gold patch passed are published")
	case im.Platform.IsZero():
		return errors.New("no platform (want linux/amd64 or linux/arm64)")
	case im.Ref == "" && im.OCILayout == "":
		return errNotExported
	}
	return nil
}

// errNotExported refuses a record of an image that stayed in BuildKit's
// cache: nothing to copy from.
var errNotExported = errors.New("nothing to publish from: the record has no pushed ref and no OCI layout (the build exported nothing); build with swebuild build --push REPO, or --output type=oci,dest=DIR, and publish that build's metadata file")

// image publishes one per-arch image; skipped reports that it was already
// there (by the ledger, or by one HEAD of its content tag).
func (p *publisher) image(ctx context.Context, id string, im core.Image) (published, bool, error) {
	pub := published{child: manifests.Child{Platform: im.Platform, Digest: im.Digest.String(), SpecKey: im.SpecKey, Attestation: childAttestation(im), Flaky: im.Flaky}}
	if err := p.admit(im); err != nil {
		return pub, false, err
	}
	repo, err := p.c.ParseRepository(p.namer.ArchRepo(im.Platform.Arch(), id))
	if err != nil {
		return pub, false, err
	}
	tag := manifests.ContentTag(im.SpecKey)
	rec, ok := p.opts.Ledger.Lookup(core.KindInstance, id, im.Platform)
	done := ok && rec.Status == core.StatusPublished && rec.Digest == im.Digest && rec.SpecKey == im.SpecKey && rec.Attestation == im.Attestation && rec.SBOM == im.SBOM && rec.Verification == im.Verification && slices.Equal(rec.Flaky, im.Flaky)
	if done && p.opts.TrustLedger && rec.Size > 0 {
		pub.child.Size, pub.child.MediaType = rec.Size, types.MediaType(rec.MediaType)
		pub.record = rec
		return pub, true, nil
	}
	// One HEAD of the content tag tells whether this exact manifest is
	// already there.
	d, err := p.c.Head(ctx, repo.Tag(tag))
	if err != nil {
		return pub, false, err
	}
	result := core.Image{
		Kind: core.KindInstance, InstanceID: id, Platform: im.Platform, Digest: im.Digest,
		Ref: repo.Digest(im.Digest.String()).String(), Tags: []string{tag, manifests.LatestTag},
		SpecKey: im.SpecKey, Pins: im.Pins, BaseCommit: im.BaseCommit, Dataset: im.Dataset, Verified: im.Verified, Flaky: im.Flaky, Status: core.StatusPublished,
		Attestation: im.Attestation, AttestationSize: im.AttestationSize,
		SBOM: im.SBOM, SBOMSize: im.SBOMSize,
		Verification: im.Verification, VerificationSize: im.VerificationSize,
	}
	if d != nil && d.Digest.String() == im.Digest.String() {
		pub.child.Size, pub.child.MediaType = d.Size, d.MediaType
		result.Size, result.MediaType = d.Size, string(d.MediaType)
		pub.carried, pub.record = !done, result
		if done {
			pub.record = rec
		}
		if !done {
			if err := p.carryAttestation(ctx, repo, im, p.refRepo(im)); err != nil {
				return pub, false, err
			}
			if err := p.carrySBOM(ctx, repo, im, p.refRepo(im)); err != nil {
				return pub, false, err
			}
			if err := p.carryStatement(ctx, repo, im, p.refRepo(im)); err != nil {
				return pub, false, err
			}
			if err := p.record("recording the image", result); err != nil {
				return pub, false, err
			}
		}
		return pub, true, nil
	}

	src, err := p.copyImage(ctx, repo, tag, im, &pub.child)
	if err != nil {
		return pub, false, err
	}
	result.Size, result.MediaType = pub.child.Size, string(pub.child.MediaType)
	if err := p.record("recording the image", result); err != nil {
		return pub, false, err
	}
	pub.src, pub.carried, pub.record = src, true, result
	return pub, false, nil
}

// copyImage copies the built image im into repo: its blobs, then its
// manifest under latest and the content tag. It fills child's size and
// media type and returns the source image.
func (p *publisher) copyImage(ctx context.Context, repo name.Repository, tag string, im core.Image, child *manifests.Child) (v1.Image, error) {
	src, mountFrom, err := p.source(ctx, im)
	if err != nil {
		return nil, err
	}
	raw, err := src.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	mt, err := src.MediaType()
	if err != nil {
		return nil, fmt.Errorf("reading the media type: %w", err)
	}
	child.Size, child.MediaType = int64(len(raw)), mt
	if err := p.copyBlobs(ctx, repo, src, mountFrom); err != nil {
		return nil, err
	}
	if err := p.carryAttestation(ctx, repo, im, mountFrom); err != nil {
		return nil, err
	}
	if err := p.carrySBOM(ctx, repo, im, mountFrom); err != nil {
		return nil, err
	}
	if err := p.carryStatement(ctx, repo, im, mountFrom); err != nil {
		return nil, err
	}
	// latest first: the content tag is what a resumed run checks, so it
	// goes last, when everything else is in place.
	for _, t := range []string{manifests.LatestTag, tag} {
		if err := p.putManifest(ctx, repo.Tag(t), src, nil); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// copyBlobs makes sure the config and every layer of img are in repo,
// BlobJobs at a time.
func (p *publisher) copyBlobs(ctx context.Context, repo name.Repository, img v1.Image, mountFrom *name.Repository) error {
	cfg, err := partial.ConfigLayer(img)
	if err != nil {
		return fmt.Errorf("reading the config blob: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("reading the layers: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.BlobJobs)
	for _, l := range append(layers, cfg) {
		g.Go(func() error { return p.ensureBlob(gctx, repo, l, mountFrom) })
	}
	return g.Wait()
}

// ensureBlob makes sure blob l is in repo, copying it at most once per
// registry: it is mounted from mountFrom (a repository of the destination
// registry holding the image), else from a destination repository it was
// uploaded to in this run or an earlier one (the ledger), and uploaded,
// streamed from its source, only when none is known.
func (p *publisher) ensureBlob(ctx context.Context, repo name.Repository, l v1.Layer, mountFrom *name.Repository) error {
	h, err := l.Digest()
	if err != nil {
		return fmt.Errorf("digesting a blob: %w", err)
	}
	d := digest.Digest(h.String())
	// A layer of a remote image on another registry stays a
	// *remote.MountableLayer: registry.Client.Upload copies it from there
	// (no mount) and names that source if its bytes are wrong.
	v, _ := p.blobs.LoadOrStore(d, &blobState{})
	st := v.(*blobState)
	st.mu.Lock()
	defer st.mu.Unlock()
	target := repo.String()
	for _, r := range st.repos {
		if r == target {
			return nil
		}
	}
	from := p.mountSource(d, target, mountFrom, st.repos)
	if from != "" {
		src, err := p.c.ParseRepository(from)
		if err != nil {
			return err
		}
		if err := p.c.Upload(ctx, repo, &remote.MountableLayer{Layer: l, Reference: src.Digest(d.String())}); err != nil {
			return fmt.Errorf("copying blob %s to %s: %w", short(d), target, err)
		}
	} else {
		ref := repo.Digest(d.String()).String()
		if err := p.record("recording a blob upload", core.Image{Kind: core.KindBlob, Digest: d, Ref: ref, Status: core.StatusFailed, Error: "upload started, not confirmed"}); err != nil {
			return err
		}
		if err := p.c.Upload(ctx, repo, l); err != nil {
			return fmt.Errorf("uploading blob %s to %s: %w", short(d), target, err)
		}
		if err := p.record("recording a blob upload", core.Image{Kind: core.KindBlob, Digest: d, Ref: ref, Status: core.StatusPublished}); err != nil {
			return err
		}
	}
	st.repos = append(st.repos, target)
	return nil
}

// mountSource picks a repository of the destination registry to mount
// blob d from into target: mountFrom when it is on that registry, else one
// it was uploaded to in this run (known) or an earlier one (the ledger);
// "" when there is none.
func (p *publisher) mountSource(d digest.Digest, target string, mountFrom *name.Repository, known []string) string {
	cands := append(append([]string(nil), known...), p.opts.Ledger.BlobRepos(d)...)
	if mountFrom != nil {
		cands = append([]string{mountFrom.String()}, cands...)
	}
	for _, r := range cands {
		if r == target {
			continue
		}
		if rr, err := p.c.ParseRepository(r); err == nil && rr.RegistryStr() == p.dest {
			return r
		}
	}
	return ""
}

// source opens the built image: from its OCI layout when the directory
// exists, else from its digest-pinned ref. mountFrom is the ref's
// repository.
func (p *publisher) source(ctx context.Context, im core.Image) (v1.Image, *name.Repository, error) {
	h, err := v1.NewHash(im.Digest.String())
	if err != nil {
		return nil, nil, fmt.Errorf("digest %q: %w", im.Digest, err)
	}
	var img v1.Image
	var mountFrom *name.Repository
	if im.OCILayout != "" {
		if _, serr := os.Stat(im.OCILayout); serr == nil || im.Ref == "" {
			if img, err = p.imageFromLayout(im.OCILayout, h); err != nil {
				return nil, nil, err
			}
		}
	}
	if img == nil {
		if im.Ref == "" {
			return nil, nil, errNotExported
		}
		ref, err := p.c.ParseReference(im.Ref)
		if err != nil {
			return nil, nil, err
		}
		if img, err = p.c.Image(ctx, ref); err != nil {
			return nil, nil, err
		}
		repo := ref.Context()
		mountFrom = &repo
	}
	got, err := img.Digest()
	if err != nil {
		return nil, nil, fmt.Errorf("digesting the source manifest: %w", err)
	}
	if got != h {
		return nil, nil, fmt.Errorf("source manifest digest %s does not match the built digest %s", got, h)
	}
	return img, mountFrom, nil
}

// imageFromLayout finds manifest h in an OCI layout, looking inside nested
// indexes too (BuildKit's oci exporter may wrap a platform image in one).
// Each layout directory is read once per run.
func (p *publisher) imageFromLayout(dir string, h v1.Hash) (v1.Image, error) {
	p.layoutMu.Lock()
	li, ok := p.layouts[dir]
	if !ok {
		li = &layoutIndex{}
		p.layouts[dir] = li
	}
	p.layoutMu.Unlock()
	li.once.Do(func() { li.images, li.err = readLayout(dir) })
	if li.err != nil {
		return nil, li.err
	}
	img, ok := li.images[h]
	if !ok {
		return nil, fmt.Errorf("OCI layout %s: image manifest %s not found", dir, h)
	}
	return img, nil
}

// readLayout lists every image manifest of the OCI layout in dir.
func readLayout(dir string) (map[v1.Hash]v1.Image, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	images := map[v1.Hash]v1.Image{}
	if err := collectImages(idx, images, 0); err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return images, nil
}

func collectImages(idx v1.ImageIndex, into map[v1.Hash]v1.Image, depth int) error {
	if depth > 4 {
		return errors.New("indexes nested too deeply")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsImage():
			if _, ok := into[d.Digest]; ok {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("reading image %s: %w", d.Digest, err)
			}
			into[d.Digest] = img
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return fmt.Errorf("reading nested index %s: %w", d.Digest, err)
			}
			if err := collectImages(child, into, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// index copies each child manifest into the multi-arch repository (blobs
// mounted from the per-arch repository), then writes the index under its
// content tag and latest: the index goes up only after the registry
// accepted every child it names.
func (p *publisher) index(ctx context.Context, id string, imgs []core.Image, pubs []published) (bool, digest.Digest, error) {
	info := manifests.IndexInfo{InstanceID: id, Version: p.opts.Version}
	children := make([]manifests.Child, 0, len(pubs))
	for _, im := range imgs {
		if im.BaseCommit != "" {
			info.BaseCommit = im.BaseCommit
		}
	}
	for _, pb := range pubs {
		children = append(children, pb.child)
	}
	idx, err := manifests.BuildIndex(info, children)
	if err != nil {
		return false, "", err
	}
	dg := digest.Digest(idx.Digest)
	repo, err := p.c.ParseRepository(p.namer.IndexRepo(id))
	if err != nil {
		return false, dg, err
	}
	tag := manifests.ContentTagForChildren(children)
	rec, ok := p.opts.Ledger.Lookup(core.KindIndex, id, core.Platform{})
	done := ok && rec.Status == core.StatusPublished && rec.Digest == dg
	if done && p.opts.TrustLedger {
		return true, dg, nil
	}
	result := core.Image{
		Kind: core.KindIndex, InstanceID: id, Digest: dg, MediaType: string(types.OCIImageIndex), Size: int64(len(idx.Raw)),
		Ref: repo.Digest(idx.Digest).String(), Tags: []string{tag, manifests.LatestTag},
		SpecKey: strings.TrimPrefix(tag, "k-"), BaseCommit: info.BaseCommit, Status: core.StatusPublished,
	}
	d, err := p.c.Head(ctx, repo.Tag(tag))
	if err != nil {
		return false, dg, err
	}
	if d != nil && d.Digest.String() == idx.Digest {
		// The registry accepted this index, so its children were present.
		if !done {
			if err := p.record("recording the index", result); err != nil {
				return false, dg, err
			}
		}
		return true, dg, nil
	}
	for _, pb := range pubs {
		if err := p.copyChild(ctx, id, repo, pb); err != nil {
			return false, dg, err
		}
	}
	// Another publish into this repository may be writing the same
	// children at the same moment (putretry.go): an index refused for an
	// unknown child has every child made sure of again, then goes again.
	repair := func(ctx context.Context) error {
		for _, pb := range pubs {
			if err := p.ensureChild(ctx, id, repo, pb); err != nil {
				return err
			}
		}
		return nil
	}
	for _, t := range []string{manifests.LatestTag, tag} { // content tag last, as for images
		if err := p.putManifest(ctx, repo.Tag(t), idx, repair); err != nil {
			return false, dg, err
		}
	}
	return false, dg, p.record("recording the index", result)
}

// copyChild puts one per-arch manifest into the index repository by
// digest, unless it is there already.
func (p *publisher) copyChild(ctx context.Context, id string, repo name.Repository, pb published) error {
	ch := pb.child
	archRepo, err := p.c.ParseRepository(p.namer.ArchRepo(ch.Platform.Arch(), id))
	if err != nil {
		return err
	}
	d, err := p.c.Head(ctx, repo.Digest(ch.Digest))
	if err != nil {
		return err
	}
	if d != nil {
		if d.Digest.String() != ch.Digest {
			return fmt.Errorf("child %s: %s answers digest %s", ch.Platform, repo.Digest(ch.Digest), d.Digest)
		}
		return p.indexAttestation(ctx, repo, archRepo, ch)
	}
	src := pb.src
	if src == nil {
		if src, err = p.c.Image(ctx, archRepo.Digest(ch.Digest)); err != nil {
			return err
		}
	}
	if err := p.copyBlobs(ctx, repo, src, &archRepo); err != nil {
		return err
	}
	if err := p.putManifest(ctx, repo.Digest(ch.Digest), src, nil); err != nil {
		return err
	}
	return p.indexAttestation(ctx, repo, archRepo, ch)
}

// ensureChild makes sure the per-arch manifest of pb is in the index
// repository: one HEAD by digest, and a copy when it is missing.
func (p *publisher) ensureChild(ctx context.Context, id string, repo name.Repository, pb published) error {
	d, err := p.c.Head(ctx, repo.Digest(pb.child.Digest))
	if err != nil {
		return err
	}
	if d != nil && d.Digest.String() == pb.child.Digest {
		return nil
	}
	return p.copyChild(ctx, id, repo, pb)
}
