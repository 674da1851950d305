package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	intoto "github.com/in-toto/attestation/go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// Media and payload types.
const (
	// BundleMediaType is the Sigstore bundle v0.3 media type: the
	// bundle's own mediaType, the referrer's artifactType and its layer's
	// media type (cosign v3).
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
)

// Predicate types of the statements swebuild signs besides its own
// verification statement (attest.TestResultPredicate). cosign
// verify-attestation's --type takes the URI itself, or its short names
// slsaprovenance1, slsaprovenance02 and cyclonedx for these.
const (
	SLSAProvenanceV1  = "https://slsa.dev/provenance/v1"
	SLSAProvenanceV02 = "https://slsa.dev/provenance/v0.2"
	CycloneDXBOM      = "https://cyclonedx.org/bom"
)

// maxStatement bounds a statement (and a bundle) read or signed.
const maxStatement = 16 << 20

// Subject is one subject of a statement: its name and sha256 digest (hex).
type Subject struct{ Name, SHA256 string }

// StatementInfo is what signing and verification read from a statement.
type StatementInfo struct {
	PredicateType string
	Subjects      []Subject
}

// Names reports whether one of the statement's subjects has the sha256
// digest hex.
func (s StatementInfo) Names(hex string) bool {
	for _, sub := range s.Subjects {
		if sub.SHA256 == hex {
			return true
		}
	}
	return false
}

// Describe decodes statement with the in-toto attestation types (Statement
// v1, or v0.1 as BuildKit's SLSA v0.2 provenance is) and checks it is
// valid: a type, subjects with digests, a predicate type.
func Describe(statement []byte) (StatementInfo, error) {
	if len(statement) > maxStatement {
		return StatementInfo{}, fmt.Errorf("statement: %d bytes, more than %d", len(statement), maxStatement)
	}
	st := &intoto.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(statement, st); err != nil {
		return StatementInfo{}, fmt.Errorf("decoding the in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return StatementInfo{}, fmt.Errorf("in-toto statement: %w", err)
	}
	info := StatementInfo{PredicateType: st.GetPredicateType()}
	for _, s := range st.GetSubject() {
		info.Subjects = append(info.Subjects, Subject{Name: s.GetName(), SHA256: s.GetDigest()["sha256"]})
	}
	return info, nil
}

// Statement returns an in-toto Statement v1 of predicateType over the
// subject name@sha256:hex with predicate (a JSON object, e.g. a CycloneDX
// document: the SBOM statement cosign's --type cyclonedx reads), encoded as
// compact JSON with sorted keys (same input, same bytes).
func Statement(subjectName, subjectSHA256, predicateType string, predicate []byte) ([]byte, error) {
	var pred map[string]any
	dec := json.NewDecoder(bytes.NewReader(predicate))
	dec.UseNumber()
	if err := dec.Decode(&pred); err != nil || pred == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("statement predicate: not a JSON object: %w", err)
	}
	st := map[string]any{
		"_type":         intoto.StatementTypeUri,
		"subject":       []any{map[string]any{"name": subjectName, "digest": map[string]any{"sha256": subjectSHA256}}},
		"predicateType": predicateType,
		"predicate":     pred,
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding the statement: %w", err)
	}
	if _, err := Describe(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Signer signs statements into Sigstore bundles. Make one with
// NewKeySigner (a key pair) or NewKeylessSigner (Fulcio and Rekor).
type Signer struct {
	keypair sgsign.Keypair
	opts    sgsign.BundleOptions
	// idToken, for keyless signing, is given to the certificate provider.
	idToken string
}

// NewKeySigner signs with key (ECDSA P-256). Its bundles carry the
// signature and a hint naming the key, no certificate and no transparency
// log entry: a verifier needs the public key (cosign: --key cosign.pub
// --insecure-ignore-tlog=true). Its signatures are deterministic (RFC 6979):
// one statement signed twice gives the same bundle bytes.
func NewKeySigner(key *ecdsa.PrivateKey) (*Signer, error) {
	if key == nil || key.Curve != elliptic.P256() {
		return nil, errors.New("signing key: want an ECDSA P-256 key")
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return &Signer{keypair: &keyPair{key: key, hint: []byte(hintOf(der))}}, nil
}

// hintOf is a key's hint in a bundle: base64 of the SHA-256 of its PKIX
// DER, as sigstore-go names an ephemeral key.
func hintOf(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() crypto.PublicKey { return s.keypair.GetPublicKey() }

// Sign returns the Sigstore bundle (JSON, media type BundleMediaType) of a
// DSSE envelope of statement (payload type InTotoPayloadType), after
// checking statement is a valid in-toto statement (Describe). The bundle
// is compact JSON: protojson's randomised spacing is taken out, so bytes
// depend on the inputs only.
func (s *Signer) Sign(ctx context.Context, statement []byte) ([]byte, StatementInfo, error) {
	info, err := Describe(statement)
	if err != nil {
		return nil, info, fmt.Errorf("signing: %w", err)
	}
	opts := s.opts
	opts.Context = ctx
	if s.idToken != "" {
		opts.CertificateProviderOptions = &sgsign.CertificateProviderOptions{IDToken: s.idToken}
	}
	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: statement, PayloadType: InTotoPayloadType}, s.keypair, opts)
	if err != nil {
		return nil, info, fmt.Errorf("signing the %s statement: %w", info.PredicateType, err)
	}
	raw, err := encodeBundle(pb)
	if err != nil {
		return nil, info, err
	}
	return raw, info, nil
}

func encodeBundle(pb *protobundle.Bundle) ([]byte, error) {
	raw, err := protojson.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("encoding the bundle: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, fmt.Errorf("encoding the bundle: %w", err)
	}
	return out.Bytes(), nil
}

// keyPair is sigstore-go's sign.Keypair over an ECDSA P-256 key, signing
// deterministically (RFC 6979: crypto/ecdsa with no random source).
type keyPair struct {
	key  *ecdsa.PrivateKey
	hint []byte
}

func (k *keyPair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k *keyPair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (k *keyPair) GetHint() []byte                { return k.hint }
func (k *keyPair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k *keyPair) GetPublicKey() crypto.PublicKey { return &k.key.PublicKey }

func (k *keyPair) GetPublicKeyPem() (string, error) {
	b, err := EncodePublicKey(&k.key.PublicKey)
	return string(b), err
}

func (k *keyPair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := k.key.Sign(nil, sum[:], crypto.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: %w", err)
	}
	return sig, sum[:], nil
}

// sortedSubjects lists the subjects' digests, for messages.
func sortedSubjects(info StatementInfo) []string {
	var out []string
	for _, s := range info.Subjects {
		out = append(out, "sha256:"+s.SHA256)
	}
	sort.Strings(out)
	return out
}
