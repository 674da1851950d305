package render_test

import (
	"archive/tar"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pipeline"
)

// entry is one path of an image's file tree.
type entry struct {
	typ  byte
	mode int64
	uid  int
	gid  int
	link string
	sum  string // sha256 of a regular file's content
	// norm is sum over the content with what honestly depends on the build
	// time removed: a .pyc's source mtime (header bytes 8-11), a git
	// commit object's author and committer times; "" for other files.
	norm string
}

func (e entry) String() string {
	return fmt.Sprintf("type %c mode %o uid %d gid %d link %q sha256 %.12s", e.typ, e.mode, e.uid, e.gid, e.link, e.sum)
}

// sameButTime reports whether two entries differ only in build-time data.
func (e entry) sameButTime(f entry) bool {
	e.sum, f.sum = "", ""
	return e.norm != "" && e == f
}

var (
	looseObject = regexp.MustCompile(`^/testbed/\.git/objects/[0-9a-f]{2}/[0-9a-f]{38}$`)
	commitTime  = regexp.MustCompile(`(?m)^((?:author|committer) .* <[^>]*>) \d+ [-+]\d{4}$`)
)

// normalized returns the sha256 of data with the build-time fields of a
// .pyc or a loose git commit object removed ("" for other files).
func normalized(path string, data []byte) string {
	switch {
	case strings.HasSuffix(path, ".pyc") && len(data) >= 16:
		c := append([]byte(nil), data...)
		copy(c[8:12], make([]byte, 4))
		sum := sha256.Sum256(c)
		return hex.EncodeToString(sum[:])
	case looseObject.MatchString(path):
		zr, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return ""
		}
		obj, err := io.ReadAll(zr)
		if err != nil || !bytes.HasPrefix(obj, []byte("commit ")) {
			return ""
		}
		_, body, _ := bytes.Cut(obj, []byte{0})
		sum := sha256.Sum256(commitTime.ReplaceAll(body, []byte("$1 TIME")))
		return hex.EncodeToString(sum[:])
	}
	return ""
}

// fileTree pulls ref and reads its flattened file system (whiteouts
// applied) into path -> entry.
func fileTree(t *testing.T, ref string) map[string]entry {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", ref, err)
		}
		e := entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, link: h.Linkname}
		path := "/" + strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			e.sum, e.norm = hex.EncodeToString(sum[:]), normalized(path, data)
		}
		out[path] = e
	}
	return out
}

// buildNodes turns a result's layered nodes, or its flat Dockerfile, into
// builder nodes whose context files are found in dirs.
func buildNodes(t *testing.T, res *render.Result, flat string, dirs []string) (layered []*graph.Node, flatNode *graph.Node) {
	t.Helper()
	find := func(name string) string {
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				return filepath.Join(d, name)
			}
		}
		t.Fatalf("context file %s not in %v", name, dirs)
		return ""
	}
	flatNode = &graph.Node{
		Key: "sweb.flat." + res.Arch() + "." + strings.ToLower(res.InstanceID) + ":latest", Kind: graph.KindBase,
		Platform: res.Platform, Dockerfile: []byte(flat), ContextFiles: map[string]string{},
	}
	for _, n := range res.Nodes() {
		b := &n
		b.ContextFiles = map[string]string{}
		if n.Kind == graph.KindInstance {
			b.InstanceID = res.InstanceID
		}
		for _, ext := range n.External {
			b.ContextFiles[ext] = find(ext)
			flatNode.ContextFiles[ext] = find(ext)
		}
		layered = append(layered, b)
	}
	return layered, flatNode
}

// honestDifference says why a path may differ between the layered and the
// flat image of one instance ("" when it may not).
func honestDifference(path string) string {
	switch path {
	case "/root/setup_env.sh", "/root/setup_repo.sh":
		return "setup scripts: the layered Dockerfiles COPY them into /root, the flat one inlines them as heredocs"
	case "/testbed/.git/index", "/testbed/.git/logs/HEAD", "/testbed/.git/refs/heads/main", "/testbed/.git/logs/refs/heads/main":
		return "git index (file stat times) and the refs and logs of setup_repo.sh's `git commit --allow-empty` (made at build time)"
	}
	return ""
}

// TestFlatAndLayeredFixtureSameTree renders fixture instances (a Python and a
// JavaScript profile) layered and flat, builds both on the local stack for
// linux/amd64, pushes them to the local registry and compares the flattened
// file trees of the instance image and the flat image: paths, types, modes,
// owners, link targets and contents. Needs the stack (BUILDKIT_HOST,
// SWEBUILD_REGISTRY) and the fixture rootfs tarballs.
func TestFlatAndLayeredFixtureSameTree(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	fx := stacktest.RequireBuildFixture(ctx, t)
	ids := []string{"fixture__calc-1", "fixture__semver-1"}
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{
		Dataset: fx.Dataset, Instances: ids, Specs: fx.Specs, Pins: "default",
		CacheDir: t.TempDir(), Offline: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*graph.Node
	flatKeys := map[string]*graph.Node{}
	layeredKeys := map[string]*graph.Node{}
	for i := range loaded.Instances {
		inst := &loaded.Instances[i]
		res, err := loaded.Renderer.Render(ctx, inst, core.AMD64)
		if err != nil {
			t.Fatal(err)
		}
		flat, err := res.Flat(inst.ImageAssets)
		if err != nil {
			t.Fatal(err)
		}
		layered, flatNode := buildNodes(t, res, flat, fx.ContextDirs)
		for _, n := range layered {
			if !containsKey(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		nodes = append(nodes, flatNode)
		flatKeys[inst.InstanceID], layeredKeys[inst.InstanceID] = flatNode, layered[2]
	}
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2,
		Push: st.Registry + "/swebuild-test/flat-vs-layered", Progress: "quiet", RunDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := map[*graph.Node]string{}
	for _, r := range rep.Results {
		if r.Status != "done" {
			log, _ := os.ReadFile(r.LogPath)
			t.Fatalf("%s: %s: %v\n%s", r.Node.Key, r.Status, r.Err, tailString(string(log), 3000))
		}
		refs[r.Node] = r.Outcome.Ref
	}
	for _, id := range ids {
		lt, ft := fileTree(t, refs[layeredKeys[id]]), fileTree(t, refs[flatKeys[id]])
		var paths []string
		for p := range lt {
			paths = append(paths, p)
		}
		for p := range ft {
			if _, ok := lt[p]; !ok {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		same, explained := 0, map[string]int{}
		const (
			pyc    = ".pyc: same bytes but the source mtime in the header (ensurepip/pip install time)"
			commit = "the loose commit object of setup_repo.sh's `git commit --allow-empty`: same but author/committer time"
		)
		// Loose commit objects named by their hash (which holds the time) are
		// paired by their content without the times.
		onlyCommits := map[string]int{}
		for _, p := range paths {
			l, inL := lt[p]
			f, inF := ft[p]
			switch {
			case inL && !inF && looseObject.MatchString(p) && l.norm != "":
				onlyCommits[l.norm]++
				continue
			case inF && !inL && looseObject.MatchString(p) && f.norm != "":
				onlyCommits[f.norm]--
				continue
			case !inF && !inL:
				continue
			}
			if l.typ == tar.TypeDir && !inF || f.typ == tar.TypeDir && !inL {
				// A loose object's directory; checked through its object.
				if strings.HasPrefix(p, "/testbed/.git/objects/") {
					explained["the directory of such a commit object"]++
					continue
				}
			}
			switch {
			case inL && inF && l == f:
				same++
			case inL && inF && l.sameButTime(f) && strings.HasSuffix(p, ".pyc"):
				explained[pyc]++
			case honestDifference(p) != "":
				explained[honestDifference(p)]++
			case !inF:
				t.Errorf("%s: %s only in the layered image (%v)", id, p, l)
			case !inL:
				t.Errorf("%s: %s only in the flat image (%v)", id, p, f)
			default:
				t.Errorf("%s: %s differs:\n layered %v\n flat    %v", id, p, l, f)
			}
		}
		for norm, n := range onlyCommits {
			if n != 0 {
				t.Errorf("%s: a commit object (%.12s) is only in one image", id, norm)
			} else {
				explained[commit]++
			}
		}
		t.Logf("%s: %d paths identical (layered %d, flat %d paths); explained differences: %v", id, same, len(lt), len(ft), explained)
	}
}

func containsKey(nodes []*graph.Node, n *graph.Node) bool {
	for _, m := range nodes {
		if m.Key == n.Key && m.Platform == n.Platform {
			return true
		}
	}
	return false
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
