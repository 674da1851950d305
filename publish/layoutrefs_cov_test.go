package publish

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
)

// platformImage is a random OCI image whose config says platform p.
func platformImage(t *testing.T, p core.Platform) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", p.Arch()
	if p == core.AMD64 {
		cf.Architecture = "amd64"
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// writeBlob writes b into the layout's blobs.
func writeBlob(t *testing.T, lp layout.Path, b []byte) {
	t.Helper()
	h, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.WriteBlob(h, io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
}

// TestPublishFromLayoutCarriesReferrers, in the unit tier: an OCI layout
// as `swebuild build --output type=oci` writes it holds the amd64 image of
// an instance with its SBOM artifact as a referrer entry beside it, and
// the arm64 image inside a nested index (as BuildKit's oci exporter may
// wrap one). Publishing it finds both images, carries the SBOM artifact
// byte for byte into the per-arch repository as a referrer of the image
// and into the index repository; a record naming a digest the layout does
// not hold fails naming the layout and the digest.
func TestPublishFromLayoutCarriesReferrers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	const id = "lay__one-1"
	amd, arm := platformImage(t, core.AMD64), platformImage(t, core.ARM64)
	if err := lp.AppendImage(amd, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}), layout.WithAnnotations(map[string]string{
		ociRefName: "sweb.eval.x86_64.lay_1776_one-1:latest", manifests.AnnotationInstanceID: id, manifests.AnnotationSpecKey: "sha256:spec-amd64",
		manifests.AnnotationBaseCommit: "0123abc"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm})); err != nil {
		t.Fatal(err)
	}
	amdDesc, err := partial.Descriptor(amd)
	if err != nil {
		t.Fatal(err)
	}
	doc := &sbom.Document{Subject: amdDesc.Digest.String(), Kind: "instance", Image: "sweb.eval.x86_64.lay_1776_one-1", Platform: core.AMD64,
		Repo: "lay/one", Version: "1.0", InstanceIDs: []string{id}, Packages: []sbom.Package{{Ecosystem: "pypi", Name: "fixdep", Version: "1.0"}}}
	payload, err := doc.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	art, err := attest.NewArtifact(*amdDesc, sbom.MediaType, sbom.MediaType, payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeBlob(t, lp, attest.EmptyConfig)
	writeBlob(t, lp, payload)
	writeBlob(t, lp, art.Raw)
	refEntry := art.Descriptor
	refEntry.Annotations = map[string]string{annotationReferenceDigest: amdDesc.Digest.String()}
	if err := lp.AppendDescriptor(refEntry); err != nil {
		t.Fatal(err)
	}

	recs, errs, err := RecordsFromLayout(dir)
	if err != nil || len(errs) != 0 || len(recs) != 1 {
		t.Fatalf("RecordsFromLayout = %+v, %v, %v", recs, errs, err)
	}
	if recs[0].SBOM.String() != art.Descriptor.Digest.String() || recs[0].SBOMSize != art.Descriptor.Size {
		t.Fatalf("the record does not name the layout's SBOM: %+v", recs[0])
	}
	armDigest, err := arm.Digest()
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	recs = append(recs,
		core.Image{Kind: core.KindInstance, InstanceID: id, Platform: core.ARM64, Digest: digest.Digest(armDigest.String()), OCILayout: dir,
			SpecKey: "sha256:spec-arm64", Verified: &yes, Status: core.StatusBuilt},
		core.Image{Kind: core.KindInstance, InstanceID: "lay__two-1", Platform: core.AMD64, Digest: digest.Digest("sha256:" + strings.Repeat("9", 64)),
			OCILayout: dir, SpecKey: "sha256:spec-two", Status: core.StatusBuilt})
	recs[0].Verified = &yes

	dst := startMem(t)
	ledger, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	var progress bytes.Buffer
	client := testClient(t, -1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := Publish(ctx, recs, Options{Repo: dst.host() + "/lay", Client: client, Ledger: ledger, Jobs: 2, Version: "test", Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if sum.ImagesPushed != 2 || sum.IndexesPushed != 1 || sum.ImagesFailed != 1 || sum.IndexesFailed != 1 {
		t.Errorf("summary %+v\n%s", sum, progress.String())
	}
	if want := "OCI layout " + dir + ": image manifest sha256:" + strings.Repeat("9", 64) + " not found"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress does not say %q:\n%s", want, progress.String())
	}

	n := manifests.Namer{Repo: dst.host() + "/lay"}
	refs := &attest.Referrers{Client: client}
	for _, repoName := range []string{n.ArchRepo("x86_64", id), n.IndexRepo(id)} {
		repo, err := client.ParseRepository(repoName)
		if err != nil {
			t.Fatal(err)
		}
		listed, err := refs.List(ctx, repo, amdDesc.Digest)
		if err != nil {
			t.Fatalf("%s: listing referrers: %v", repoName, err)
		}
		found := false
		for _, d := range listed {
			found = found || d.Digest == art.Descriptor.Digest
		}
		if !found {
			t.Errorf("%s: the SBOM artifact %s is not a referrer of the image (referrers %v)", repoName, art.Descriptor.Digest, listed)
			continue
		}
		got, err := remote.Get(repo.Digest(art.Descriptor.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s: %v", repoName, err)
		}
		if !bytes.Equal(got.Manifest, art.Raw) {
			t.Errorf("%s: the SBOM manifest changed on the way", repoName)
		}
	}
}

// TestLayoutNestedTooDeeply: a layout whose indexes nest deeper than any
// exporter writes is refused, naming the layout.
func TestLayoutNestedTooDeeply(t *testing.T) {
	img := platformImage(t, core.AMD64)
	var idx v1.ImageIndex = mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})
	for i := 0; i < 6; i++ {
		idx = mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: idx})
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
	dg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	recs := []core.Image{{Kind: core.KindInstance, InstanceID: "deep__x-1", Platform: core.AMD64, Digest: digest.Digest(dg.String()),
		OCILayout: dir, SpecKey: "sha256:k", Status: core.StatusBuilt}}
	dst := startMem(t)
	ledger, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	var progress bytes.Buffer
	sum, err := Publish(context.Background(), recs, Options{Repo: dst.host() + "/deep", Client: testClient(t, -1), Ledger: ledger, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ImagesFailed != 1 || !strings.Contains(progress.String(), "OCI layout "+dir+": indexes nested too deeply") {
		t.Errorf("summary %+v:\n%s", sum, progress.String())
	}
}
