package main

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// oneFileImage is an image of one layer holding one file.
func oneFileImage(t *testing.T, name, body string) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(946684800, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tw, body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestDiffImagesCommand: two images of an OCI layout by name: identical
// exits 0, different exits 1 naming the file and its cause, wrong
// arguments exit 2.
func TestDiffImagesCommand(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for name, img := range map[string]v1.Image{
		"a:latest": oneFileImage(t, "testbed/.git/index", "one"),
		"b:latest": oneFileImage(t, "testbed/.git/index", "two"),
	} {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": name})); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		out  []string
	}{
		{args: []string{"oci:" + dir + ":a:latest", "oci:" + dir + ":a:latest"}, code: 0, out: []string{"identical: the same image manifest (1 layers)"}},
		{args: []string{"oci:" + dir + ":a:latest", "oci:" + dir + ":b:latest"}, code: 1, out: []string{"testbed/.git/index", "git index: not compared", "the images differ: 1 file(s) in 1 layer(s)"}},
		{args: []string{"--format", "json", "oci:" + dir + ":a:latest", "oci:" + dir + ":b:latest"}, code: 1, out: []string{`"Path": "testbed/.git/index"`}},
		{args: []string{"oci:" + dir + ":a:latest"}, code: 2, out: []string{"want two images"}},
		{args: []string{"--format", "html", "oci:" + dir + ":a:latest", "oci:" + dir + ":b:latest"}, code: 2, out: []string{"--format"}},
		{args: []string{"oci:" + dir + ":nope", "oci:" + dir + ":a:latest"}, code: 1, out: []string{`A: OCI layout`, `"nope"`}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"diff-images"}, tc.args...), &stdout, &stderr)
		all := stdout.String() + stderr.String()
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, all)
		}
		for _, w := range tc.out {
			if !strings.Contains(all, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, all)
			}
		}
	}
}
