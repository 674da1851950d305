package sign

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

func TestTrustOptions(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteKeyPair(dir, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ReadPublicKey(files.Public)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "root.json")
	if err := os.WriteFile(garbage, []byte(`{"mediaType": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	publicGood := filepath.Join("testdata", "trusted-root-public-good.json")
	const wf = "https://github.com/o/r/.github/workflows/nightly.yml@refs/heads/main"
	cases := []struct {
		name    string
		opts    TrustOptions
		given   bool
		choice  string // a ChoiceError with this text
		errText string // another error containing this
		want    string // Trust.Name()
	}{
		{name: "nothing", opts: TrustOptions{}, given: false, choice: "give --key PUB, or --certificate-identity[-regexp] and --certificate-oidc-issuer[-regexp]"},
		{name: "a key", opts: TrustOptions{Key: files.Public}, given: true, want: "key " + KeyID(pub)},
		{name: "a key and an identity", opts: TrustOptions{Key: files.Public, Identity: wf}, given: true,
			choice: "--key with --certificate-*: give a key or a certificate identity"},
		{name: "a key and a trusted root", opts: TrustOptions{Key: files.Public, TrustedRoot: publicGood}, given: true,
			choice: "--key with --certificate-*: give a key or a certificate identity"},
		{name: "a missing key file", opts: TrustOptions{Key: filepath.Join(dir, "none.pub")}, given: true,
			errText: "reading the public key: open " + filepath.Join(dir, "none.pub")},
		{name: "the private key given as the public one", opts: TrustOptions{Key: files.Private}, given: true,
			errText: "public key " + files.Private + `: PEM block "ENCRYPTED SIGSTORE PRIVATE KEY", want PUBLIC KEY`},
		{name: "a trusted root alone", opts: TrustOptions{TrustedRoot: publicGood}, given: true,
			choice: "give --key PUB, or --certificate-identity[-regexp] and --certificate-oidc-issuer[-regexp]"},
		{name: "identity and its regexp", opts: TrustOptions{Identity: wf, IdentityRegexp: ".*", Issuer: GitHubActionsIssuer}, given: true,
			choice: "give one of --certificate-identity and --certificate-identity-regexp"},
		{name: "issuer only", opts: TrustOptions{Issuer: GitHubActionsIssuer}, given: true,
			choice: "give one of --certificate-identity and --certificate-identity-regexp"},
		{name: "no issuer", opts: TrustOptions{Identity: wf}, given: true,
			choice: "give one of --certificate-oidc-issuer and --certificate-oidc-issuer-regexp"},
		{name: "issuer and its regexp", opts: TrustOptions{IdentityRegexp: "^https://github.com/o/", Issuer: GitHubActionsIssuer, IssuerRegexp: ".*"}, given: true,
			choice: "give one of --certificate-oidc-issuer and --certificate-oidc-issuer-regexp"},
		{name: "an unreadable trusted root", opts: TrustOptions{Identity: wf, Issuer: GitHubActionsIssuer, TrustedRoot: garbage}, given: true,
			errText: "reading the Sigstore trusted root " + garbage},
		{name: "a missing trusted root", opts: TrustOptions{Identity: wf, Issuer: GitHubActionsIssuer, TrustedRoot: filepath.Join(dir, "nope.json")}, given: true,
			errText: "reading the Sigstore trusted root " + filepath.Join(dir, "nope.json")},
		{name: "identity with the public-good root", opts: TrustOptions{Identity: wf, Issuer: GitHubActionsIssuer, TrustedRoot: publicGood}, given: true,
			want: "certificate " + wf + " (issuer " + GitHubActionsIssuer + ")"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.opts.Given(); got != tc.given {
				t.Errorf("Given() = %v, want %v", got, tc.given)
			}
			tr, err := tc.opts.Trust()
			var ce ChoiceError
			switch {
			case tc.choice != "":
				if !errors.As(err, &ce) || err.Error() != tc.choice {
					t.Fatalf("Trust() error %v, want the ChoiceError %q", err, tc.choice)
				}
			case tc.errText != "":
				if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("Trust() error %v, want one (not a ChoiceError) containing %q", err, tc.errText)
				}
			default:
				if err != nil {
					t.Fatalf("Trust(): %v", err)
				}
				if got := tr.Name(); got != tc.want {
					t.Errorf("Name() = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// The public-good trusted root, read from the file: Fulcio's CAs and
// Rekor's key are in it.
func TestLoadTrustedRoot(t *testing.T) {
	tr, err := LoadTrustedRoot(filepath.Join("testdata", "trusted-root-public-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 || len(tr.RekorLogs()) == 0 {
		t.Errorf("public-good root: %d Fulcio CAs, %d Rekor logs; want some of each", len(tr.FulcioCertificateAuthorities()), len(tr.RekorLogs()))
	}
}

func TestTrustCheck(t *testing.T) {
	key, _ := GenerateKey()
	tr := Trust{Key: &key.PublicKey, Identity: &Identity{Subject: "a", Issuer: "b"}}
	if _, err := tr.VerifyBundles("img", statements(t)[0].subject, nil); err == nil || !strings.Contains(err.Error(), "give a public key or a certificate identity, not both") {
		t.Errorf("a key and an identity: %v", err)
	}
	if _, _, err := (Trust{Key: &key.PublicKey}).verifier(v1HashOf("sha512", strings.Repeat("a", 64))); err == nil || !strings.Contains(err.Error(), "is not sha256:<64 hex>") {
		t.Errorf("a sha512 image digest: %v", err)
	}
	if _, _, err := (Trust{Key: &key.PublicKey}).verifier(v1HashOf("sha256", "abc")); err == nil || !strings.Contains(err.Error(), "is not sha256:<64 hex>") {
		t.Errorf("a short image digest: %v", err)
	}
}

func TestSignerKeysAndNames(t *testing.T) {
	if _, err := NewKeySigner(nil); err == nil || err.Error() != "signing key: want an ECDSA P-256 key" {
		t.Errorf("NewKeySigner(nil): %v", err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := NewKeySigner(p384); err == nil {
		t.Error("NewKeySigner accepted a P-384 key")
	}
	key, _ := GenerateKey()
	s, err := NewKeySigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if pk, ok := s.PublicKey().(*ecdsa.PublicKey); !ok || !pk.Equal(&key.PublicKey) {
		t.Error("PublicKey() is not the signing key's public half")
	}
	if s.Name() != "key "+KeyID(&key.PublicKey) || len(KeyID(&key.PublicKey)) != 16 {
		t.Errorf("Name() = %q, KeyID %q: want \"key \" and 16 hex digits", s.Name(), KeyID(&key.PublicKey))
	}
	if KeyID("not a key") != "unknown key" {
		t.Errorf("KeyID of a non-key = %q", KeyID("not a key"))
	}
	kp := s.keypair.(*keyPair)
	if kp.GetKeyAlgorithm() != "ECDSA" || kp.GetSigningAlgorithm().String() != "PKIX_ECDSA_P256_SHA_256" {
		t.Errorf("key pair algorithms %s, %s", kp.GetKeyAlgorithm(), kp.GetSigningAlgorithm())
	}

	// A GitHub Actions job's signer is named by its workflow's identity
	// (Fulcio's certificate subject for GitHub Actions: the workflow
	// file's URL at its ref); nothing is asked of Fulcio until it signs.
	gh, err := NewGitHubActionsSigner(GitHubActions{TokenURL: "http://127.0.0.1:1/token", Token: "t", WorkflowRef: "o/r/.github/workflows/nightly.yml@refs/heads/main"})
	if err != nil {
		t.Fatal(err)
	}
	if gh.Name() != "certificate https://github.com/o/r/.github/workflows/nightly.yml@refs/heads/main" {
		t.Errorf("GitHub Actions signer name %q", gh.Name())
	}
	for _, a := range []GitHubActions{{Token: "t"}, {TokenURL: "http://127.0.0.1:1/token"}} {
		if _, err := NewGitHubActionsSigner(a); err == nil || err.Error() != "no OIDC token to ask for" {
			t.Errorf("NewGitHubActionsSigner(%+v): %v", a, err)
		}
	}
	anon, err := NewKeylessSigner(KeylessOptions{IDToken: "x"})
	if err != nil || anon.Name() != "certificate (keyless)" {
		t.Errorf("keyless signer with no identity: %v, %v", anon, err)
	}
}

// Sign a real statement with a generated key, then read its subjects back
// without verifying; bundles that are not v0.3 DSSE bundles are refused
// with the reason.
func TestBundleSubjectsAndParseErrors(t *testing.T) {
	key, _ := GenerateKey()
	s, _ := NewKeySigner(key)
	for _, st := range statements(t) {
		bundle, _, err := s.Sign(context.Background(), st.statement)
		if err != nil {
			t.Fatal(err)
		}
		info, err := BundleSubjects(bundle)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if info.PredicateType != st.predicateType || !info.Names(st.subject.Hex) {
			t.Errorf("%s: BundleSubjects = %+v, want %s naming %s", st.name, info, st.predicateType, st.subject)
		}
	}
	if _, _, err := s.Sign(context.Background(), []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)); err == nil || !strings.HasPrefix(err.Error(), "signing: ") {
		t.Errorf("signing a statement with no subject: %v", err)
	}
	// A v0.3 bundle with a message signature instead of a DSSE envelope
	// (the bundle spec's messageSignature form).
	msgSig := `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"aGludA=="}},` +
		`"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"` + strings.Repeat("A", 43) + `="},"signature":"c2ln"}}`
	for _, tc := range []struct{ name, raw, want string }{
		{"not JSON", "not json", "decoding the Sigstore bundle"},
		{"too large", `{"x":"` + strings.Repeat("a", maxStatement) + `"}`, "more than"},
		{"v0.1", `{"mediaType":"application/vnd.dev.sigstore.bundle+json;version=0.1"}`, "Sigstore bundle"},
		{"message signature", msgSig, "no DSSE envelope"},
	} {
		if _, err := BundleSubjects([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	// A key directory under a file cannot be made.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteKeyPair(filepath.Join(blocker, "keys"), nil); err == nil || !strings.Contains(err.Error(), "making the key directory") {
		t.Errorf("WriteKeyPair under a file: %v", err)
	}
	// Only cosign.pub there: still never overwritten, and named.
	half := filepath.Join(dir, "half")
	os.MkdirAll(half, 0o700)
	os.WriteFile(filepath.Join(half, PublicKeyFile), []byte("x"), 0o644)
	if _, err := WriteKeyPair(half, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(half, PublicKeyFile)+" already exists") {
		t.Errorf("WriteKeyPair over a cosign.pub: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(half, PublicKeyFile)); string(b) != "x" {
		t.Error("cosign.pub was overwritten")
	}
	if _, err := os.Stat(filepath.Join(half, PrivateKeyFile)); err == nil {
		t.Error("a cosign.key was written beside the existing cosign.pub")
	}
	// An empty password is allowed, as cosign allows it.
	f, err := WriteKeyPair(filepath.Join(dir, "nopw"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrivateKey(f.Private, nil); err != nil {
		t.Errorf("reading a key sealed with an empty password: %v", err)
	}
	if _, err := ReadPrivateKey(filepath.Join(dir, "none.key"), nil); err == nil || !strings.Contains(err.Error(), "reading the signing key") {
		t.Errorf("a missing cosign.key: %v", err)
	}

	// cosign's older block name is read; a sealed key that is not P-256,
	// or not a key at all, is refused naming what it is.
	key, _ := GenerateKey()
	sealed, _ := EncodePrivateKey(key, []byte("pw"))
	b, _ := pem.Decode(sealed)
	old := pem.EncodeToMemory(&pem.Block{Type: CosignPrivateKeyPEMType, Bytes: b.Bytes})
	if got, err := DecodePrivateKey(old, []byte("pw")); err != nil || !got.Equal(key) {
		t.Errorf("ENCRYPTED COSIGN PRIVATE KEY block: %v", err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKCS8PrivateKey(p384)
	if _, err := DecodePrivateKey(sealRaw(t, der384), []byte("pw")); err == nil || !strings.Contains(err.Error(), "the private key is a ECDSA P-384 key, want ECDSA P-256") {
		t.Errorf("a sealed P-384 key: %v", err)
	}
	if _, err := DecodePrivateKey(sealRaw(t, []byte("not DER")), []byte("pw")); err == nil || !strings.Contains(err.Error(), "parsing the private key") {
		t.Errorf("a sealed non-key: %v", err)
	}
	if _, err := DecodePrivateKey([]byte("no pem here"), nil); err == nil || !strings.Contains(err.Error(), "no PEM block (want ENCRYPTED SIGSTORE PRIVATE KEY)") {
		t.Errorf("not PEM: %v", err)
	}
	if _, err := DecodePublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("junk")})); err == nil || !strings.Contains(err.Error(), "parsing the public key") {
		t.Errorf("a PUBLIC KEY block of junk: %v", err)
	}
	if _, err := EncodePublicKey("not a key"); err == nil || !strings.Contains(err.Error(), "encoding the public key") {
		t.Errorf("EncodePublicKey of a string: %v", err)
	}
}

func v1HashOf(alg, hex string) v1.Hash { return v1.Hash{Algorithm: alg, Hex: hex} }

// sealRaw seals der as cosign.key does (scrypt + secretbox, password "pw").
func sealRaw(t *testing.T, der []byte) []byte {
	t.Helper()
	sealed, err := encrypted.Encrypt(der, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PrivateKeyPEMType, Bytes: sealed})
}
