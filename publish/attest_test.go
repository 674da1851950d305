package publish

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/verification"
)

// TestPublishCarriesAttestations: staged images with a build attestation
// (an artifact whose subject is the image, as BuildKit's oci-artifact
// attestation manifests are) and a verify summary for one of them. After
// publish, each per-arch image has its attestation (and the verified one
// its verification statement) among its referrers, each index lists the
// attestations after the images and holds them in its repository; a re-run
// on the same ledger sends one HEAD per ref plus one per verification
// attachment and writes nothing.
func TestPublishCarriesAttestations(t *testing.T) {
	src, dst, f, staging := stageTwoInstances(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testClient(t, -1)
	for i := range f.built {
		im := &f.built[i]
		raw, _ := f.images[im.InstanceID+" "+im.Platform.String()].RawManifest()
		h, _ := v1.NewHash(im.Digest.String())
		subject := v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: int64(len(raw))}
		payload := []byte(fmt.Sprintf(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"https://slsa.dev/provenance/v1","subject":[{"digest":{"sha256":%q}}],"predicate":{}}`, h.Hex))
		a, err := attest.NewArtifact(subject, "application/vnd.docker.attestation.manifest.v1+json", attest.StatementMediaType, payload, map[string]string{attest.AnnotationPredicateType: "https://slsa.dev/provenance/v1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []v1.Layer{static.NewLayer(attest.EmptyConfig, "application/vnd.oci.empty.v1+json"), static.NewLayer(payload, attest.StatementMediaType)} {
			if err := c.Upload(ctx, staging, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Put(ctx, staging.Digest(a.Descriptor.Digest.String()), rawTaggable{a.Raw}); err != nil {
			t.Fatal(err)
		}
		im.Attestation, im.AttestationSize = digest.Digest(a.Descriptor.Digest.String()), a.Descriptor.Size
	}
	// verify's gold verdict for a__a-1 on amd64, with its control
	// unresolved.
	report := `{"a__a-1": {"resolved": true, "tests_status": {"FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {"success": ["t2", "t3"], "failure": []}}}}`
	img := src.host() + "/staging/build@" + f.digests["a__a-1 linux/amd64"]
	verdicts := []verification.Verdict{{
		InstanceID: "a__a-1", Platform: core.AMD64, Image: img, GoldResolved: true, ControlUnresolved: core.Bool(true), Runs: 1,
		Report: []byte(report), EvalScript: []byte("#!/bin/bash\npytest\n"),
		Settings: &verification.Settings{Grading: "v5", TimeoutSeconds: 1800, MaxOutput: 1 << 20, Network: "none", Repeat: 1},
	}}
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	run := func() (*Summary, string) {
		return publishOnLedger(t, ctx, ledgerPath, f.recs(), Options{Repo: dst.host() + "/release", Client: testClient(t, -1), Jobs: 2, Version: "test",
			Verification: &VerificationSource{Verdicts: verdicts, Verifier: "swebuild test"}})
	}
	s, progress := run()
	if s.ImagesPushed != 3 || s.IndexesPushed != 2 || !strings.Contains(progress, "attached verification a__a-1 linux/amd64") {
		t.Fatalf("%+v\n%s", s, progress)
	}
	n := manifests.Namer{Repo: dst.host() + "/release"}
	refs := &attest.Referrers{Client: c}
	for _, im := range f.built {
		archRepo, _ := name.NewRepository(n.ArchRepo(im.Platform.Arch(), im.InstanceID), name.Insecure)
		h, _ := v1.NewHash(im.Digest.String())
		prov, err := refs.Statements(ctx, archRepo, h, "https://slsa.dev/provenance/v1")
		if err != nil || len(prov) != 1 {
			t.Errorf("%s %s: %d provenance statements (%v)", im.InstanceID, im.Platform, len(prov), err)
		}
		vs, err := refs.Statements(ctx, archRepo, h, attest.TestResultPredicate)
		want := 0
		if im.InstanceID == "a__a-1" && im.Platform == core.AMD64 {
			want = 1
		}
		if err != nil || len(vs) != want {
			t.Fatalf("%s %s: %d verification statements (%v), want %d", im.InstanceID, im.Platform, len(vs), err, want)
		}
		if want == 1 {
			tr, err := attest.ParseVerificationStatement(vs[0])
			if err != nil || tr.SubjectDigest != im.Digest.String() || strings.Join(tr.PassedTests, ",") != "t1,t2,t3" || tr.Extra["controlUnresolved"] != true || tr.Extra["gradingVersion"] != "SWE-bench 5.0.2" {
				t.Errorf("statement %+v %v", tr, err)
			}
		}
		// The index lists the attestation, which is in its repository.
		idxRepo, _ := name.NewRepository(n.IndexRepo(im.InstanceID), name.Insecure)
		d, err := c.Get(ctx, idxRepo.Tag("latest"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(d.Manifest, []byte(im.Attestation.String())) {
			t.Errorf("%s: the index does not list %s's attestation", im.InstanceID, im.Platform)
		}
		if hd, err := c.Head(ctx, idxRepo.Digest(im.Attestation.String())); err != nil || hd == nil {
			t.Errorf("%s: attestation %s not in the index repository (%v)", im.InstanceID, im.Attestation, err)
		}
	}

	// A re-run on the same ledger: one HEAD per ref (3 images, 2 indexes)
	// and one per verification attachment (1 in the per-arch repository,
	// 1 in the index repository) and one for the verification summary of
	// the index whose child carries a statement (a-1's); nothing written.
	before := len(dst.requests())
	s, progress = run()
	if s.ImagesSkipped != 3 || s.IndexesSkipped != 2 {
		t.Fatalf("re-run: %+v\n%s", s, progress)
	}
	heads, other := headsAndOthers(dst.requests()[before:])
	if len(heads) != 8 || len(other) != 0 {
		t.Errorf("re-run: %d HEADs %v, other requests %v; want 8 HEADs and nothing else", len(heads), heads, other)
	}
}

type rawTaggable struct{ raw []byte }

func (r rawTaggable) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawTaggable) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
