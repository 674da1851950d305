package imagediff

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Report is what Compare found.
type Report struct {
	A, B Side
	// Identical: the two image manifests have the same digest.
	Identical bool
	// Config lists the image config fields that differ ("created",
	// "history[3].created", "config.Env", "rootfs.diff_ids[2]").
	Config []string `json:",omitempty"`
	// Layers pairs the layers by position.
	Layers []LayerPair
	// Files are the files that differ, layer by layer, by path.
	Files []FileDiff `json:",omitempty"`
}

// Side is one image compared.
type Side struct {
	Ref      string
	Manifest string
	Config   string
	Layers   []string // layer digests (compressed), base first
}

// LayerPair is the layers at one position.
type LayerPair struct {
	Index int
	A, B  string // digests; "" when that image has no layer here
	// DiffA, DiffB are the uncompressed digests (diff ids).
	DiffA, DiffB string
	Same         bool
	// Files is how many files differ in it.
	Files int
}

// FileDiff is one file (tar entry) that differs in one layer.
type FileDiff struct {
	Layer int
	Path  string
	// Only is "A" or "B" when the entry is in that image's layer only.
	Only string `json:",omitempty"`
	// What differs: content, size, type, mode, owner, mtime, link,
	// xattrs.
	What []string `json:",omitempty"`
	// A and B say what each side has for what differs.
	A, B string `json:",omitempty"`
	// Cause is the known reason, when one is recognised.
	Cause string `json:",omitempty"`
}

// entry is a tar entry of a layer, as compared.
type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	size     int64
	mtime    time.Time
	link     string
	xattrs   map[string]string
	sum      string // sha256 of the content (regular files)
	head     []byte // first bytes of the content
	small    []byte // the whole content when small
}

const smallFile = 64 << 10

// maxGitIndex is the largest git index kept whole to compare its entries
// (a checkout of 100,000 files has an index of about 10 MiB).
const maxGitIndex = 64 << 20

// Compare compares image a with image b: manifests, configs and every
// layer whose digest differs, file by file.
func Compare(ctx context.Context, a, b v1.Image, refA, refB string) (*Report, error) {
	r := &Report{}
	var err error
	if r.A, err = side(a, refA); err != nil {
		return nil, err
	}
	if r.B, err = side(b, refB); err != nil {
		return nil, err
	}
	r.Identical = r.A.Manifest == r.B.Manifest
	if r.Identical {
		for i, d := range r.A.Layers {
			r.Layers = append(r.Layers, LayerPair{Index: i, A: d, B: d, Same: true})
		}
		return r, nil
	}
	if r.A.Config != r.B.Config {
		if r.Config, err = configDiff(a, b); err != nil {
			return nil, err
		}
	}
	la, err := a.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers of %s: %w", refA, err)
	}
	lb, err := b.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers of %s: %w", refB, err)
	}
	for i := range max(len(la), len(lb)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lp := LayerPair{Index: i}
		var ea, eb map[string]*entry
		if i < len(la) {
			lp.A = r.A.Layers[i]
			if d, err := la[i].DiffID(); err == nil {
				lp.DiffA = d.String()
			}
		}
		if i < len(lb) {
			lp.B = r.B.Layers[i]
			if d, err := lb[i].DiffID(); err == nil {
				lp.DiffB = d.String()
			}
		}
		lp.Same = lp.A != "" && lp.A == lp.B
		if !lp.Same {
			if i < len(la) {
				if ea, err = readLayer(la[i]); err != nil {
					return nil, fmt.Errorf("%s layer %d (%s): %w", refA, i, lp.A, err)
				}
			}
			if i < len(lb) {
				if eb, err = readLayer(lb[i]); err != nil {
					return nil, fmt.Errorf("%s layer %d (%s): %w", refB, i, lp.B, err)
				}
			}
			files := diffLayer(i, ea, eb)
			lp.Files = len(files)
			r.Files = append(r.Files, files...)
		}
		r.Layers = append(r.Layers, lp)
	}
	return r, nil
}

func side(img v1.Image, ref string) (Side, error) {
	s := Side{Ref: ref}
	d, err := img.Digest()
	if err != nil {
		return s, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	s.Manifest = d.String()
	c, err := img.ConfigName()
	if err != nil {
		return s, fmt.Errorf("config of %s: %w", ref, err)
	}
	s.Config = c.String()
	m, err := img.Manifest()
	if err != nil {
		return s, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	for _, l := range m.Layers {
		s.Layers = append(s.Layers, l.Digest.String())
	}
	return s, nil
}

// readLayer reads a layer's tar entries by path (cleaned, no leading "./"
// or "/").
func readLayer(l v1.Layer) (map[string]*entry, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out := map[string]*entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e := &entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, size: h.Size, mtime: h.ModTime.UTC(), link: h.Linkname}
		for k, v := range h.PAXRecords {
			if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
				if e.xattrs == nil {
					e.xattrs = map[string]string{}
				}
				e.xattrs[name] = v
			}
		}
		if h.Typeflag == tar.TypeReg {
			hs := sha256.New()
			var head bytes.Buffer
			var body io.Writer = hs
			var small bytes.Buffer
			keep := h.Size <= smallFile || (isGitIndex(cleanPath(h.Name)) && h.Size <= maxGitIndex)
			if keep {
				body = io.MultiWriter(hs, &small)
			}
			if _, err := io.Copy(body, io.TeeReader(io.LimitReader(tr, 16), &head)); err != nil {
				return nil, err
			}
			if _, err := io.Copy(body, tr); err != nil {
				return nil, err
			}
			e.sum = hex.EncodeToString(hs.Sum(nil))
			e.head = head.Bytes()
			if keep {
				e.small = small.Bytes()
			}
		}
		out[cleanPath(h.Name)] = e
	}
}

func cleanPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	return p
}

// diffLayer lists the entries that differ between two versions of layer i.
func diffLayer(i int, a, b map[string]*entry) []FileDiff {
	paths := slices.Sorted(maps.Keys(a))
	for p := range b {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []FileDiff
	for _, p := range paths {
		ea, eb := a[p], b[p]
		switch {
		case eb == nil:
			out = append(out, FileDiff{Layer: i, Path: p, Only: "A", A: describe(ea), Cause: explain(p, ea, nil, nil)})
			continue
		case ea == nil:
			out = append(out, FileDiff{Layer: i, Path: p, Only: "B", B: describe(eb), Cause: explain(p, nil, eb, nil)})
			continue
		}
		var what, da, db []string
		add := func(name string, va, vb any) {
			what = append(what, name)
			da = append(da, fmt.Sprintf("%s=%v", name, va))
			db = append(db, fmt.Sprintf("%s=%v", name, vb))
		}
		if ea.typ != eb.typ {
			add("type", typeName(ea.typ), typeName(eb.typ))
		}
		if ea.sum != eb.sum {
			add("content", short(ea.sum), short(eb.sum))
		}
		if ea.size != eb.size {
			add("size", ea.size, eb.size)
		}
		if ea.mode != eb.mode {
			add("mode", fmt.Sprintf("%#o", ea.mode), fmt.Sprintf("%#o", eb.mode))
		}
		if ea.uid != eb.uid || ea.gid != eb.gid {
			add("owner", fmt.Sprintf("%d:%d", ea.uid, ea.gid), fmt.Sprintf("%d:%d", eb.uid, eb.gid))
		}
		if !ea.mtime.Equal(eb.mtime) {
			add("mtime", ea.mtime.Format(time.RFC3339), eb.mtime.Format(time.RFC3339))
		}
		if ea.link != eb.link {
			add("link", ea.link, eb.link)
		}
		if !reflect.DeepEqual(ea.xattrs, eb.xattrs) {
			add("xattrs", ea.xattrs, eb.xattrs)
		}
		if len(what) == 0 {
			continue
		}
		if la, lb, n, ok := firstLineDiff(ea.small, eb.small); ok && ea.sum != eb.sum && !isGitIndex(p) {
			da = append(da, fmt.Sprintf("line %d: %q", n, la))
			db = append(db, fmt.Sprintf("line %d: %q", n, lb))
		}
		out = append(out, FileDiff{Layer: i, Path: p, What: what, A: strings.Join(da, " "), B: strings.Join(db, " "), Cause: explain(p, ea, eb, what)})
	}
	return out
}

// firstLineDiff finds the first line that differs between two small text
// files.
func firstLineDiff(a, b []byte) (string, string, int, bool) {
	if a == nil || b == nil || bytes.IndexByte(a, 0) >= 0 || bytes.IndexByte(b, 0) >= 0 {
		return "", "", 0, false
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return clip(x), clip(y), i + 1, true
		}
	}
	return "", "", 0, false
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:97] + "..."
	}
	return s
}

func describe(e *entry) string {
	s := fmt.Sprintf("%s mode=%#o owner=%d:%d mtime=%s", typeName(e.typ), e.mode, e.uid, e.gid, e.mtime.Format(time.RFC3339))
	if e.typ == tar.TypeReg {
		s += fmt.Sprintf(" size=%d sha256=%s", e.size, short(e.sum))
	}
	if e.link != "" {
		s += " link=" + e.link
	}
	return s
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func typeName(t byte) string {
	switch t {
	case tar.TypeReg:
		return "file"
	case tar.TypeDir:
		return "dir"
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hardlink"
	case tar.TypeChar:
		return "char"
	case tar.TypeBlock:
		return "block"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("type%q", t)
}

// explain names the known cause of a difference, "" when none is known.
func explain(p string, a, b *entry, what []string) string {
	base := path.Base(p)
	onlyTime := slices.Equal(what, []string{"mtime"})
	switch {
	case strings.HasPrefix(base, ".wh."):
		return "whiteout: a file the layer deletes"
	case onlyTime:
		return "file time from the build's clock (no SOURCE_DATE_EPOCH with rewrite-timestamp, or a different epoch)"
	case strings.HasSuffix(p, ".pyc"):
		return explainPyc(a, b)
	case isGitIndex(p):
		return explainGitIndex(a, b)
	case strings.Contains(p, "/.git/objects/pack/"):
		return "git pack: gc's delta search (pack.threads > 1 orders objects by thread timing) or different objects (a commit's date)"
	case strings.Contains(p, "/.git/objects/info/commit-graph") || strings.HasSuffix(p, "/.git/objects/info/packs"):
		return "git commit-graph/pack list: follows the pack and commit ids"
	case strings.Contains(p, "/.git/objects/"):
		return "git object: a commit dated by the build's clock (GIT_AUTHOR_DATE/GIT_COMMITTER_DATE unset)"
	case strings.Contains(p, "/.git/logs/"):
		return "git reflog: entries record commit ids and the time of each ref update"
	case strings.Contains(p, "/.git/refs/") || strings.HasSuffix(p, "/.git/HEAD") || strings.HasSuffix(p, "/.git/ORIG_HEAD") || strings.HasSuffix(p, "/.git/packed-refs"):
		return "git ref: names a commit whose id differs (its date)"
	case base == "RECORD" && strings.Contains(p, ".dist-info/"):
		return "pip RECORD: lists the hash and size of each installed file, some of which differ"
	case base == "direct_url.json":
		return "pip direct_url.json: where the package was installed from"
	case strings.Contains(p, ".egg-info/"):
		return "setuptools egg-info written by the install"
	case strings.HasPrefix(p, "var/log/") || strings.HasPrefix(p, "var/cache/"):
		return "log or cache written at build time"
	case strings.HasPrefix(p, "root/.cache/"):
		return "a tool's cache in the build user's home"
	case strings.HasPrefix(p, "tmp/"):
		return "temporary file left by the build"
	}
	return ""
}

func isGitIndex(p string) bool { return p == ".git/index" || strings.HasSuffix(p, "/.git/index") }

// GitIndexStatOnly starts the cause of a git index whose entries were
// compared and found equal but for their stat data.
const GitIndexStatOnly = "git index: the same entries; only their stat data differ"

// explainGitIndex compares two git indexes with every entry's stat data
// zeroed.
func explainGitIndex(a, b *entry) string {
	if a == nil || b == nil || a.small == nil || b.small == nil {
		return "git index: holds the stat data (ctime, mtime, device, inode) of the checked-out files"
	}
	za, _, errA := zeroIndexStat(a.small)
	zb, _, errB := zeroIndexStat(b.small)
	switch {
	case errA != nil || errB != nil:
		return fmt.Sprintf("git index: not compared (%v)", errors.Join(errA, errB))
	case bytes.Equal(za, zb):
		return GitIndexStatOnly + " (ctime, mtime, device, inode of the checkout: the build's clock and file system; no git setting keeps them out)"
	}
	return "git index: the entries differ (not only their stat data: other files, modes or object ids)"
}

// explainPyc reads the .pyc headers (PEP 552: magic, flags, then the
// source's mtime and size, or its hash).
func explainPyc(a, b *entry) string {
	if a == nil || b == nil || len(a.head) < 16 || len(b.head) < 16 {
		return "compiled Python byte-code written by the build"
	}
	fa, fb := binary.LittleEndian.Uint32(a.head[4:8]), binary.LittleEndian.Uint32(b.head[4:8])
	if fa == 0 && fb == 0 {
		ma, mb := binary.LittleEndian.Uint32(a.head[8:12]), binary.LittleEndian.Uint32(b.head[8:12])
		if ma != mb {
			return fmt.Sprintf(".pyc records its source's mtime (timestamp-based, PEP 552 flags 0): %s vs %s; SOURCE_DATE_EPOCH makes py_compile write checked-hash ones",
				time.Unix(int64(ma), 0).UTC().Format(time.RFC3339), time.Unix(int64(mb), 0).UTC().Format(time.RFC3339))
		}
		return ".pyc (timestamp-based) with the same source mtime: the byte-code itself differs"
	}
	if fa != fb {
		return fmt.Sprintf(".pyc invalidation mode differs (PEP 552 flags %d vs %d)", fa, fb)
	}
	if !bytes.Equal(a.head[8:16], b.head[8:16]) {
		return ".pyc (hash-based): its source differs"
	}
	return ".pyc (hash-based, same source hash): the byte-code itself differs (marshal of interned or unordered constants)"
}

// configDiff lists the config fields that differ.
func configDiff(a, b v1.Image) ([]string, error) {
	ra, err := a.RawConfigFile()
	if err != nil {
		return nil, err
	}
	rb, err := b.RawConfigFile()
	if err != nil {
		return nil, err
	}
	var va, vb any
	if err := json.Unmarshal(ra, &va); err != nil {
		return nil, fmt.Errorf("decoding config: %w", err)
	}
	if err := json.Unmarshal(rb, &vb); err != nil {
		return nil, fmt.Errorf("decoding config: %w", err)
	}
	var out []string
	jsonDiff("", va, vb, &out)
	if len(out) == 0 {
		out = append(out, "(same fields and values, different bytes: key order or spacing)")
	}
	return out, nil
}

func jsonDiff(at string, a, b any, out *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Sorted(maps.Keys(x))
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			jsonDiff(join(at, k), x[k], y[k], out)
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		for i := range x {
			jsonDiff(fmt.Sprintf("%s[%d]", at, i), x[i], y[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: %s vs %s", at, compact(a), compact(b)))
	}
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
