package sign

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

// Signed statements attached to images of go-containerregistry's
// in-process registry (no referrers API: the sha256-<hex> fallback index,
// as on distribution 2.8) and verified back through the publication
// reader; cosign's own reading of them is the stack test's
// (TestCosignVerifiesSignedStatements).
func TestAttachAndVerifyImageInProcess(t *testing.T) {
	ctx := context.Background()
	reg := regtest.InProcess(t)
	client, err := registry.New(registry.Options{Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client}
	reader := publication.New(client)
	repo, err := name.NewRepository(reg.Host+"/signcov/sweb.eval.x86_64.fixture_1776_calc-1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]v1.Descriptor{}
	for _, n := range []string{"signed", "other-key", "unsigned", "bare"} {
		images[n] = regtest.PushRandomImage(t, repo, 256, 1)
	}
	doc, err := os.ReadFile(filepath.Join("testdata", "sbom.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	sbomOf := func(n string) []byte {
		st, err := Statement(repo.String(), images[n].Digest.Hex, CycloneDXBOM, doc)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	key, _ := GenerateKey()
	otherKey, _ := GenerateKey()
	signer, _ := NewKeySigner(key)
	otherSigner, _ := NewKeySigner(otherKey)
	trust := Trust{Key: &key.PublicKey}

	a, err := signer.Attach(ctx, refs, repo, images["signed"], sbomOf("signed"))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Written || a.PredicateType != CycloneDXBOM || !a.Names(images["signed"].Digest.Hex) {
		t.Fatalf("Attach: %+v", a)
	}
	again, err := signer.Attach(ctx, refs, repo, images["signed"], sbomOf("signed"))
	if err != nil || again.Written || again.Referrer != a.Referrer {
		t.Fatalf("attaching the same statement again: %+v, %v; want the same referrer, not written", again, err)
	}
	// A statement about another image is not attached to this one.
	_, err = signer.Attach(ctx, refs, repo, images["bare"], sbomOf("signed"))
	if err == nil || !strings.Contains(err.Error(), repo.String()+"@"+images["bare"].Digest.String()) ||
		!strings.Contains(err.Error(), "statement is about sha256:"+images["signed"].Digest.Hex+", not this image") {
		t.Errorf("attaching a statement about another image: %v", err)
	}

	r, err := trust.VerifyImage(ctx, reader, repo, images["signed"].Digest, CycloneDXBOM)
	if err != nil {
		t.Fatalf("VerifyImage: %v", err)
	}
	if v := r.Of(CycloneDXBOM); len(v) != 1 || !bytes.Equal(v[0].Statement, sbomOf("signed")) || v[0].Referrer != a.Referrer {
		t.Fatalf("VerifyImage verified %+v, want the one SBOM statement signed", r.Verified)
	}
	list, err := reader.Referrers(ctx, repo, images["signed"].Digest)
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := ReadBundles(ctx, reader, repo, list)
	if err != nil || len(bundles) != 1 || bundles[0].PredicateType != CycloneDXBOM {
		t.Fatalf("ReadBundles: %+v, %v", bundles, err)
	}

	if _, err := otherSigner.Attach(ctx, refs, repo, images["other-key"], sbomOf("other-key")); err != nil {
		t.Fatal(err)
	}
	ua, err := attest.StatementArtifact(images["unsigned"], CycloneDXBOM, sbomOf("unsigned"))
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, repo, ua); err != nil {
		t.Fatal(err)
	}
	ref := func(n string) string { return repo.Digest(images[n].Digest.String()).String() }
	for _, tc := range []struct {
		image string
		want  []string
		say   string
	}{
		{"other-key", []string{CycloneDXBOM}, "no signed statement verifies with key " + KeyID(&key.PublicKey) + ": 1 refused"},
		{"unsigned", []string{CycloneDXBOM}, "no signed statement: none of its 1 referrers is a Sigstore bundle"},
		{"bare", []string{CycloneDXBOM}, "no signed statement: none of its 0 referrers is a Sigstore bundle"},
		{"signed", []string{SLSAProvenanceV1}, "no signed " + SLSAProvenanceV1 + " statement: its 1 Sigstore bundle(s) sign other statements"},
	} {
		_, err := trust.VerifyImage(ctx, reader, repo, images[tc.image].Digest, tc.want...)
		var ie *ImageError
		if !errors.As(err, &ie) || ie.Image != ref(tc.image) || !strings.HasPrefix(err.Error(), ref(tc.image)+": "+tc.say) {
			t.Errorf("VerifyImage of %s: %v; want an *ImageError %q naming %s", tc.image, err, tc.say, ref(tc.image))
		}
	}
	if _, err := (Trust{}).VerifyImage(ctx, reader, repo, images["signed"].Digest); err == nil || !strings.Contains(err.Error(), "neither a public key nor a certificate identity") {
		t.Errorf("VerifyImage with no trust: %v", err)
	}
}

func TestIsBundleReferrer(t *testing.T) {
	for _, tc := range []struct {
		artifactType string
		want         bool
	}{
		{"application/vnd.dev.sigstore.bundle.v0.3+json", true},
		{"application/vnd.dev.sigstore.bundle+json;version=0.2", true},
		{"application/vnd.in-toto+json", false},
		{"", false},
	} {
		if got := IsBundleReferrer(v1.Descriptor{ArtifactType: tc.artifactType}); got != tc.want {
			t.Errorf("IsBundleReferrer(%q) = %v, want %v", tc.artifactType, got, tc.want)
		}
	}
}
