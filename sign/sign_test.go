package sign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
)

func TestKeyPairFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	f, err := WriteKeyPair(dir, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{f.Private, 0o600}, {f.Public, 0o644}, {dir, 0o700 | os.ModeDir}} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, st.Mode(), c.mode)
		}
	}
	priv, err := ReadPrivateKey(f.Private, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ReadPublicKey(f.Public)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.PublicKey.Equal(pub) {
		t.Fatal("cosign.pub is not the public half of cosign.key")
	}
	raw, _ := os.ReadFile(f.Private)
	if b, _ := pem.Decode(raw); b == nil || b.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Fatalf("cosign.key is not an ENCRYPTED SIGSTORE PRIVATE KEY PEM block:\n%s", raw)
	}
	if _, err := WriteKeyPair(dir, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second key pair in %s: %v, want a refusal", dir, err)
	}
	if again, _ := ReadPublicKey(f.Public); !again.Equal(pub) {
		t.Fatal("the refused second key pair changed cosign.pub")
	}

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(priv)
	for _, tc := range []struct {
		name, err string
		run       func() error
	}{
		{"wrong password", "wrong password", func() error { _, err := ReadPrivateKey(f.Private, []byte("nope")); return err }},
		{"plain private key", `PEM block "PRIVATE KEY"`, func() error {
			_, err := DecodePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil)
			return err
		}},
		{"P-384 public key", "want ECDSA P-256", func() error {
			_, err := DecodePublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der384}))
			return err
		}},
		{"not PEM", "no PEM block", func() error { _, err := DecodePublicKey([]byte("ssh-ed25519 AAAA")); return err }},
		{"missing file", filepath.Join(dir, "none.pub"), func() error { _, err := ReadPublicKey(filepath.Join(dir, "none.pub")); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// statements are the three kinds swebuild signs, from real data: the
// verification statement of upstream's report.json, and BuildKit's
// provenance and swebuild's SBOM of a demo image (testdata/README.md).
func statements(t *testing.T) []struct {
	name, predicateType string
	subject             v1.Hash
	statement           []byte
} {
	t.Helper()
	dir := filepath.Join("..", "attest", "testdata", "pytest-dev__pytest-7220")
	rep, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	verImage := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("5a", 32)}
	yes := true
	ver, err := attest.VerificationStatement(attest.Verification{
		ImageName: "127.0.0.1:5000/r/sweb.eval.x86_64.pytest-dev_1776_pytest-7220", ImageDigest: verImage.String(),
		InstanceID: "pytest-dev__pytest-7220", Platform: core.AMD64, Report: rep, GoldResolved: true, ControlUnresolved: &yes,
		Grading: "v5", GradingVersion: "5.0.2", Repeat: 3, Container: map[string]string{"network": "none"}, Verifier: "swebuild test",
	})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := os.ReadFile(filepath.Join("testdata", "provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	demo := v1.Hash{Algorithm: "sha256", Hex: "36389b94423e8dd68471a5e8b08acfb0b81a42b2050be5d8787dde6930a9611d"}
	doc, err := os.ReadFile(filepath.Join("testdata", "sbom.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	sbomSt, err := Statement("127.0.0.1:5000/swebuild-demo/sweb.eval.x86_64.fixture_1776_calc-1", demo.Hex, CycloneDXBOM, doc)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name, predicateType string
		subject             v1.Hash
		statement           []byte
	}{
		{"verification", "https://in-toto.io/attestation/test-result/v0.1", verImage, ver},
		{"provenance", "https://slsa.dev/provenance/v1", demo, prov},
		{"sbom", "https://cyclonedx.org/bom", demo, sbomSt},
	}
}

// tamper changes one byte of the statement in a bundle: the first digit
// inside its predicate, to another digit (the JSON stays valid and its
// subjects stay the same, so only the signature can refuse it).
func tamper(t *testing.T, bundle []byte) []byte {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(bundle, &b); err != nil {
		t.Fatal(err)
	}
	env := b["dsseEnvelope"].(map[string]any)
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(payload, []byte(`"predicate":`))
	if start < 0 {
		t.Fatal("no predicate in the statement")
	}
	i := start + bytes.IndexAny(payload[start:], "0123456789")
	if payload[i] == '9' {
		payload[i] = '8'
	} else {
		payload[i]++
	}
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	keyA, _ := GenerateKey()
	keyB, _ := GenerateKey()
	signerA, err := NewKeySigner(keyA)
	if err != nil {
		t.Fatal(err)
	}
	signerB, _ := NewKeySigner(keyB)
	trustA := Trust{Key: &keyA.PublicKey}
	for _, st := range statements(t) {
		t.Run(st.name, func(t *testing.T) {
			bundle, info, err := signerA.Sign(ctx, st.statement)
			if err != nil {
				t.Fatal(err)
			}
			if info.PredicateType != st.predicateType || !info.Names(st.subject.Hex) {
				t.Fatalf("signed statement: %+v, want predicate type %s naming %s", info, st.predicateType, st.subject)
			}
			var head struct {
				MediaType    string `json:"mediaType"`
				DsseEnvelope struct {
					PayloadType string `json:"payloadType"`
				} `json:"dsseEnvelope"`
				VerificationMaterial map[string]json.RawMessage `json:"verificationMaterial"`
			}
			if err := json.Unmarshal(bundle, &head); err != nil {
				t.Fatal(err)
			}
			if head.MediaType != "application/vnd.dev.sigstore.bundle.v0.3+json" || head.DsseEnvelope.PayloadType != "application/vnd.in-toto+json" {
				t.Fatalf("bundle media type %q, payload type %q", head.MediaType, head.DsseEnvelope.PayloadType)
			}
			if _, ok := head.VerificationMaterial["publicKey"]; !ok || len(head.VerificationMaterial) != 1 {
				t.Fatalf("verification material %v: want only a public key hint (no certificate, no tlog entry)", head.VerificationMaterial)
			}
			again, _, err := signerA.Sign(ctx, st.statement)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bundle, again) {
				t.Error("signing one statement twice with one key gave two bundles (RFC 6979 signatures are deterministic)")
			}

			v, err := trustA.VerifyBundle(bundle, st.subject)
			if err != nil {
				t.Fatalf("the signed statement does not verify: %v", err)
			}
			if !bytes.Equal(v.Statement, st.statement) || v.PredicateType != st.predicateType {
				t.Fatalf("verified statement differs from the signed one (predicate type %s)", v.PredicateType)
			}

			tampered := tamper(t, bundle)
			other, _, err := signerB.Sign(ctx, st.statement)
			if err != nil {
				t.Fatal(err)
			}
			elsewhere := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0c", 32)}
			for _, tc := range []struct {
				name   string
				bundle []byte
				image  v1.Hash
				trust  Trust
				want   []string
			}{
				{"one byte changed", tampered, st.subject, trustA, []string{"signature does not verify with key " + KeyID(&keyA.PublicKey)}},
				{"another key", other, st.subject, trustA, []string{"signature does not verify with key " + KeyID(&keyA.PublicKey), "the bundle names another key"}},
				{"another image", bundle, elsewhere, trustA, []string{"statement is about sha256:" + st.subject.Hex + ", not this image"}},
				{"no trust", bundle, st.subject, Trust{}, []string{"neither a public key nor a certificate identity"}},
				{"not a bundle", []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`), st.subject, trustA, []string{"Sigstore bundle"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					_, err := tc.trust.VerifyBundle(tc.bundle, tc.image)
					if err == nil {
						t.Fatal("accepted")
					}
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not say %q", err, w)
						}
					}
				})
			}
			// The tampered statement is still a valid statement about the
			// image: the signature alone refused it.
			tb, err := ParseBundle(tampered)
			if err != nil {
				t.Fatal(err)
			}
			env, _ := tb.Envelope()
			p, _ := env.RawEnvelope().DecodeB64Payload()
			if ti, err := Describe(p); err != nil || !ti.Names(st.subject.Hex) || bytes.Equal(p, st.statement) {
				t.Fatalf("tampering: %v (names the image: %v)", err, ti.Names(st.subject.Hex))
			}
		})
	}
}

func TestVerifyBundles(t *testing.T) {
	ctx := context.Background()
	key, _ := GenerateKey()
	s, _ := NewKeySigner(key)
	sts := statements(t)
	prov, sbomSt := sts[1], sts[2]
	pb, _, err := s.Sign(ctx, prov.statement)
	if err != nil {
		t.Fatal(err)
	}
	sb, _, err := s.Sign(ctx, sbomSt.statement)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(b byte) v1.Hash {
		return v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string("0123456789abcdef"[b]), 64)}
	}
	good := []Bundle{{Referrer: ref(1), JSON: pb}, {Referrer: ref(2), JSON: sb}}
	bad := Bundle{Referrer: ref(3), JSON: tamper(t, sb)}
	name := "127.0.0.1:5000/x@" + prov.subject.String()
	trust := Trust{Key: &key.PublicKey}
	for _, tc := range []struct {
		name     string
		bundles  []Bundle
		want     []string
		verified int
		rejected int
		err      string
	}{
		{"both", good, []string{SLSAProvenanceV1, CycloneDXBOM}, 2, 0, ""},
		{"with a tampered one", append(good[:2:2], bad), []string{SLSAProvenanceV1, CycloneDXBOM}, 2, 1, ""},
		{"none", nil, nil, 0, 0, name + ": no signed statement"},
		{"only tampered", []Bundle{bad}, nil, 0, 1, name + ": no signed statement verifies with key " + KeyID(&key.PublicKey) + ": 1 refused (referrer " + ref(3).String() + ": "},
		{"a wanted type missing", good[:1], []string{SLSAProvenanceV1, "https://in-toto.io/attestation/test-result/v0.1"}, 1, 0,
			name + ": no verified https://in-toto.io/attestation/test-result/v0.1 statement (verified: https://slsa.dev/provenance/v1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := trust.VerifyBundles(name, prov.subject, tc.bundles, tc.want...)
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" {
				var ie *ImageError
				if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), tc.err) || ie.Image != name {
					t.Fatalf("error %v, want an *ImageError starting %q", err, tc.err)
				}
			}
			if len(r.Verified) != tc.verified || len(r.Rejected) != tc.rejected {
				t.Fatalf("%d verified, %d rejected; want %d and %d", len(r.Verified), len(r.Rejected), tc.verified, tc.rejected)
			}
		})
	}
}

func TestStatement(t *testing.T) {
	for _, tc := range []struct {
		name, predicate, err string
	}{
		{"array", `[1]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"broken", `{"a":`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Statement("x", strings.Repeat("ab", 32), CycloneDXBOM, []byte(tc.predicate))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
	// Numbers keep their text (UseNumber), keys are sorted.
	got, err := Statement("n", strings.Repeat("ab", 32), "https://example.com/p", []byte(`{"z":1.50,"a":12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_type":"https://in-toto.io/Statement/v1","predicate":{"a":12345678901234567890,"z":1.50},"predicateType":"https://example.com/p","subject":[{"digest":{"sha256":"` + strings.Repeat("ab", 32) + `"},"name":"n"}]}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := Describe([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"n"}],"predicateType":"p"}`)); err == nil {
		t.Fatal("a subject without a digest was accepted")
	}
}
