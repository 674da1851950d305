package builder

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/errdefs"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/swebuild/swebuild/core"
)

func TestParseOutput(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Output
		wantErr string
	}{
		{in: "type=oci,dest=out", want: Output{Type: "oci", Dest: "out"}},
		{in: "type=oci,dest=/abs/dir,tar=false", want: Output{Type: "oci", Dest: "/abs/dir"}},
		// buildx reads the value as CSV: a quoted field may hold commas;
		// keys are case-insensitive.
		{in: `type=oci,"dest=a,b"`, want: Output{Type: "oci", Dest: "a,b"}},
		{in: "TYPE=oci, Dest=x", want: Output{Type: "oci", Dest: "x"}},
		{in: "", wantErr: "empty value"},
		{in: "out", wantErr: "bare path is buildx's type=local"},
		{in: "type=oci", wantErr: "dest= is required"},
		{in: "dest=x", wantErr: "type= is required"},
		{in: "type=oci,dest=x,tar=true", wantErr: "tar=true is not supported"},
		{in: "type=oci,dest=x,tar=maybe", wantErr: "tar=maybe is not a boolean"},
		{in: "type=registry,name=r", wantErr: `unknown key "name"`},
		{in: "type=registry", wantErr: "type=registry is not an output here"},
		{in: "type=docker,dest=x", wantErr: "type=docker is not supported"},
		{in: "type=local,dest=x", wantErr: "type=local is not supported"},
		{in: "type=oci,dest=x,compression=zstd", wantErr: `unknown key "compression"`},
		{in: "type=oci,dest=x,dest=y", wantErr: "dest given twice"},
		{in: "type=oci,dest=-", wantErr: "dest=- (a tar stream on stdout) is not supported"},
		{in: "type=oci,dest", wantErr: `field "dest" is not key=value`},
		{in: `type=oci,"dest=x`, wantErr: "quote"},
	} {
		got, err := ParseOutput(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseOutput(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseOutput(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// putManifest writes a manifest blob into the layout's store and returns
// the exporter response BuildKit gives for it.
func putManifest(t *testing.T, l *ociLayout, body string) (map[string]string, digest.Digest) {
	t.Helper()
	b := []byte(body)
	dg := digest.FromBytes(b)
	desc := ocispecs.Descriptor{MediaType: ocispecs.MediaTypeImageManifest, Digest: dg, Size: int64(len(b))}
	if err := content.WriteBlob(context.Background(), l.store, "test-"+dg.Encoded(), strings.NewReader(body), desc); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(desc)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		exptypes.ExporterImageDigestKey:     dg.String(),
		exptypes.ExporterImageDescriptorKey: base64.StdEncoding.EncodeToString(raw),
	}, dg
}

// TestLayoutIndex: one entry per key and platform, a rebuilt image
// replaces its entry, entries are sorted, and go-containerregistry reads the
// layout.
func TestLayoutIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	l, err := openLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	inst := &Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: KindInstance, InstanceID: "a__b-1", Platform: core.AMD64}
	instArm := &Node{Key: "sweb.eval.arm64.a__b-1:latest", Kind: KindInstance, InstanceID: "a__b-1", Platform: core.ARM64}
	base := &Node{Key: "sweb.base.py.x86_64:latest", Kind: KindBase, Platform: core.AMD64}
	resp1, _ := putManifest(t, l, `{"schemaVersion":2,"old":true}`)
	resp2, d2 := putManifest(t, l, `{"schemaVersion":2,"new":true}`)
	resp3, d3 := putManifest(t, l, `{"schemaVersion":2,"base":true}`)
	resp4, d4 := putManifest(t, l, `{"schemaVersion":2,"arm":true}`)
	for _, step := range []struct {
		n    *Node
		resp map[string]string
	}{{inst, resp1}, {inst, resp2}, {base, resp3}, {instArm, resp4}} {
		if err := l.add(step.n, step.resp, nil); err != nil {
			t.Fatal(err)
		}
	}
	l.close()

	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispecs.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	type entry struct{ name, id, arch string }
	var got []entry
	var digests []digest.Digest
	for _, d := range idx.Manifests {
		got = append(got, entry{d.Annotations[AnnotationRefName], d.Annotations["io.swebuild.instance-id"], d.Platform.Architecture})
		digests = append(digests, d.Digest)
	}
	want := []entry{{"sweb.base.py.x86_64:latest", "", "amd64"}, {"sweb.eval.arm64.a__b-1:latest", "a__b-1", "arm64"}, {"sweb.eval.x86_64.a__b-1:latest", "a__b-1", "amd64"}}
	if len(got) != len(want) {
		t.Fatalf("index.json entries %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
	if wantD := []digest.Digest{d3, d4, d2}; len(digests) == 3 && (digests[0] != wantD[0] || digests[1] != wantD[1] || digests[2] != wantD[2]) {
		t.Errorf("digests %v, want %v (the rebuilt image replaces its entry)", digests, wantD)
	}
	if _, err := os.Stat(filepath.Join(dir, "ingest")); !os.IsNotExist(err) {
		t.Errorf("the content store's empty ingest directory is left behind: %v", err)
	}

	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 3 || im.Manifests[2].Digest.String() != d2.String() {
		t.Errorf("go-containerregistry reads %d entries (%v), want 3 with %s last", len(im.Manifests), im.Manifests, d2)
	}

	// Opening it again keeps the entries.
	if _, err := openLayout(dir); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || string(b2) != string(b) {
		t.Errorf("reopening the layout changed index.json (%v)", err)
	}

	// A digest BuildKit did not write into the layout is refused.
	bad := map[string]string{exptypes.ExporterImageDigestKey: digest.FromString("x").String(), exptypes.ExporterImageDescriptorKey: resp1[exptypes.ExporterImageDescriptorKey]}
	if err := l.add(inst, bad, nil); err == nil || !strings.Contains(err.Error(), "does not describe") {
		t.Errorf("add with a mismatched descriptor: %v", err)
	}
}

// TestExportEntries: a push, an OCI layout, both, or neither (the image
// kept in BuildKit's cache) become the solve's export entries.
func TestExportEntries(t *testing.T) {
	l, err := openLayout(filepath.Join(t.TempDir(), "layout"))
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Key: "sweb.base.py.x86_64:latest", Kind: KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch\n")}
	for _, tc := range []struct {
		push   string
		layout *ociLayout
		want   string // type[push]... in order
	}{
		{want: "image[]"},
		{push: "127.0.0.1:5000/x", want: "image[true]"},
		{layout: l, want: "oci[]"},
		{push: "127.0.0.1:5000/x", layout: l, want: "image[true] oci[]"},
	} {
		cb := &chainBuild{s: &bkSolver{push: tc.push, layout: tc.layout}, job: Job{Node: n}, chain: []*Node{n}, done: map[string]solvedNode{}}
		so, err := cb.prepare()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range so.Exports {
			got = append(got, e.Type+"["+e.Attrs["push"]+"]")
			if e.Type == "oci" && (e.OutputStore != l.store || e.Attrs["tar"] != "false") {
				t.Errorf("push %q: the oci export does not write into the layout's store as a directory: %+v", tc.push, e)
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("push %q, layout %v: exports %v, want %s", tc.push, tc.layout != nil, got, tc.want)
		}
	}
}

// TestSerialWriters: a second writer of the same blob waits for the first
// to close instead of failing with "locked", then finds the blob there.
func TestSerialWriters(t *testing.T) {
	l, err := openLayout(filepath.Join(t.TempDir(), "layout"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := "blob"
	desc := ocispecs.Descriptor{Digest: digest.FromString(body), Size: int64(len(body))}
	w1, err := l.store.Writer(ctx, content.WithRef("layer-x"), content.WithDescriptor(desc))
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		w2, err := l.store.Writer(ctx, content.WithRef("layer-x"), content.WithDescriptor(desc))
		if err == nil {
			w2.Close()
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second writer did not wait for the first: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := w1.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := w1.Commit(ctx, desc.Size, desc.Digest); err != nil {
		t.Fatal(err)
	}
	w1.Close()
	if err := <-second; !errdefs.IsAlreadyExists(err) {
		t.Errorf("the second writer after the first committed: %v, want already exists", err)
	}
	// A cancelled wait returns.
	w3, err := l.store.Writer(ctx, content.WithRef("layer-y"))
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.store.Writer(cctx, content.WithRef("layer-y")); err == nil {
		t.Error("a writer waiting on a held ref ignored its context")
	}
}
