package builder

import (
	"bytes"
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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
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
	inst := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64}
	instArm := &graph.Node{Key: "sweb.eval.arm64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.ARM64}
	base := &graph.Node{Key: "sweb.base.py.x86_64:latest", Kind: graph.KindBase, Platform: core.AMD64}
	resp1, _ := putManifest(t, l, `{"schemaVersion":2,"old":true}`)
	resp2, d2 := putManifest(t, l, `{"schemaVersion":2,"new":true}`)
	resp3, d3 := putManifest(t, l, `{"schemaVersion":2,"base":true}`)
	resp4, d4 := putManifest(t, l, `{"schemaVersion":2,"arm":true}`)
	for _, step := range []struct {
		n    *graph.Node
		resp map[string]string
	}{{inst, resp1}, {inst, resp2}, {base, resp3}, {instArm, resp4}} {
		if err := l.add(step.n, step.resp, nil); err != nil {
			t.Fatal(err)
		}
	}
	l.close()

	b, idx := readIndexJSON(t, dir)
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
	n := &graph.Node{Key: "sweb.base.py.x86_64:latest", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch\n")}
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
		cb := &chainBuild{s: &bkSolver{push: tc.push, layout: tc.layout}, job: Job{Node: n}, chain: []*graph.Node{n}, done: map[string]solvedNode{}}
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

// TestLayoutReferrers: an image exported as an index (image + attestation,
// as BuildKit's oci exporter writes it with provenance) is named in
// index.json by its image manifest, with its attestation and its SBOM
// artifact as referrer entries beside it (no ref name,
// vnd.docker.reference.digest = the image); a rebuild of the key drops the
// referrers of the image it replaces; a referrer the layout lacks is
// refused.
func TestLayoutReferrers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	l, err := openLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	ctx := context.Background()
	n := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64}
	export := func(salt string) (map[string]string, *Outcome) {
		_, img := putManifest(t, l, `{"schemaVersion":2,"image":"`+salt+`"}`)
		_, att := putManifest(t, l, `{"schemaVersion":2,"attestation":"`+salt+`"}`)
		imgDesc := ocispecs.Descriptor{MediaType: ocispecs.MediaTypeImageManifest, Digest: img, Size: int64(len(`{"schemaVersion":2,"image":""}`) + len(salt))}
		idx := ocispecs.Index{MediaType: ocispecs.MediaTypeImageIndex, Manifests: []ocispecs.Descriptor{
			{MediaType: imgDesc.MediaType, Digest: img, Size: imgDesc.Size, Platform: &ocispecs.Platform{OS: "linux", Architecture: "amd64"}},
			{MediaType: ocispecs.MediaTypeImageManifest, Digest: att, Size: 40, Platform: &ocispecs.Platform{OS: "unknown", Architecture: "unknown"},
				Annotations: map[string]string{AnnotationReferenceType: ReferenceTypeAttestation, AnnotationReferenceDigest: img.String()}},
		}}
		idx.SchemaVersion = 2
		raw, _ := json.Marshal(idx)
		idxDesc := ocispecs.Descriptor{MediaType: ocispecs.MediaTypeImageIndex, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
		if err := content.WriteBlob(ctx, l.store, "test-"+idxDesc.Digest.Encoded(), bytes.NewReader(raw), idxDesc); err != nil {
			t.Fatal(err)
		}
		enc, _ := json.Marshal(idxDesc)
		resp := map[string]string{exptypes.ExporterImageDigestKey: idxDesc.Digest.String(), exptypes.ExporterImageDescriptorKey: base64.StdEncoding.EncodeToString(enc)}
		// What resolveAttested finds in the exported index.
		s := &bkSolver{layout: l}
		out := &Outcome{}
		if err := s.resolveAttested(ctx, &bkclient.SolveResponse{ExporterResponse: resp}, core.AMD64, out); err != nil {
			t.Fatal(err)
		}
		if out.Digest != img.String() || out.Attestation != att.String() {
			t.Fatalf("resolved image %s attestation %s, want %s %s", out.Digest, out.Attestation, img, att)
		}
		// The SBOM artifact, as finishSBOM writes it.
		a, err := attest.NewArtifact(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: v1.Hash{Algorithm: "sha256", Hex: img.Encoded()}, Size: imgDesc.Size},
			sbom.MediaType, sbom.MediaType, []byte(`{"bomFormat":"CycloneDX","salt":"`+salt+`"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.putArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
		out.SBOMArtifact, out.SBOMArtifactSize = a.Descriptor.Digest.String(), a.Descriptor.Size
		// The verification statement, as finishStatement writes it.
		v, err := attest.StatementArtifact(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: v1.Hash{Algorithm: "sha256", Hex: img.Encoded()}, Size: imgDesc.Size},
			attest.TestResultPredicate, []byte(`{"_type":"https://in-toto.io/Statement/v1","salt":"`+salt+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.putArtifact(ctx, v); err != nil {
			t.Fatal(err)
		}
		out.Verification, out.VerificationSize = v.Descriptor.Digest.String(), v.Descriptor.Size
		return resp, out
	}
	check := func(out *Outcome) {
		t.Helper()
		_, idx := readIndexJSON(t, dir)
		ms := idx.Manifests
		if len(ms) != 4 {
			t.Fatalf("index.json has %d entries, want the image and its 3 referrers: %+v", len(ms), ms)
		}
		var img, att, doc, stmt int
		for _, d := range ms {
			switch {
			case d.Annotations[AnnotationRefName] == n.Key && d.Digest.String() == out.Digest && d.MediaType == ocispecs.MediaTypeImageManifest:
				img++
			case d.Annotations[AnnotationRefName] == "" && d.Annotations[AnnotationReferenceDigest] == out.Digest && d.Annotations[AnnotationReferenceType] == ReferenceTypeAttestation && d.Digest.String() == out.Attestation:
				att++
			case d.Annotations[AnnotationRefName] == "" && d.Annotations[AnnotationReferenceDigest] == out.Digest && d.ArtifactType == sbom.MediaType && d.Digest.String() == out.SBOMArtifact:
				doc++
			case d.Annotations[AnnotationRefName] == "" && d.Annotations[AnnotationReferenceDigest] == out.Digest && d.ArtifactType == attest.StatementMediaType && d.Digest.String() == out.Verification:
				stmt++
			}
		}
		if img != 1 || att != 1 || doc != 1 || stmt != 1 {
			t.Errorf("index.json %+v: image %d, attestation %d, SBOM %d, statement %d entries; want one each", ms, img, att, doc, stmt)
		}
	}
	resp, out := export("one")
	if err := l.add(n, resp, out); err != nil {
		t.Fatal(err)
	}
	check(out)
	// The same export again: unchanged.
	if err := l.add(n, resp, out); err != nil {
		t.Fatal(err)
	}
	check(out)
	// A rebuild with other contents: the old image's referrers go too.
	resp2, out2 := export("two")
	if err := l.add(n, resp2, out2); err != nil {
		t.Fatal(err)
	}
	check(out2)
	// An index whose image was not resolved, and a referrer not in the
	// layout, are refused.
	if err := l.add(n, resp2, &Outcome{}); err == nil || !strings.Contains(err.Error(), "not resolved") {
		t.Errorf("add of an unresolved index: %v", err)
	}
	bad := *out2
	bad.SBOMArtifact = digest.FromString("nothing").String()
	if err := l.add(n, resp2, &bad); err == nil || !strings.Contains(err.Error(), "is not in the layout") {
		t.Errorf("add with a referrer the layout lacks: %v", err)
	}
	bad = *out2
	bad.Verification = digest.FromString("no statement").String()
	if err := l.add(n, resp2, &bad); err == nil || !strings.Contains(err.Error(), "is not in the layout") {
		t.Errorf("add with a statement the layout lacks: %v", err)
	}
}

// readIndexJSON reads and decodes the index.json of the OCI layout in dir.
func readIndexJSON(t *testing.T, dir string) ([]byte, ocispecs.Index) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispecs.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatalf("%s/index.json: %v", dir, err)
	}
	return b, idx
}
