package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
)

// TestLayoutCarriesProvenanceAndSBOM, on the stack: a base (the fixture's
// Debian rootfs) and an instance with listing commands built with
// --output type=oci only (no registry). The layout's index.json names the
// instance image and, beside it, BuildKit's attestation manifest (an OCI
// 1.1 artifact whose subject is the image, holding the SLSA provenance
// statement that names the Dockerfile) and the SBOM artifact (subject the
// image; the dpkg and pip packages listed in it). RecordsFromLayout reads
// both back; publishing the layout into the stack registry (distribution
// 2.8: the referrers fallback tag) carries both into the per-arch
// repository and the index repository, where attest.Referrers finds them
// as referrers of the published image; the layout's bytes arrive unchanged.
func TestLayoutCarriesProvenanceAndSBOM(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	baseDockerfile, baseFiles := stacktest.RootfsBase(t, "amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	salt := time.Now().Format(time.RFC3339Nano)
	p := core.AMD64
	baseKey := "swebuild-layoutref.base.x86_64:latest"
	id := "layoutref__one-1"
	df := "FROM " + baseKey + "\nRUN echo " + salt + " > /id\n"
	nodes := []*graph.Node{
		{Key: baseKey, Kind: graph.KindBase, Platform: p, Dockerfile: baseDockerfile, ContextFiles: baseFiles},
		{Key: "swebuild-layoutref.eval.x86_64.one:latest", Kind: graph.KindInstance, Platform: p, InstanceID: id, SpecKey: "spec-" + salt,
			Parents: []string{baseKey}, Dockerfile: []byte(df),
			Inventory: &graph.Inventory{Repo: "layoutref/one", Version: "1.0", InstanceIDs: []string{id}, Commands: []graph.ListingCommand{
				{Format: sbom.FormatDpkgQuery, Run: `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'`},
				{Format: sbom.FormatPipFreeze, Run: "python3 -m venv --system-site-packages /tmp/v && /tmp/v/bin/python -m pip freeze --all"},
			}}},
	}
	dir := filepath.Join(t.TempDir(), "layout")
	rep, err := builder.Build(ctx, nodes, builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet",
		Output: &builder.Output{Type: builder.OutputOCI, Dest: dir}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var inst builder.Outcome
	for _, res := range rep.Results {
		if res.Node.Kind == graph.KindInstance {
			inst = res.Outcome
		}
	}
	if inst.Digest == "" || inst.Attestation == "" || inst.SBOMArtifact == "" || inst.SBOMError != "" {
		t.Fatalf("instance outcome: digest %q, attestation %q, SBOM artifact %q (error %q)", inst.Digest, inst.Attestation, inst.SBOMArtifact, inst.SBOMError)
	}

	// The layout alone.
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, _ := lp.ImageIndex()
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var image, att, doc *v1.Descriptor
	for i := range im.Manifests {
		d := &im.Manifests[i]
		switch {
		case d.Annotations[manifests.AnnotationInstanceID] == id:
			image = d
		case d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" && d.Annotations["vnd.docker.reference.digest"] == inst.Digest:
			att = d
		case d.ArtifactType == sbom.MediaType && d.Annotations["vnd.docker.reference.digest"] == inst.Digest:
			doc = d
		}
	}
	if image == nil || att == nil || doc == nil {
		raw, _ := json.MarshalIndent(im, "", "  ")
		t.Fatalf("index.json lacks the image, its attestation or its SBOM:\n%s", raw)
	}
	if image.Digest.String() != inst.Digest || !image.MediaType.IsImage() || att.Digest.String() != inst.Attestation || doc.Digest.String() != inst.SBOMArtifact {
		t.Fatalf("index.json: image %s (%s), attestation %s, SBOM %s; outcome %s, %s, %s", image.Digest, image.MediaType, att.Digest, doc.Digest, inst.Digest, inst.Attestation, inst.SBOMArtifact)
	}
	subjectOf := func(dg v1.Hash) (string, []v1.Descriptor) {
		raw, err := lp.Blob(dg)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		var m v1.Manifest
		if err := json.NewDecoder(raw).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.Subject == nil {
			return "", m.Layers
		}
		return m.Subject.Digest.String(), m.Layers
	}
	layerBytes := func(l v1.Descriptor) []byte {
		rc, err := lp.Blob(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(rc)
		return b.Bytes()
	}
	sub, layers := subjectOf(att.Digest)
	var prov []byte
	predicate := ""
	for _, l := range layers {
		if pt := l.Annotations[attest.AnnotationPredicateType]; strings.HasPrefix(pt, "https://slsa.dev/provenance/") {
			prov, predicate = layerBytes(l), pt
		}
	}
	if sub != inst.Digest || prov == nil || !bytes.Contains(prov, []byte(salt)) {
		t.Fatalf("attestation %s: subject %q (want %s), provenance statement %d bytes (naming the Dockerfile's salt: %v)", att.Digest, sub, inst.Digest, len(prov), bytes.Contains(prov, []byte(salt)))
	}
	sub, layers = subjectOf(doc.Digest)
	if sub != inst.Digest || len(layers) != 1 {
		t.Fatalf("SBOM artifact: subject %q, %d layers", sub, len(layers))
	}
	sbomBytes := layerBytes(layers[0])
	parsed, err := sbom.Decode(sbomBytes)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]int{}
	for _, pk := range parsed.Packages {
		pkgs[pk.Ecosystem]++
	}
	if parsed.Subject != inst.Digest || pkgs[sbom.Deb] < 50 || pkgs[sbom.PyPI] < 3 {
		t.Fatalf("SBOM in the layout: subject %s, packages %v", parsed.Subject, pkgs)
	}
	t.Logf("layout: image %s, attestation %s (%d-byte %s statement), SBOM %s (%d deb, %d pypi)", inst.Digest, inst.Attestation, len(prov), predicate, inst.SBOMArtifact, pkgs[sbom.Deb], pkgs[sbom.PyPI])

	// publish --images oci:DIR: the records carry both.
	recs, errs, err := RecordsFromLayout(dir)
	if err != nil || len(errs) > 0 || len(recs) != 1 {
		t.Fatalf("RecordsFromLayout: %d records, %v, %v", len(recs), errs, err)
	}
	if recs[0].Attestation.String() != inst.Attestation || recs[0].SBOM.String() != inst.SBOMArtifact {
		t.Fatalf("record from the layout: attestation %q SBOM %q", recs[0].Attestation, recs[0].SBOM)
	}
	led, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	c := testClient(t, -1)
	repoPrefix := fmt.Sprintf("%s/swebuild-test/layoutref%d", st.Registry, time.Now().UnixNano())
	var progress bytes.Buffer
	s, err := Publish(ctx, recs, Options{Repo: repoPrefix, Client: c, Ledger: led, Version: "test", Progress: &progress})
	if err != nil || s.Err() != nil {
		t.Fatalf("publish: %v %v\n%s", err, s.Err(), progress.String())
	}
	t.Logf("publish:\n%s", progress.String())
	n := manifests.Namer{Repo: repoPrefix}
	refs := &attest.Referrers{Client: c}
	h, _ := v1.NewHash(inst.Digest)
	for _, r := range []string{n.ArchRepo(p.Arch(), id), n.IndexRepo(id)} {
		repo, err := name.NewRepository(r, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		list, err := refs.List(ctx, repo, h)
		if err != nil {
			t.Fatal(err)
		}
		var gotAtt, gotSBOM bool
		for _, d := range list {
			gotAtt = gotAtt || d.Digest.String() == inst.Attestation
			gotSBOM = gotSBOM || (d.Digest.String() == inst.SBOMArtifact && d.ArtifactType == sbom.MediaType)
		}
		if !gotAtt || !gotSBOM {
			t.Errorf("%s: referrers of %s %v: attestation %v, SBOM %v", r, inst.Digest, list, gotAtt, gotSBOM)
		}
		stmts, err := refs.Statements(ctx, repo, h, predicate)
		if err != nil || len(stmts) != 1 || !bytes.Equal(stmts[0], prov) {
			t.Errorf("%s: %d provenance statements (%v), equal to the layout's: %v", r, len(stmts), err, len(stmts) == 1 && bytes.Equal(stmts[0], prov))
		}
		if !bytes.Equal(artifactLayer(t, ctx, c, repo, inst.SBOMArtifact), sbomBytes) {
			t.Errorf("%s: the published SBOM differs from the layout's", r)
		}
	}

	// --push and --output together: the pushed image, attestation and SBOM
	// and the layout's are the same manifests, and the layout names them.
	dir2 := filepath.Join(t.TempDir(), "layout")
	rep2, err := builder.Build(ctx, nodes, builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet",
		Push: repoPrefix + "/staging", Output: &builder.Output{Type: builder.OutputOCI, Dest: dir2}})
	if err != nil {
		for _, res := range rep2.Results {
			t.Logf("%s: %s %s", res.Node.ID(), res.Status, res.Err)
		}
		t.Fatalf("Build with --push and --output: %v", err)
	}
	recs2, errs, err := RecordsFromLayout(dir2)
	if err != nil || len(errs) > 0 || len(recs2) != 1 {
		t.Fatalf("RecordsFromLayout: %d records, %v, %v", len(recs2), errs, err)
	}
	for _, res := range rep2.Results {
		o := res.Outcome
		if res.Node.Kind != graph.KindInstance {
			continue
		}
		if o.Ref == "" || o.Digest != inst.Digest || o.Attestation == "" || o.SBOMArtifact != inst.SBOMArtifact ||
			recs2[0].Digest.String() != o.Digest || recs2[0].Attestation.String() != o.Attestation || recs2[0].SBOM.String() != o.SBOMArtifact {
			t.Errorf("push+layout: outcome ref %q digest %s attestation %s SBOM %s; layout record %s %s %s; layout-only build %s %s %s",
				o.Ref, o.Digest, o.Attestation, o.SBOMArtifact, recs2[0].Digest, recs2[0].Attestation, recs2[0].SBOM, inst.Digest, inst.Attestation, inst.SBOMArtifact)
		}
	}
	// Published from those records (ref and layout both): the layout's
	// attestation, which the push did not write, is carried from the
	// layout.
	led2, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer led2.Close()
	var recs3 []core.Image
	for _, r := range rep2.Records() {
		if r.Kind == core.KindInstance {
			recs3 = append(recs3, r)
		}
	}
	progress.Reset()
	if s, err := Publish(ctx, recs3, Options{Repo: repoPrefix + "/both", Client: c, Ledger: led2, Version: "test", Progress: &progress}); err != nil || s.Err() != nil || s.ImagesPushed != 1 {
		t.Fatalf("publish of the push+layout records: %v %v\n%s", err, s.Err(), progress.String())
	}
	n2 := manifests.Namer{Repo: repoPrefix + "/both"}
	for _, r := range []string{n2.ArchRepo(p.Arch(), id), n2.IndexRepo(id)} {
		repo, _ := name.NewRepository(r, name.Insecure)
		stmts, err := refs.Statements(ctx, repo, h, predicate)
		if err != nil || len(stmts) != 1 {
			t.Errorf("%s: %d provenance statements (%v)", r, len(stmts), err)
		}
		list, err := refs.List(ctx, repo, h)
		if err != nil || len(list) != 2 {
			t.Errorf("%s: referrers %v (%v), want the attestation and the SBOM", r, list, err)
		}
	}
}
