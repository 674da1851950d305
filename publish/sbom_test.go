package publish

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
)

// TestPublishCarriesSBOM: staged images each with an SBOM attached in the
// staging repository (as the builder attaches it). A first publish of the
// records without their SBOM field (a ledger from before SBOMs), then one
// with it on the same ledger: the second finds every image present and
// carries only the SBOMs, which are then referrers of the per-arch images
// with the same bytes; a third run sends one HEAD per ref and writes
// nothing.
func TestPublishCarriesSBOM(t *testing.T) {
	_, dst, f, staging := stageTwoInstances(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testClient(t, -1)
	refs := &attest.Referrers{Client: c}
	docs := map[string][]byte{}
	for i := range f.built {
		im := &f.built[i]
		docs[im.ID()] = attachStagedSBOM(t, ctx, refs, staging, f, im,
			[]sbom.Package{{Ecosystem: sbom.PyPI, Name: "pytest", Version: "7.2.1"}, {Ecosystem: sbom.Deb, Name: "bash", Version: "5.2.15-2+b13", Arch: "amd64"}})
	}
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	run := func(recs []core.Image) (*Summary, string) {
		return publishOnLedger(t, ctx, ledgerPath, recs, Options{Repo: dst.host() + "/release", Client: testClient(t, -1), Jobs: 2, Version: "test"})
	}
	var without []core.Image
	for _, im := range f.recs() {
		im.SBOM, im.SBOMSize = "", 0
		without = append(without, im)
	}
	if s, progress := run(without); s.ImagesPushed != 3 || s.IndexesPushed != 2 {
		t.Fatalf("first publish: %+v\n%s", s, progress)
	}
	n := manifests.Namer{Repo: dst.host() + "/release"}
	before := len(dst.requests())
	if s, progress := run(f.recs()); s.ImagesSkipped != 3 || s.IndexesSkipped != 2 {
		t.Fatalf("publish with SBOMs: %+v\n%s", s, progress)
	}
	for _, r := range dst.requests()[before:] {
		if strings.HasPrefix(r, "PUT /v2/") && strings.Contains(r, "/manifests/") && !strings.Contains(r, "/manifests/sha256-") {
			t.Errorf("publish with SBOMs rewrote a manifest other than an SBOM referrer: %s", r)
		}
	}
	led, err := OpenLedger(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range f.built {
		archRepo, _ := name.NewRepository(n.ArchRepo(im.Platform.Arch(), im.InstanceID), name.Insecure)
		h, _ := v1.NewHash(im.Digest.String())
		list, err := refs.List(ctx, archRepo, h)
		if err != nil {
			t.Fatal(err)
		}
		found := ofArtifactType(list, sbom.MediaType)
		if len(found) != 1 || found[0].Digest.String() != im.SBOM.String() {
			t.Fatalf("%s: SBOM referrers %+v, want %s", im.ID(), found, im.SBOM)
		}
		if !bytes.Equal(artifactLayer(t, ctx, c, archRepo, im.SBOM.String()), docs[im.ID()]) {
			t.Errorf("%s: the published SBOM differs from the staged one", im.ID())
		}
		rec, ok := led.Lookup(core.KindInstance, im.InstanceID, im.Platform)
		if !ok || rec.SBOM != im.SBOM || rec.SBOMSize != im.SBOMSize {
			t.Errorf("%s: ledger record %+v lacks the SBOM %s", im.ID(), rec, im.SBOM)
		}
	}
	led.Close()

	// Nothing changed: one HEAD per ref (3 images, 2 indexes) and one per
	// SBOM attachment tag in the index repositories (3), nothing else.
	before = len(dst.requests())
	if s, progress := run(f.recs()); s.ImagesSkipped != 3 || s.IndexesSkipped != 2 {
		t.Fatalf("re-run: %+v\n%s", s, progress)
	}
	heads, other := headsAndOthers(dst.requests()[before:])
	if len(heads) != 8 || len(other) != 0 {
		t.Errorf("re-run: %d HEADs %v, other requests %v; want 8 HEADs and nothing else", len(heads), heads, other)
	}
}
