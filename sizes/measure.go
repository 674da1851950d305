package sizes

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/core"
)

// Image statuses.
const (
	StatusOK      = "ok"      // measured
	StatusMissing = "missing" // the registry has no such image (or no image for the platform)
	StatusError   = "error"   // anything else went wrong; see Error
)

// Options control Measure.
type Options struct {
	// Jobs is the number of concurrent registry requests (default 8).
	Jobs int
	// Uncompressed also measures uncompressed layer sizes: every unique
	// layer is downloaded once and decompressed, unless CacheDir already
	// holds its size.
	Uncompressed bool
	// CacheDir keeps one small file per layer digest with its uncompressed
	// size. Empty means no on-disk cache.
	CacheDir string
}

// Measure fetches one manifest per target (plus one per unique config, to
// check the platform) and, with Options.Uncompressed, every unique layer
// once. Per-image failures are recorded in the image's status; the error
// is only for a cancelled context or an unusable cache directory.
func Measure(ctx context.Context, src Source, spec SetSpec, targets []Target, opt Options) (*Set, error) {
	jobs := opt.Jobs
	if jobs <= 0 {
		jobs = 8
	}
	imgs := make([]Image, len(targets))
	var configs onceMap[imageConfig]
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i, t := range targets {
		imgs[i] = Image{InstanceID: t.Instance, Repo: t.Repo, Platform: t.Platform, Ref: t.Ref}
		if t.Err != "" {
			imgs[i].Status, imgs[i].Error = StatusError, t.Err
			continue
		}
		if t.Missing != "" {
			imgs[i].Status, imgs[i].Error = StatusMissing, t.Missing
			continue
		}
		g.Go(func() error {
			measureOne(gctx, src, &configs, &imgs[i])
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("measuring %s: %w", spec.Arg, err)
	}
	set := &Set{Label: spec.Arg, Scheme: spec.Scheme, Template: spec.Template, File: spec.File, Images: imgs}
	if opt.Uncompressed {
		if err := measureUncompressed(ctx, src, set, opt, jobs); err != nil {
			return nil, err
		}
	}
	set.finish()
	return set, nil
}

func measureOne(ctx context.Context, src Source, configs *onceMap[imageConfig], img *Image) {
	m, err := src.Manifest(ctx, img.Ref, img.Platform)
	if err != nil {
		img.Status, img.Error = statusOf(err), err.Error()
		return
	}
	img.Digest = m.Digest
	cfg, err := configs.do(m.Config.Digest, func() (imageConfig, error) {
		rc, err := src.Blob(ctx, img.Ref, m.Config.Digest)
		if err != nil {
			return imageConfig{}, err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		if err != nil {
			return imageConfig{}, fmt.Errorf("reading config %s: %w", m.Config.Digest, err)
		}
		c, err := parseConfig(b)
		if err != nil {
			return imageConfig{}, fmt.Errorf("parsing config %s: %w", m.Config.Digest, err)
		}
		return c, nil
	})
	if err != nil {
		img.Status, img.Error = StatusError, err.Error()
		return
	}
	if !platformMatches(cfg, img.Platform) {
		img.Status = StatusError
		img.Error = fmt.Sprintf("%s: image config says platform %s, want %s", img.Ref, cfg.platform(), img.Platform)
		return
	}
	img.Status = StatusOK
	img.layers = m.Layers
	img.Layers = len(m.Layers)
	for _, l := range m.Layers {
		img.CompressedBytes += l.Size
	}
}

func statusOf(err error) string {
	if errors.Is(err, ErrNotFound) {
		return StatusMissing
	}
	return StatusError
}

// measureUncompressed fills set.uncompressed for every unique layer of the
// measured images, reading each layer at most once (none when cached).
func measureUncompressed(ctx context.Context, src Source, set *Set, opt Options, jobs int) error {
	if opt.CacheDir != "" {
		if err := os.MkdirAll(opt.CacheDir, 0o755); err != nil {
			return fmt.Errorf("creating layer size cache: %w", err)
		}
	}
	// First reference per digest, in image order, so the same set always
	// reads a layer from the same repository.
	var digests []string
	refOf := map[string]string{}
	for _, img := range set.Images {
		for _, l := range img.layers {
			if _, ok := refOf[l.Digest]; !ok {
				refOf[l.Digest] = img.Ref
				digests = append(digests, l.Digest)
			}
		}
	}
	sizes := make([]int64, len(digests))
	errs := make([]error, len(digests))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i, d := range digests {
		g.Go(func() error {
			sizes[i], errs[i] = layerUncompressed(gctx, src, refOf[d], d, opt.CacheDir)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("measuring uncompressed sizes: %w", err)
	}
	set.uncompressed = map[string]int64{}
	failed := map[string]error{}
	for i, d := range digests {
		if errs[i] != nil {
			failed[d] = errs[i]
			continue
		}
		set.uncompressed[d] = sizes[i]
	}
	for i := range set.Images {
		img := &set.Images[i]
		if img.Status != StatusOK {
			continue
		}
		var total int64
		for _, l := range img.layers {
			if err, bad := failed[l.Digest]; bad {
				img.Status = StatusError
				img.Error = fmt.Sprintf("uncompressed size of layer %s: %v", l.Digest, err)
				break
			}
			total += set.uncompressed[l.Digest]
		}
		if img.Status == StatusOK {
			img.UncompressedBytes = &total
		}
	}
	return nil
}

// digestRE is an algorithm and hex digest; the hex's length (32 to 128) is
// checked apart, a counted repetition compiling into as many copies at
// every process's start-up.
var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z0-9]+):([a-f0-9]+)$`) })

// layerUncompressed returns the uncompressed size of one layer, from the
// cache when present; otherwise it reads the blob, checks its sha256
// digest, decompresses it (gzip, zstd or plain) and records the size.
func layerUncompressed(ctx context.Context, src Source, ref, digest, cacheDir string) (int64, error) {
	m := digestRE().FindStringSubmatch(digest)
	if m == nil || len(m[2]) < 32 || len(m[2]) > 128 {
		return 0, fmt.Errorf("malformed layer digest %q", digest)
	}
	var cachePath string
	if cacheDir != "" {
		cachePath = filepath.Join(cacheDir, m[1], m[2])
		if b, err := os.ReadFile(cachePath); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	rc, err := src.Blob(ctx, ref, digest)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	var h hash.Hash
	in := io.Reader(rc)
	if m[1] == "sha256" {
		h = sha256.New()
		in = io.TeeReader(rc, h)
	}
	n, err := decompressedSize(in)
	if err != nil {
		return 0, fmt.Errorf("decompressing layer %s: %w", digest, err)
	}
	// Drain what the decompressor did not need so the digest covers the blob.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return 0, fmt.Errorf("reading layer %s: %w", digest, err)
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != m[2] {
			return 0, fmt.Errorf("layer %s: content has digest sha256:%s", digest, got)
		}
	}
	if cachePath != "" {
		if err := writeFileAtomic(cachePath, []byte(strconv.FormatInt(n, 10)+"\n")); err != nil {
			return 0, fmt.Errorf("caching size of layer %s: %w", digest, err)
		}
	}
	return n, nil
}

// decompressedSize counts the bytes of a gzip, zstd or uncompressed stream,
// told apart by their magic numbers.
func decompressedSize(r io.Reader) (int64, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		return io.Copy(io.Discard, zr)
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		return io.Copy(io.Discard, zr)
	default:
		return io.Copy(io.Discard, br)
	}
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return core.WriteBytesAtomic(path, data, 0o644)
}

// onceMap runs a function at most once per key, also under concurrency:
// later callers wait for the first one's result.
type onceMap[V any] struct {
	mu sync.Mutex
	m  map[string]*onceEntry[V]
}

type onceEntry[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func (o *onceMap[V]) do(key string, f func() (V, error)) (V, error) {
	o.mu.Lock()
	if o.m == nil {
		o.m = map[string]*onceEntry[V]{}
	}
	e, ok := o.m[key]
	if !ok {
		e = &onceEntry[V]{done: make(chan struct{})}
		o.m[key] = e
		o.mu.Unlock()
		e.v, e.err = f()
		close(e.done)
		return e.v, e.err
	}
	o.mu.Unlock()
	<-e.done
	return e.v, e.err
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
