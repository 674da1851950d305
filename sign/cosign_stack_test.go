package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

// cosign runs the cosign binary with a clean environment (its own HOME and
// Docker config: the stack's registry is anonymous) and returns its
// output and error.
func cosign(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + home, "DOCKER_CONFIG=" + home, "TUF_ROOT=" + filepath.Join(home, "tuf")}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	t.Logf("$ cosign %s\n%s%s", strings.Join(args, " "), clip(o.String()), e.String())
	return o.String(), e.String(), err
}

// clip shortens cosign's output for the log (a verified statement is one
// long base64 line).
func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + fmt.Sprintf("... (%d bytes)\n", len(s))
	}
	return s
}

// provenanceFor is the demo's real BuildKit provenance statement with its
// subject digest made image's (its predicate is unchanged).
func provenanceFor(t *testing.T, image v1.Hash) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.ReplaceAll(raw, []byte("36389b94423e8dd68471a5e8b08acfb0b81a42b2050be5d8787dde6930a9611d"), []byte(image.Hex))
	if n := bytes.Count(raw, []byte("36389b94423e8dd68471a5e8b08acfb0b81a42b2050be5d8787dde6930a9611d")); n != 1 {
		t.Fatalf("provenance.json names the demo image %d times, want once (its subject)", n)
	}
	return out
}

// TestCosignVerifiesSignedStatements is the interop proof, on the stack's
// registry (distribution 2.8: no referrers API, so the sha256-<hex>
// fallback index) with cosign v3 unmodified (scripts/install-cosign.sh):
//
//   - the verification statement, the provenance and the SBOM statement of
//     one image, signed with swebuild's key and attached, are each verified
//     by `cosign verify-attestation --key cosign.pub
//     --insecure-ignore-tlog=true --type T IMAGE@DIGEST`, which prints the
//     statement swebuild signed, byte for byte; and by VerifyImage;
//   - refused by both, each naming the image: a bundle whose statement
//     has one byte changed (the only referrer of its image), an image with
//     only an unsigned statement, an image signed with another key;
//   - cosign reads swebuild's cosign.key (cosign public-key), and a bundle
//     cosign attest writes with that key verifies with VerifyImage.
func TestCosignVerifiesSignedStatements(t *testing.T) {
	stacktest.Thorough(t) // cosign is make test-all's (make cosign: a cold compile takes minutes)
	st := stacktest.Require(t)
	bin := stacktest.CachedTool(t, "cosign", "scripts/install-cosign.sh")
	out, _, err := cosign(t, bin, nil, "version")
	if err != nil || !strings.Contains(out, "v3.") {
		t.Fatalf("%s is not cosign v3: %v", bin, err)
	}
	ctx := context.Background()
	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client}
	reader := publication.New(client)
	base := fmt.Sprintf("%s/signtest%d", st.Registry, rand.Uint64())
	repo, err := name.NewRepository(base + "/sweb.eval.x86_64.fixture_1776_calc-1")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	password := []byte("swebuild test password")
	files, err := WriteKeyPair(filepath.Join(dir, "keys"), password)
	if err != nil {
		t.Fatal(err)
	}
	other, err := WriteKeyPair(filepath.Join(dir, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ReadPrivateKey(files.Private, password)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ReadPrivateKey(other.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := NewKeySigner(key)
	otherSigner, _ := NewKeySigner(otherKey)
	trust := Trust{Key: &key.PublicKey}

	// cosign reads swebuild's private key file.
	out, _, err = cosign(t, bin, []string{"COSIGN_PASSWORD=" + string(password)}, "public-key", "--key", files.Private)
	pub, _ := os.ReadFile(files.Public)
	if err != nil || out != string(pub) {
		t.Fatalf("cosign public-key --key %s: %v; got\n%s\nwant cosign.pub\n%s", files.Private, err, out, pub)
	}

	images := map[string]v1.Descriptor{}
	for _, n := range []string{"signed", "tampered", "unsigned", "other-key", "cosign"} {
		images[n] = regtest.PushRandomImage(t, repo, 256, 1)
	}
	ref := func(n string) string { return repo.Digest(images[n].Digest.String()).String() }

	rep, err := os.ReadFile(filepath.Join("..", "attest", "testdata", "pytest-dev__pytest-7220", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("testdata", "sbom.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	statementsOf := func(n string) map[string][]byte {
		t.Helper()
		yes := true
		ver, err := attest.VerificationStatement(attest.Verification{
			ImageName: repo.String(), ImageDigest: images[n].Digest.String(), InstanceID: "pytest-dev__pytest-7220",
			Platform: core.AMD64, Report: rep, GoldResolved: true, ControlUnresolved: &yes, Grading: "v5", GradingVersion: "5.0.2",
			Repeat: 3, Container: map[string]string{"network": "none"}, Verifier: "swebuild test",
		})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := Statement(repo.String(), images[n].Digest.Hex, CycloneDXBOM, doc)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{
			attest.TestResultPredicate: ver,
			SLSAProvenanceV1:           provenanceFor(t, images[n].Digest),
			CycloneDXBOM:               sb,
		}
	}
	types := []string{attest.TestResultPredicate, SLSAProvenanceV1, CycloneDXBOM}

	// Signed: three statements, each verified by cosign and by VerifyImage.
	signed := statementsOf("signed")
	for _, p := range types {
		a, err := signer.Attach(ctx, refs, repo, images["signed"], signed[p])
		if err != nil {
			t.Fatal(err)
		}
		if !a.Written || a.PredicateType != p {
			t.Fatalf("attaching the %s statement: %+v", p, a)
		}
		again, err := signer.Attach(ctx, refs, repo, images["signed"], signed[p])
		if err != nil || again.Written || again.Referrer != a.Referrer {
			t.Fatalf("attaching the %s statement again wrote a second referrer: %+v, %v", p, again, err)
		}
	}
	for _, p := range types {
		t.Run("cosign verifies "+p, func(t *testing.T) {
			out, _, err := cosign(t, bin, nil, "verify-attestation", "--key", files.Public, "--insecure-ignore-tlog=true", "--type", p, ref("signed"))
			if err != nil {
				t.Fatalf("cosign refused the signed %s statement: %v", p, err)
			}
			// One DSSE envelope per line; its payload is the statement.
			var got [][]byte
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var env struct {
					PayloadType, Payload string
				}
				if err := json.Unmarshal([]byte(line), &env); err != nil {
					t.Fatalf("cosign output line %q: %v", line, err)
				}
				b, _ := base64.StdEncoding.DecodeString(env.Payload)
				got = append(got, b)
			}
			if len(got) != 1 || !bytes.Equal(got[0], signed[p]) {
				t.Fatalf("cosign verified %d statements of type %s; want the one swebuild signed", len(got), p)
			}
		})
	}
	r, err := trust.VerifyImage(ctx, reader, repo, images["signed"].Digest, types...)
	if err != nil {
		t.Fatalf("VerifyImage refused the signed image: %v", err)
	}
	for _, p := range types {
		if v := r.Of(p); len(v) != 1 || !bytes.Equal(v[0].Statement, signed[p]) {
			t.Fatalf("VerifyImage: %d verified %s statements, want the one signed", len(v), p)
		}
	}

	// Tampered: the verification statement's bundle with one byte of its
	// statement changed, attached as its image's only referrer.
	bundle, _, err := signer.Sign(ctx, statementsOf("tampered")[attest.TestResultPredicate])
	if err != nil {
		t.Fatal(err)
	}
	a, err := Artifact(images["tampered"], attest.TestResultPredicate, tamper(t, bundle), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, repo, a); err != nil {
		t.Fatal(err)
	}
	// Unsigned: the statement attached as swebuild attaches it today.
	ua, err := attest.StatementArtifact(images["unsigned"], attest.TestResultPredicate, statementsOf("unsigned")[attest.TestResultPredicate])
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, repo, ua); err != nil {
		t.Fatal(err)
	}
	// Another key.
	if _, err := otherSigner.Attach(ctx, refs, repo, images["other-key"], statementsOf("other-key")[attest.TestResultPredicate]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		image       string
		cosignSays  string
		swebuildSay string
	}{
		{"tampered", "no matching attestations: failed to verify signature: could not verify envelope: accepted signatures do not match threshold, Found: 0, Expected 1", "no signed statement verifies with key " + KeyID(&key.PublicKey)},
		{"unsigned", "no matching attestations", "no signed statement: none of its 1 referrers is a Sigstore bundle"},
		{"other-key", "no matching attestations: failed to verify signature: could not verify envelope: accepted signatures do not match threshold, Found: 0, Expected 1", "no signed statement verifies with key " + KeyID(&key.PublicKey)},
	} {
		t.Run("refused "+tc.image, func(t *testing.T) {
			_, stderr, err := cosign(t, bin, nil, "verify-attestation", "--key", files.Public, "--insecure-ignore-tlog=true", "--type", attest.TestResultPredicate, ref(tc.image))
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("cosign accepted the %s image (err %v)", tc.image, err)
			}
			if !strings.Contains(stderr, tc.cosignSays) {
				t.Errorf("cosign's refusal does not say %q", tc.cosignSays)
			}
			_, err = trust.VerifyImage(ctx, reader, repo, images[tc.image].Digest, attest.TestResultPredicate)
			var ie *ImageError
			if !errors.As(err, &ie) || ie.Image != ref(tc.image) || !strings.HasPrefix(err.Error(), ref(tc.image)+": "+tc.swebuildSay) {
				t.Fatalf("VerifyImage: %v; want an *ImageError %q naming %s", err, tc.swebuildSay, ref(tc.image))
			}
			t.Log(err)
		})
	}

	// The other way round: cosign attest with swebuild's key writes a
	// bundle referrer VerifyImage accepts, shaped like swebuild's.
	pred := filepath.Join(dir, "predicate.json")
	if err := os.WriteFile(pred, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cosign(t, bin, []string{"COSIGN_PASSWORD=" + string(password)}, "attest", "--key", files.Private, "--type", "cyclonedx",
		"--predicate", pred, "--use-signing-config=false", "--tlog-upload=false", "--yes", ref("cosign")); err != nil {
		t.Fatalf("cosign attest: %v", err)
	}
	r, err = trust.VerifyImage(ctx, reader, repo, images["cosign"].Digest, CycloneDXBOM)
	if err != nil {
		t.Fatalf("VerifyImage refused cosign's own attestation: %v", err)
	}
	list, err := reader.Referrers(ctx, repo, images["cosign"].Digest)
	if err != nil || len(list) != 1 {
		t.Fatalf("cosign's referrers: %v, %v", list, err)
	}
	got, err := reader.Manifest(ctx, repo.Digest(list[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	// The layer's digest and size, and the time, are left out of the
	// comparison: any bundle bytes and a non-zero time will do.
	ours, err := Artifact(images["cosign"], CycloneDXBOM, []byte("bundle"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if diff := shapeDiff(t, got.Raw, ours.Raw); diff != "" {
		t.Fatalf("cosign's referrer manifest and swebuild's differ: %s\ncosign's: %s\nswebuild's: %s", diff, got.Raw, ours.Raw)
	}
}

// shapeDiff compares two referrer manifests with digests, sizes and the
// creation time left out: "" when they have the same fields and values.
func shapeDiff(t *testing.T, a, b []byte) string {
	t.Helper()
	var strip func(v any) any
	strip = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, x := range v {
				switch k {
				case "digest", "size", "org.opencontainers.image.created":
					out[k] = "-"
				default:
					out[k] = strip(x)
				}
			}
			return out
		case []any:
			var out []any
			for _, x := range v {
				out = append(out, strip(x))
			}
			return out
		}
		return v
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(strip(x))
	jb, _ := json.Marshal(strip(y))
	if bytes.Equal(ja, jb) {
		return ""
	}
	return fmt.Sprintf("\n%s\n%s", ja, jb)
}
