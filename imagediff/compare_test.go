package imagediff

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type file struct {
	name, body, link string
	typ              byte
	mode             int64
	uid              int
	mtime            time.Time
	xattr            string
}

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func layer(t *testing.T, files ...file) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: f.typ, Mode: f.mode, Uid: f.uid, ModTime: f.mtime, Linkname: f.link, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.ModTime.IsZero() {
			h.ModTime = t0
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(f.body))
		}
		if f.xattr != "" {
			h.PAXRecords = map[string]string{"SCHILY.xattr.user.k": f.xattr}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func image(t *testing.T, env string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = []string{env}
	cf.Created = v1.Time{Time: t0}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// pyc is a CPython 3.11 .pyc header (PEP 552) and a body.
func pyc(flags, mtime uint32, body string) string {
	h := make([]byte, 16)
	copy(h, []byte{0xa7, 0x0d, 0x0d, 0x0a})
	binary.LittleEndian.PutUint32(h[4:], flags)
	binary.LittleEndian.PutUint32(h[8:], mtime)
	binary.LittleEndian.PutUint32(h[12:], 42)
	return string(h) + body
}

// TestCompare: two images sharing a base layer and differing in their
// second: every kind of difference is listed with what differs and, where
// known, why; the shared layer is not read.
func TestCompare(t *testing.T) {
	// Two checkouts of one commit, made a second apart: their git indexes
	// differ in stat data only.
	idxA, idxB := readIndex(t, gitRepo(t, "2")), ""
	time.Sleep(1100 * time.Millisecond)
	idxB = readIndex(t, gitRepo(t, "2"))
	if idxA == idxB {
		t.Fatal("two checkouts gave the same index bytes")
	}
	other := readIndex(t, gitRepo(t, "3")) // one more entry
	base := layer(t, file{name: "etc/os-release", body: "ID=debian\n"})
	la := layer(t,
		file{name: "opt/testbed/lib/a.cpython-311.pyc", body: pyc(0, 1764600000, "code")},
		file{name: "opt/testbed/lib/b.cpython-311.pyc", body: pyc(3, 0, "code")},
		file{name: "testbed/.git/index", body: idxA},
		file{name: "other/.git/index", body: idxA},
		file{name: "broken/.git/index", body: "DIRC-a"},
		file{name: "testbed/.git/ORIG_HEAD", body: "1111\n"},
		file{name: "testbed/setup.py", body: "x\n", mtime: t0.Add(time.Hour)},
		file{name: "root/setup_env.sh", body: "#!/bin/bash\nset -e\necho a\n", mode: 0o755},
		file{name: "usr/bin/python", typ: tar.TypeSymlink, link: "python3.11"},
		file{name: "testbed/owned", body: "o", uid: 0},
		file{name: "testbed/xattr", body: "x", xattr: "1"},
		file{name: "tmp/only-a", body: "a"},
		file{name: "same", body: "same"},
	)
	lb := layer(t,
		file{name: "opt/testbed/lib/a.cpython-311.pyc", body: pyc(0, 1764600100, "code")},
		file{name: "opt/testbed/lib/b.cpython-311.pyc", body: pyc(3, 0, "other")},
		file{name: "testbed/.git/index", body: idxB},
		file{name: "other/.git/index", body: other},
		file{name: "broken/.git/index", body: "DIRC-b"},
		file{name: "testbed/.git/ORIG_HEAD", body: "2222\n"},
		file{name: "testbed/setup.py", body: "x\n", mtime: t0.Add(2 * time.Hour)},
		file{name: "root/setup_env.sh", body: "#!/bin/bash\nset -e\necho b\n", mode: 0o700},
		file{name: "usr/bin/python", typ: tar.TypeSymlink, link: "python3.12"},
		file{name: "testbed/owned", body: "o", uid: 1000},
		file{name: "testbed/xattr", body: "x", xattr: "2"},
		file{name: "same", body: "same"},
		file{name: "new-in-b", body: "b"},
	)
	a, b := image(t, "A=1", base, la), image(t, "A=2", base, lb)
	r, err := Compare(context.Background(), a, b, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Identical {
		t.Fatal("identical")
	}
	if !r.Layers[0].Same || r.Layers[1].Same || r.Layers[1].Files != 13 {
		t.Errorf("layers %+v", r.Layers)
	}
	if !slices.ContainsFunc(r.Config, func(s string) bool { return strings.HasPrefix(s, "config.Env[0]: ") }) {
		t.Errorf("config diff %q does not name config.Env[0]", r.Config)
	}
	byPath := map[string]FileDiff{}
	for _, f := range r.Files {
		byPath[f.Path] = f
	}
	for _, tc := range []struct {
		path, what, cause, a string
	}{
		{path: "opt/testbed/lib/a.cpython-311.pyc", what: "content", cause: "records its source's mtime"},
		{path: "opt/testbed/lib/b.cpython-311.pyc", what: "content size", cause: "hash-based, same source hash"},
		{path: "testbed/.git/index", what: "content", cause: GitIndexStatOnly},
		{path: "other/.git/index", what: "content size", cause: "the entries differ"},
		{path: "broken/.git/index", what: "content", cause: "not compared (not a git index"},
		{path: "testbed/.git/ORIG_HEAD", what: "content", cause: "git ref", a: `line 1: "1111"`},
		{path: "testbed/setup.py", what: "mtime", cause: "build's clock", a: "mtime=2000-01-01T01:00:00Z"},
		{path: "root/setup_env.sh", what: "content mode", a: `line 3: "echo a"`},
		{path: "usr/bin/python", what: "link", a: "link=python3.11"},
		{path: "testbed/owned", what: "owner", a: "owner=0:0"},
		{path: "testbed/xattr", what: "xattrs", a: "user.k:1"},
		{path: "tmp/only-a", what: "only A", cause: "temporary file"},
		{path: "new-in-b", what: "only B"},
	} {
		f, ok := byPath[tc.path]
		if !ok {
			t.Errorf("%s: not reported", tc.path)
			continue
		}
		what := strings.Join(f.What, " ")
		if f.Only != "" {
			what = "only " + f.Only
		}
		if what != tc.what {
			t.Errorf("%s: what %q, want %q", tc.path, what, tc.what)
		}
		if !strings.Contains(f.Cause, tc.cause) || (tc.cause == "" && f.Cause != "") {
			t.Errorf("%s: cause %q, want it to say %q", tc.path, f.Cause, tc.cause)
		}
		if !strings.Contains(f.A, tc.a) {
			t.Errorf("%s: A %q, want it to hold %q", tc.path, f.A, tc.a)
		}
	}
	if _, ok := byPath["same"]; ok {
		t.Error("an equal file is reported")
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"layers: 1 of 2 identical", "files that differ: 13", "testbed/.git/index"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}

	same, err := Compare(context.Background(), a, a, "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !same.Identical || len(same.Files) != 0 {
		t.Errorf("an image against itself: %+v", same)
	}
}

func readIndex(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenLayout: an image of an OCI layout by the name index.json gives
// it (a key with its :latest) and by digest; an unknown name is an error
// naming it.
func TestOpenLayout(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img := image(t, "A=1", layer(t, file{name: "f", body: "x"}))
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "sweb.base.py.x86_64:latest"})); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"oci:" + dir + ":sweb.base.py.x86_64:latest", "oci:" + dir + "@" + d.String(), "oci:" + dir} {
		got, err := Open(context.Background(), Source{Ref: ref})
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if gd, _ := got.Digest(); gd != d {
			t.Errorf("%s: digest %s, want %s", ref, gd, d)
		}
	}
	if _, err := Open(context.Background(), Source{Ref: "oci:" + dir + ":nope:latest"}); err == nil || !strings.Contains(err.Error(), `"nope:latest"`) {
		t.Errorf("unknown name: %v", err)
	}
}
