package publish

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/sign"
)

// stageProvenance attaches in staging an attestation manifest holding a
// provenance statement about im (as BuildKit pushes one beside each image)
// and names it in the record; it returns the statement.
func stageProvenance(t *testing.T, ctx context.Context, staging name.Repository, f *fixture, im *core.Image) []byte {
	t.Helper()
	c := testClient(t, -1)
	raw, _ := f.images[im.InstanceID+" "+im.Platform.String()].RawManifest()
	h, _ := v1.NewHash(im.Digest.String())
	subject := v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: int64(len(raw))}
	payload := []byte(fmt.Sprintf(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"https://slsa.dev/provenance/v1","subject":[{"name":"pkg:docker/x","digest":{"sha256":%q}}],"predicate":{"buildDefinition":{"buildType":"https://mobyproject.org/buildkit@v1"}}}`, h.Hex))
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
	return payload
}

// TestPublishSignsEveryStatement: with a signer, publish signs each
// per-arch image's three statements (the build's verification statement,
// BuildKit's provenance, the SBOM as a CycloneDX statement) and attaches
// the bundles in the per-arch and the index repository, where
// sign.Trust.VerifyImage (cosign's checks, sign's stack test) accepts them
// with the key and returns exactly the statements the build recorded; the
// ledger names the bundles and the signer. A re-run signs nothing and
// sends HEADs only. Publishing the same build signed by another key
// supersedes the first key's bundles: the first key then verifies nothing.
func TestPublishSignsEveryStatement(t *testing.T) {
	_, dst, f, staging := stageTwoInstances(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testClient(t, -1)
	refs := &attest.Referrers{Client: c, Settle: 10 * time.Millisecond}
	provs := map[string][]byte{}
	docs := map[string][]byte{}
	for i := range f.built {
		im := &f.built[i]
		provs[im.ID()] = stageProvenance(t, ctx, staging, f, im)
		docs[im.ID()] = attachStagedSBOM(t, ctx, refs, staging, f, im, []sbom.Package{{Ecosystem: sbom.PyPI, Name: "pytest", Version: "7.2.1"}})
		attachStagedStatement(t, ctx, refs, staging, f, im, 1)
	}
	keyA, _ := sign.GenerateKey()
	keyB, _ := sign.GenerateKey()
	signerA, _ := sign.NewKeySigner(keyA)
	signerB, _ := sign.NewKeySigner(keyB)
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	run := func(s *sign.Signer) (*Summary, string) {
		return publishOnLedger(t, ctx, ledgerPath, f.recs(), Options{Repo: dst.host() + "/release", Client: testClient(t, -1), Jobs: 2, Version: "test", RequireVerified: true, Signer: s})
	}
	n := manifests.Namer{Repo: dst.host() + "/release"}
	reader := publication.New(c)
	// verified checks every image in both repositories with trust; it
	// returns the refusals (nil when all verify).
	verified := func(when string, trust sign.Trust) []error {
		t.Helper()
		var refused []error
		for _, im := range f.built {
			h, _ := v1.NewHash(im.Digest.String())
			stmt := stagedStatement(t, ctx, refs, staging, im)
			for _, where := range []string{n.ArchRepo(im.Platform.Arch(), im.InstanceID), n.IndexRepo(im.InstanceID)} {
				repo, _ := name.NewRepository(where, name.Insecure)
				res, err := trust.VerifyImage(ctx, reader, repo, h, attest.TestResultPredicate, sign.SLSAProvenanceV1, sign.CycloneDXBOM)
				if err != nil {
					var ie *sign.ImageError
					if !errors.As(err, &ie) || ie.Image != repo.Digest(im.Digest.String()).String() {
						t.Fatalf("%s: %s: %v is not an *ImageError naming the image", when, where, err)
					}
					refused = append(refused, err)
					continue
				}
				if len(res.Verified) != 3 {
					t.Errorf("%s: %s in %s: %d verified statements, want 3 (one of each)", when, im.ID(), where, len(res.Verified))
				}
				wantSBOM, err := sign.Statement(n.ArchRepo(im.Platform.Arch(), im.InstanceID), im.Digest.Encoded(), sign.CycloneDXBOM, docs[im.ID()])
				if err != nil {
					t.Fatal(err)
				}
				for pt, want := range map[string][]byte{attest.TestResultPredicate: stmt, sign.SLSAProvenanceV1: provs[im.ID()], sign.CycloneDXBOM: wantSBOM} {
					if got := res.Of(pt); len(got) != 1 || !bytes.Equal(got[0].Statement, want) {
						t.Errorf("%s: %s in %s: the signed %s statement is not the one the build recorded", when, im.ID(), where, pt)
					}
				}
			}
		}
		return refused
	}

	s, progress := run(signerA)
	if s.SignaturesWritten != 9 || s.SignaturesPresent != 0 || s.SignedBy != signerA.Name() || !strings.Contains(s.String(), "signed:    9 statement(s) signed and attached") {
		t.Fatalf("first publish: %+v\n%s\n%s", s, s.String(), progress)
	}
	if refused := verified("signed with A", sign.Trust{Key: &keyA.PublicKey}); len(refused) > 0 {
		t.Fatalf("signed with A, refused: %v", refused)
	}
	if refused := verified("checked with B", sign.Trust{Key: &keyB.PublicKey}); len(refused) != 6 {
		t.Fatalf("key B accepted statements signed with A: %d of 6 refused", len(refused))
	}
	led, err := core.ReadRecords(ledgerPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range core.Latest(led) {
		if r.Kind == core.KindInstance && (len(r.Signatures) != 3 || r.SignedBy != signerA.Name()) {
			t.Errorf("ledger: %s: signatures %v by %q, want 3 by %q", r.ID(), r.Signatures, r.SignedBy, signerA.Name())
		}
	}

	// A re-run: nothing signed; one HEAD per ref (3 images, 2 indexes),
	// per signed statement in each repository (9 + 9), per carried
	// SBOM and statement in the index repositories (3 + 3) and per index
	// summary and its bundle (2 + 2).
	before := len(dst.requests())
	s, progress = run(signerA)
	if s.SignaturesWritten != 0 || s.SignaturesPresent != 9 || s.ImagesSkipped != 3 {
		t.Fatalf("re-run: %+v\n%s", s, progress)
	}
	heads, other := headsAndOthers(dst.requests()[before:])
	if len(heads) != 33 || len(other) != 0 {
		t.Errorf("re-run: %d HEADs, other requests %v; want 33 HEADs and nothing else", len(heads), other)
	}

	// The same build signed by B: A's bundles are superseded, and each
	// index's summary signed by A (its statement and bundle) by B's.
	s, progress = run(signerB)
	if s.SignaturesWritten != 9 || strings.Count(progress, "superseded") != 22 || strings.Count(progress, "(an older summary)") != 4 {
		t.Fatalf("publish signed by B: %+v, %d superseded, want 9 written and 22 superseded (3 kinds, 3 images, 2 repositories; 2 summaries and their bundles)\n%s", s, strings.Count(progress, "superseded"), progress)
	}
	if refused := verified("signed with B", sign.Trust{Key: &keyB.PublicKey}); len(refused) > 0 {
		t.Fatalf("signed with B, refused: %v", refused)
	}
	refused := verified("A after B", sign.Trust{Key: &keyA.PublicKey})
	if len(refused) != 6 {
		t.Fatalf("A's superseded bundles still verify: %d of 6 refused", len(refused))
	}
	t.Log(refused[0])
}

// stagedStatement is the verification statement the build attached to im
// in staging (the one its record names).
func stagedStatement(t *testing.T, ctx context.Context, refs *attest.Referrers, staging name.Repository, im core.Image) []byte {
	t.Helper()
	h, _ := v1.NewHash(im.Verification.String())
	layers, err := attest.ReferrerPayloads(ctx, publication.New(refs.Client), staging, h)
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: the staged statement: %d layers, %v", im.ID(), len(layers), err)
	}
	return layers[0].Payload
}
