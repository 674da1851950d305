package publish

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// attachStagedSBOM attaches an SBOM document of the staged image im (a
// built record of f) with pkgs to the staging repository, as the builder
// attaches it, sets im.SBOM and im.SBOMSize, and returns the document's
// bytes.
func attachStagedSBOM(t *testing.T, ctx context.Context, refs *attest.Referrers, staging name.Repository, f *fixture, im *core.Image, pkgs []sbom.Package) []byte {
	t.Helper()
	raw, err := f.images[im.InstanceID+" "+im.Platform.String()].RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(im.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	doc := &sbom.Document{Subject: im.Digest.String(), Kind: "instance", Image: "sweb.eval." + im.Platform.Arch() + "." + im.InstanceID,
		Platform: im.Platform, InstanceIDs: []string{im.InstanceID}, Packages: pkgs}
	b, err := doc.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	a, err := attest.NewArtifact(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: int64(len(raw))}, sbom.MediaType, sbom.MediaType, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, staging, a); err != nil {
		t.Fatal(err)
	}
	im.SBOM, im.SBOMSize = digest.Digest(a.Descriptor.Digest.String()), a.Descriptor.Size
	return b
}

// artifactLayer returns the bytes of the first layer of the artifact
// manifest at repo@d (an SBOM artifact's document).
func artifactLayer(t *testing.T, ctx context.Context, c *registry.Client, repo name.Repository, d string) []byte {
	t.Helper()
	img, err := c.Image(ctx, repo.Digest(d))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) == 0 {
		t.Fatalf("%s@%s: %d layers (%v)", repo, d, len(ls), err)
	}
	rc, err := ls[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(rc); err != nil {
		t.Fatalf("%s@%s: reading its layer: %v", repo, d, err)
	}
	return got.Bytes()
}

// ofArtifactType returns the descriptors in list with artifact type at.
func ofArtifactType(list []v1.Descriptor, at string) []v1.Descriptor {
	var out []v1.Descriptor
	for _, d := range list {
		if d.ArtifactType == at {
			out = append(out, d)
		}
	}
	return out
}

// headsAndOthers splits a request log ("METHOD PATH" lines) into the HEADs
// and everything else but the /v2/ ping.
func headsAndOthers(reqs []string) (heads, other []string) {
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r, "HEAD "):
			heads = append(heads, r)
		case r == "GET /v2/":
		default:
			other = append(other, r)
		}
	}
	return heads, other
}

// publishOnLedger publishes recs with o on the ledger at ledgerPath
// (opened and closed around the run), failing the test on any error, and
// returns the summary and the progress output.
func publishOnLedger(t *testing.T, ctx context.Context, ledgerPath string, recs []core.Image, o Options) (*Summary, string) {
	t.Helper()
	led, err := OpenLedger(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	var progress bytes.Buffer
	o.Ledger, o.Progress = led, &progress
	s, err := Publish(ctx, recs, o)
	if err != nil || s.Err() != nil {
		t.Fatalf("publish to %s (ledger %s): %v %v\n%s", o.Repo, filepath.Base(ledgerPath), err, s.Err(), progress.String())
	}
	return s, progress.String()
}

// stageTwoInstances starts a source and a release registry (in memory) and
// stages the fixture's a__a-1 (amd64 and arm64) and c__c-3 (amd64 only)
// images in the source's staging/build, the repository it returns.
func stageTwoInstances(t *testing.T) (src, dst *memRegistry, f *fixture, staging name.Repository) {
	t.Helper()
	src, dst = startMem(t), startMem(t)
	f = makeFixture(t, []string{"a__a-1", "c__c-3"}, map[string]bool{"c__c-3": true}, 1024, 1)
	f.stage(t, src.host(), src.host(), "staging/build")
	staging, err := name.NewRepository(src.host()+"/staging/build", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return src, dst, f, staging
}
