package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
)

// Options configure Publish.
type Options struct {
	// Repo is the repository prefix, e.g. "127.0.0.1:5000/swebench".
	Repo string
	// KeepDoubleUnderscore disables "__" -> "_1776_" in names.
	KeepDoubleUnderscore bool
	// Client talks to the registry (required).
	Client *registry.Client
	// Ledger records progress (required).
	Ledger *Ledger
	// Jobs is how many instances are published at once (default 8).
	Jobs int
	// Version is the swebuild version written in index annotations.
	Version string
	// TrustLedger skips images and indexes the ledger records as pushed at
	// the same digest without asking the registry (zero requests); by
	// default each is confirmed with one HEAD.
	TrustLedger bool
	// RequireVerified refuses images whose verified field is not true.
	RequireVerified bool
	// Progress receives one line per image and index (nil: discarded).
	Progress io.Writer
}

// Summary counts what a Publish run did.
type Summary struct {
	Instances      int
	Ignored        int // non-instance entries in the metadata
	ImagesPushed   int
	ImagesSkipped  int // present in the registry at the ledger's digest
	ImagesFailed   int
	IndexesPushed  int
	IndexesSkipped int
	IndexesFailed  int // includes indexes not written because a platform failed
	Failures       []string
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
	if s.Ignored > 0 {
		fmt.Fprintf(&b, "ignored:   %d base/env entries\n", s.Ignored)
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

	mu    sync.Mutex // guards sum and progress output
	sum   Summary
	done  int
	total int

	blobMu sync.Mutex
	blobs  map[string]*blobState // digest -> state

	layoutMu sync.Mutex
	layouts  map[string]*layoutIndex // OCI layout dir -> its images, read once per run
}

// layoutIndex is an OCI layout read once: every image manifest it names,
// top level or inside nested indexes, by digest. Reading index.json again for
// each of thousands of images sharing one layout made a run quadratic.
type layoutIndex struct {
	once   sync.Once
	err    error
	images map[v1.Hash]v1.Image
}

type blobState struct {
	mu    sync.Mutex
	repos map[string]bool // repositories known to hold the blob in this run
}

// Publish pushes every instance image in recs (per-arch repositories, by
// digest, tagged with the content key and latest), copies them into the
// instance's multi-arch repository and writes its index once every platform
// it names is present. Instances fail independently; the returned error is
// only for setup problems, check Summary.Err for failures.
func Publish(ctx context.Context, recs []core.Image, opts Options) (*Summary, error) {
	if opts.Client == nil || opts.Ledger == nil {
		return nil, errors.New("publish: Client and Ledger are required")
	}
	if opts.Repo == "" {
		return nil, errors.New("publish: empty repository prefix")
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 8
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	p := &publisher{
		opts:    opts,
		namer:   manifests.Namer{Repo: opts.Repo, KeepDoubleUnderscore: opts.KeepDoubleUnderscore},
		c:       opts.Client,
		blobs:   map[string]*blobState{},
		layouts: map[string]*layoutIndex{},
	}
	if _, err := p.c.ParseRepository(p.namer.IndexRepo("probe")); err != nil {
		return nil, fmt.Errorf("publish: repository prefix %q: %w", opts.Repo, err)
	}

	imgs, ignored := imagesFromRecords(recs)
	p.sum.Ignored = ignored
	byID := map[string][]Image{}
	for _, im := range imgs {
		byID[im.InstanceID] = append(byID[im.InstanceID], im)
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p.sum.Instances = len(ids)
	p.total = len(ids)

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Jobs)
	for _, id := range ids {
		if gctx.Err() != nil {
			break
		}
		imgs := byID[id]
		g.Go(func() error {
			p.instance(gctx, id, imgs)
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

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// instance publishes one instance: its per-arch images, then its index.
func (p *publisher) instance(ctx context.Context, id string, imgs []Image) {
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Platform < imgs[j].Platform })
	var children []manifests.Child
	srcs := map[string]v1.Image{} // platform -> image just pushed (saves a GET when copying)
	var failed []string
	seen := map[string]bool{}
	for _, im := range imgs {
		what := fmt.Sprintf("image %s %s", id, im.Platform)
		if seen[im.Platform] {
			p.count(func(s *Summary) { s.ImagesFailed++ })
			p.fail(what, errors.New("platform listed twice in the metadata file"))
			failed = append(failed, im.Platform)
			continue
		}
		seen[im.Platform] = true
		if im.BuildError != "" {
			p.count(func(s *Summary) { s.ImagesFailed++ })
			p.fail(what, fmt.Errorf("not built: %s", im.BuildError))
			failed = append(failed, im.Platform)
			continue
		}
		child, src, skipped, err := p.image(ctx, id, im)
		if err != nil {
			p.count(func(s *Summary) { s.ImagesFailed++ })
			p.fail(what, err)
			_ = p.opts.Ledger.Append(Record{Kind: KindImage, InstanceID: id, Platform: im.Platform, Digest: im.Digest, SpecKey: im.SpecKey, Verified: im.Verified, Error: err.Error()})
			failed = append(failed, im.Platform)
			continue
		}
		if skipped {
			p.count(func(s *Summary) { s.ImagesSkipped++ })
			p.progress("present %s %s", what, short(im.Digest))
		} else {
			p.count(func(s *Summary) { s.ImagesPushed++ })
			p.progress("pushed  %s %s", what, short(im.Digest))
		}
		children = append(children, child)
		if src != nil {
			srcs[im.Platform] = src
		}
	}
	what := "index " + id
	if len(failed) > 0 {
		err := fmt.Errorf("not written: platform(s) %s failed", strings.Join(failed, ", "))
		p.count(func(s *Summary) { s.IndexesFailed++ })
		p.fail(what, err)
		_ = p.opts.Ledger.Append(Record{Kind: KindIndex, InstanceID: id, Error: err.Error()})
		return
	}
	skipped, digest, err := p.index(ctx, id, imgs, children, srcs)
	switch {
	case err != nil:
		p.count(func(s *Summary) { s.IndexesFailed++ })
		p.fail(what, err)
		_ = p.opts.Ledger.Append(Record{Kind: KindIndex, InstanceID: id, Digest: digest, Error: err.Error()})
	case skipped:
		p.count(func(s *Summary) { s.IndexesSkipped++ })
		p.progress("present %s %s", what, short(digest))
	default:
		p.count(func(s *Summary) { s.IndexesPushed++ })
		p.progress("pushed  %s %s -> %s", what, short(digest), p.namer.IndexRepo(id))
	}
}

// image pushes one per-arch image; skipped reports that the ledger and one
// HEAD showed it already present.
func (p *publisher) image(ctx context.Context, id string, im Image) (manifests.Child, v1.Image, bool, error) {
	arch, err := manifests.ArchForPlatform(im.Platform)
	if err != nil {
		return manifests.Child{}, nil, false, err
	}
	if p.opts.RequireVerified && (im.Verified == nil || !*im.Verified) {
		return manifests.Child{}, nil, false, errors.New("not verified (--require-verified)")
	}
	repo, err := p.c.ParseRepository(p.namer.ArchRepo(arch, id))
	if err != nil {
		return manifests.Child{}, nil, false, err
	}
	tag := manifests.ContentTag(im.SpecKey)
	child := manifests.Child{Platform: im.Platform, Digest: im.Digest, SpecKey: im.SpecKey}

	rec, ok := p.opts.Ledger.Lookup(KindImage, id, im.Platform)
	done := ok && rec.Pushed && rec.Digest == im.Digest && rec.SpecKey == im.SpecKey
	if done && p.opts.TrustLedger && rec.Size > 0 {
		child.Size, child.MediaType = rec.Size, types.MediaType(rec.MediaType)
		return child, nil, true, nil
	}
	// Existence check by digest before any upload: one HEAD of the content
	// tag tells whether this exact manifest is already there.
	d, err := p.c.Head(ctx, repo.Tag(tag))
	if err != nil {
		return child, nil, false, err
	}
	if d != nil && d.Digest.String() == im.Digest {
		child.Size, child.MediaType = d.Size, d.MediaType
		if !done {
			if err := p.opts.Ledger.Append(Record{Kind: KindImage, InstanceID: id, Platform: im.Platform, Ref: repo.Tag(tag).String(), Digest: im.Digest, Size: d.Size, MediaType: string(d.MediaType), SpecKey: im.SpecKey, Verified: im.Verified, Pushed: true}); err != nil {
				return child, nil, false, err
			}
		}
		return child, nil, true, nil
	}

	src, mountFrom, err := p.source(ctx, im)
	if err != nil {
		return child, nil, false, err
	}
	raw, err := src.RawManifest()
	if err != nil {
		return child, nil, false, fmt.Errorf("reading manifest: %w", err)
	}
	mt, err := src.MediaType()
	if err != nil {
		return child, nil, false, fmt.Errorf("reading media type: %w", err)
	}
	child.Size, child.MediaType = int64(len(raw)), mt
	if err := p.pushImage(ctx, repo, src, mountFrom); err != nil {
		return child, nil, false, err
	}
	for _, t := range []string{tag, manifests.LatestTag} {
		if err := p.c.PutManifest(ctx, repo.Tag(t), src); err != nil {
			return child, nil, false, err
		}
	}
	if err := p.opts.Ledger.Append(Record{Kind: KindImage, InstanceID: id, Platform: im.Platform, Ref: repo.Tag(tag).String(), Digest: im.Digest, Size: child.Size, MediaType: string(mt), SpecKey: im.SpecKey, Verified: im.Verified, Pushed: true}); err != nil {
		return child, nil, false, err
	}
	return child, src, false, nil
}

// pushImage makes sure the config and every layer of img are in repo.
func (p *publisher) pushImage(ctx context.Context, repo name.Repository, img v1.Image, mountFrom *name.Repository) error {
	cfg, err := partial.ConfigLayer(img)
	if err != nil {
		return fmt.Errorf("reading config blob: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("reading layers: %w", err)
	}
	for _, l := range append(layers, cfg) {
		if err := p.ensureBlob(ctx, repo, l, mountFrom); err != nil {
			return err
		}
	}
	return nil
}

// ensureBlob uploads (or mounts) one blob into repo at most once per run.
// Uploads of the same digest are serialised, so a blob shared by many
// images goes up once and is mounted everywhere else.
func (p *publisher) ensureBlob(ctx context.Context, repo name.Repository, l v1.Layer, mountFrom *name.Repository) error {
	h, err := l.Digest()
	if err != nil {
		return fmt.Errorf("digesting blob: %w", err)
	}
	digest := h.String()
	p.blobMu.Lock()
	st, ok := p.blobs[digest]
	if !ok {
		st = &blobState{repos: map[string]bool{}}
		p.blobs[digest] = st
	}
	p.blobMu.Unlock()

	st.mu.Lock()
	defer st.mu.Unlock()
	target := repo.String()
	if st.repos[target] {
		return nil
	}
	from := mountFrom
	if from == nil || from.String() == target {
		from = nil
		cands := make([]string, 0, len(st.repos))
		for r := range st.repos {
			cands = append(cands, r)
		}
		sort.Strings(cands)
		cands = append(cands, p.opts.Ledger.BlobRepos(digest)...)
		for _, r := range cands {
			if r == target {
				continue
			}
			if rr, err := p.c.ParseRepository(r); err == nil && rr.RegistryStr() == repo.RegistryStr() {
				from = &rr
				break
			}
		}
	}
	if err := p.opts.Ledger.Append(Record{Kind: KindBlob, Ref: target, Digest: digest}); err != nil {
		return err
	}
	if err := p.c.UploadBlob(ctx, repo, l, from); err != nil {
		return err
	}
	st.repos[target] = true
	return p.opts.Ledger.Append(Record{Kind: KindBlob, Ref: target, Digest: digest, Pushed: true})
}

// source opens the built image: from its OCI layout when present, else from
// its digest-pinned ref. mountFrom is the ref's repository when it is on a
// registry blobs can be mounted from.
func (p *publisher) source(ctx context.Context, im Image) (v1.Image, *name.Repository, error) {
	h, err := v1.NewHash(im.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("digest %q: %w", im.Digest, err)
	}
	var img v1.Image
	var mountFrom *name.Repository
	if im.OCILayout != "" {
		if _, serr := os.Stat(im.OCILayout); serr == nil || im.Ref == "" {
			img, err = p.imageFromLayout(im.OCILayout, h)
			if err != nil {
				return nil, nil, err
			}
		}
	}
	if img == nil {
		ref, err := p.c.ParseReference(im.Ref)
		if err != nil {
			return nil, nil, err
		}
		img, err = p.c.Image(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		repo := ref.Context()
		mountFrom = &repo
	}
	got, err := img.Digest()
	if err != nil {
		return nil, nil, fmt.Errorf("digesting source manifest: %w", err)
	}
	if got != h {
		return nil, nil, fmt.Errorf("source manifest digest %s does not match metadata digest %s", got, h)
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

// index copies each child manifest into the multi-arch repository, confirms
// every child is present there, then writes the index under its content tag
// and latest.
func (p *publisher) index(ctx context.Context, id string, imgs []Image, children []manifests.Child, srcs map[string]v1.Image) (bool, string, error) {
	info := manifests.IndexInfo{InstanceID: id, Version: p.opts.Version}
	for _, im := range imgs {
		if im.BaseCommit != "" {
			info.BaseCommit = im.BaseCommit
		}
	}
	idx, err := manifests.BuildIndex(info, children)
	if err != nil {
		return false, "", err
	}
	repo, err := p.c.ParseRepository(p.namer.IndexRepo(id))
	if err != nil {
		return false, idx.Digest, err
	}
	tag := manifests.ContentTagForChildren(children)
	rec, ok := p.opts.Ledger.Lookup(KindIndex, id, "")
	done := ok && rec.Pushed && rec.Digest == idx.Digest
	if done && p.opts.TrustLedger {
		return true, idx.Digest, nil
	}
	d, err := p.c.Head(ctx, repo.Tag(tag))
	if err != nil {
		return false, idx.Digest, err
	}
	if d != nil && d.Digest.String() == idx.Digest {
		// The registry accepted this index, so its children were present.
		if !done {
			if err := p.opts.Ledger.Append(Record{Kind: KindIndex, InstanceID: id, Ref: repo.Tag(tag).String(), Digest: idx.Digest, SpecKey: strings.TrimPrefix(tag, "k-"), Pushed: true}); err != nil {
				return false, idx.Digest, err
			}
		}
		return true, idx.Digest, nil
	}
	for _, ch := range children {
		arch, _ := manifests.ArchForPlatform(ch.Platform)
		archRepo, err := p.c.ParseRepository(p.namer.ArchRepo(arch, id))
		if err != nil {
			return false, idx.Digest, err
		}
		d, err := p.c.Head(ctx, repo.Digest(ch.Digest))
		if err != nil {
			return false, idx.Digest, err
		}
		if d == nil {
			src := srcs[ch.Platform]
			if src == nil {
				if src, err = p.c.Image(ctx, archRepo.Digest(ch.Digest)); err != nil {
					return false, idx.Digest, err
				}
			}
			if err := p.pushImage(ctx, repo, src, &archRepo); err != nil {
				return false, idx.Digest, err
			}
			if err := p.c.PutManifest(ctx, repo.Digest(ch.Digest), src); err != nil {
				return false, idx.Digest, err
			}
			// The index goes up only after every child is confirmed present.
			d, err = p.c.Head(ctx, repo.Digest(ch.Digest))
			if err != nil {
				return false, idx.Digest, err
			}
		}
		if d == nil || d.Digest.String() != ch.Digest {
			return false, idx.Digest, fmt.Errorf("child %s %s not present in %s after copy", ch.Platform, ch.Digest, repo)
		}
	}
	for _, t := range []string{tag, manifests.LatestTag} {
		if err := p.c.PutManifest(ctx, repo.Tag(t), idx); err != nil {
			return false, idx.Digest, err
		}
	}
	if err := p.opts.Ledger.Append(Record{Kind: KindIndex, InstanceID: id, Ref: repo.Tag(tag).String(), Digest: idx.Digest, SpecKey: strings.TrimPrefix(tag, "k-"), Pushed: true}); err != nil {
		return false, idx.Digest, err
	}
	return false, idx.Digest, nil
}
