package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
)

// Trust says whose signatures count: a public key (key-signed bundles,
// as cosign verify-attestation --key PUB --insecure-ignore-tlog=true
// checks them) or, keyless, a certificate identity checked against a
// Sigstore trusted root (as cosign --certificate-identity ...
// --certificate-oidc-issuer ... checks them). Exactly one of Key and
// Identity is set.
type Trust struct {
	Key *ecdsa.PublicKey
	// Identity is the signing certificate's identity; TrustedRoot the
	// Fulcio CAs, Rekor logs and CT logs it is checked with (for the
	// public-good instance: its trusted_root.json, e.g. from sigstore's
	// TUF repository).
	Identity    *Identity
	TrustedRoot root.TrustedMaterial
	// IgnoreSCT does not require the certificate's signed certificate
	// timestamp (cosign's --insecure-ignore-sct: a private Fulcio with no
	// CT log). The public-good Fulcio embeds one in every certificate.
	IgnoreSCT bool
}

// Identity is a keyless signer: the certificate's subject alternative name
// (for GitHub Actions the workflow's URL at a ref, GitHubWorkflowIdentity)
// and the OIDC issuer, each exact or a regular expression.
type Identity struct {
	Subject, SubjectRegexp string
	Issuer, IssuerRegexp   string
}

func (id Identity) String() string {
	s, i := id.Subject, id.Issuer
	if s == "" {
		s = "~" + id.SubjectRegexp
	}
	if i == "" {
		i = "~" + id.IssuerRegexp
	}
	return s + " (issuer " + i + ")"
}

// Verified is a statement whose bundle verified: its exact bytes (the
// DSSE payload), what it says it is about, which referrer carried it and
// who signed it.
type Verified struct {
	Statement []byte
	StatementInfo
	Referrer v1.Hash
	Signer   string
}

// Rejection is a bundle that did not verify, and why.
type Rejection struct {
	Referrer v1.Hash
	Reason   string
}

func (r Rejection) String() string {
	if r.Referrer.Hex == "" {
		return r.Reason
	}
	return "referrer " + r.Referrer.String() + ": " + r.Reason
}

// Result is what verifying one image's bundles found.
type Result struct {
	// Image names the image (REPO@sha256:...) in messages.
	Image    string
	Verified []Verified
	Rejected []Rejection
}

// PredicateTypes lists the predicate types of the verified statements,
// sorted, without repeats.
func (r *Result) PredicateTypes() []string {
	var out []string
	for _, v := range r.Verified {
		if !slices.Contains(out, v.PredicateType) {
			out = append(out, v.PredicateType)
		}
	}
	sort.Strings(out)
	return out
}

// Of returns the verified statements of predicateType.
func (r *Result) Of(predicateType string) []Verified {
	var out []Verified
	for _, v := range r.Verified {
		if v.PredicateType == predicateType {
			out = append(out, v)
		}
	}
	return out
}

// ImageError is an image refused: it has no signed statement, none
// verified, or none of a wanted predicate type did. It names the image.
type ImageError struct {
	Image  string
	Reason string
	// Rejected are the bundles that did not verify.
	Rejected []Rejection
}

func (e *ImageError) Error() string {
	msg := e.Image + ": " + e.Reason
	if len(e.Rejected) > 0 {
		var rs []string
		for _, r := range e.Rejected {
			rs = append(rs, r.String())
		}
		msg += " (" + strings.Join(rs, "; ") + ")"
	}
	return msg
}

// check refuses a Trust that names no signer, or two.
func (t Trust) check() error {
	switch {
	case t.Key == nil && t.Identity == nil:
		return errors.New("verifying signatures: neither a public key nor a certificate identity was given")
	case t.Key != nil && t.Identity != nil:
		return errors.New("verifying signatures: give a public key or a certificate identity, not both")
	case t.Identity != nil && t.TrustedRoot == nil:
		return errors.New("verifying signatures: a certificate identity needs a Sigstore trusted root")
	}
	return nil
}

// signer names who the trust accepts, for messages.
func (t Trust) signer() string {
	if t.Key != nil {
		return "key " + KeyID(t.Key)
	}
	return "certificate " + t.Identity.String()
}

// verifier is sigstore-go's verifier and policy for t and the image
// digest, as cosign v3's CheckOpts.verificationOptions makes them: with a
// key, no transparency log and no timestamps (--insecure-ignore-tlog);
// keyless, one transparency log entry, one observer timestamp (Rekor's
// integrated time or an RFC 3161 one) and one SCT.
func (t Trust) verifier(image v1.Hash) (*verify.Verifier, verify.PolicyBuilder, error) {
	if err := t.check(); err != nil {
		return nil, verify.PolicyBuilder{}, err
	}
	dg, err := hex.DecodeString(image.Hex)
	if err != nil || image.Algorithm != "sha256" || len(dg) != 32 {
		return nil, verify.PolicyBuilder{}, fmt.Errorf("image digest %q is not sha256:<64 hex>", image)
	}
	artifact := verify.WithArtifactDigest("sha256", dg)
	if t.Key != nil {
		sv, err := signature.LoadVerifier(t.Key, crypto.SHA256)
		if err != nil {
			return nil, verify.PolicyBuilder{}, fmt.Errorf("loading the public key: %w", err)
		}
		key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
		tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
		v, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps())
		if err != nil {
			return nil, verify.PolicyBuilder{}, fmt.Errorf("making the verifier: %w", err)
		}
		return v, verify.NewPolicy(artifact, verify.WithKey()), nil
	}
	id, err := verify.NewShortCertificateIdentity(t.Identity.Issuer, t.Identity.IssuerRegexp, t.Identity.Subject, t.Identity.SubjectRegexp)
	if err != nil {
		return nil, verify.PolicyBuilder{}, fmt.Errorf("certificate identity: %w", err)
	}
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	if !t.IgnoreSCT {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(t.TrustedRoot, opts...)
	if err != nil {
		return nil, verify.PolicyBuilder{}, fmt.Errorf("making the verifier: %w", err)
	}
	return v, verify.NewPolicy(artifact, verify.WithCertificateIdentity(id)), nil
}

// ParseBundle decodes a Sigstore bundle (JSON) of version v0.3 or later
// (cosign v3 reads no older one from a registry) holding a DSSE envelope.
func ParseBundle(raw []byte) (*sgbundle.Bundle, error) {
	if len(raw) > maxStatement {
		return nil, fmt.Errorf("bundle: %d bytes, more than %d", len(raw), maxStatement)
	}
	pb := &protobundle.Bundle{}
	if err := protojson.Unmarshal(raw, pb); err != nil {
		return nil, fmt.Errorf("decoding the Sigstore bundle: %w", err)
	}
	b, err := sgbundle.NewBundle(pb)
	if err != nil {
		return nil, fmt.Errorf("Sigstore bundle: %w", err)
	}
	if !b.MinVersion("v0.3") {
		return nil, fmt.Errorf("Sigstore bundle: media type %q: older than v0.3", pb.GetMediaType())
	}
	if pb.GetDsseEnvelope() == nil {
		return nil, errors.New("Sigstore bundle: no DSSE envelope (a message signature signs no statement)")
	}
	return b, nil
}

// VerifyBundle verifies one bundle for the image of digest image: the
// signature with t, and the statement's subjects naming image. It returns
// the statement; an error says why not.
func (t Trust) VerifyBundle(raw []byte, image v1.Hash) (*Verified, error) {
	b, err := ParseBundle(raw)
	if err != nil {
		return nil, err
	}
	return t.verifyEntity(b, image)
}

// verifyEntity verifies a signed entity (a bundle; in tests, sigstore-go's
// virtual Sigstore's entities) whose content is a DSSE envelope.
func (t Trust) verifyEntity(e verify.SignedEntity, image v1.Hash) (*Verified, error) {
	sc, err := e.SignatureContent()
	if err != nil {
		return nil, fmt.Errorf("reading the signature: %w", err)
	}
	env := sc.EnvelopeContent()
	if env == nil {
		return nil, errors.New("no DSSE envelope (a message signature signs no statement)")
	}
	raw := env.RawEnvelope()
	if raw.PayloadType != InTotoPayloadType {
		return nil, fmt.Errorf("DSSE payload type %q, want %s", raw.PayloadType, InTotoPayloadType)
	}
	payload, err := raw.DecodeB64Payload()
	if err != nil {
		return nil, fmt.Errorf("decoding the DSSE payload: %w", err)
	}
	info, err := Describe(payload)
	if err != nil {
		return nil, err
	}
	if !info.Names(image.Hex) {
		return nil, fmt.Errorf("the %s statement is about %s, not this image", info.PredicateType, strings.Join(sortedSubjects(info), ", "))
	}
	v, policy, err := t.verifier(image)
	if err != nil {
		return nil, err
	}
	if _, err := v.Verify(e, policy); err != nil {
		return nil, fmt.Errorf("the %s statement's signature does not verify with %s%s: %w", info.PredicateType, t.signer(), hintNote(e, t), err)
	}
	return &Verified{Statement: payload, StatementInfo: info, Signer: t.signer()}, nil
}

// hintNote names the key the bundle says it was signed with when that is
// not the trusted key (the hint is not signed: a note, not evidence).
func hintNote(e verify.SignedEntity, t Trust) string {
	if t.Key == nil {
		return ""
	}
	vc, err := e.VerificationContent()
	if err != nil || vc == nil {
		return ""
	}
	if vc.Certificate() != nil {
		return " (the bundle carries a certificate, not a key)"
	}
	pk := vc.PublicKey()
	if pk == nil {
		return ""
	}
	der, err := x509.MarshalPKIXPublicKey(t.Key)
	if err != nil {
		return ""
	}
	if pk.Hint() != hintOf(der) {
		return fmt.Sprintf(" (the bundle names another key, hint %s)", pk.Hint())
	}
	return ""
}

// Bundle is a Sigstore bundle found among an image's referrers.
type Bundle struct {
	// Referrer is the referrer manifest that carried it.
	Referrer v1.Hash
	// PredicateType is the referrer's dev.sigstore.bundle.predicateType
	// annotation: unsigned, for messages only.
	PredicateType string
	JSON          []byte
}

// VerifyBundles verifies the bundles of the image of digest image (named
// name in messages) with t and returns what verified and what did not. It
// is an *ImageError when there is no bundle, none verified, or a
// predicate type of want has no verified statement.
func (t Trust) VerifyBundles(name string, image v1.Hash, bundles []Bundle, want ...string) (*Result, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	r := &Result{Image: name}
	if len(bundles) == 0 {
		return r, &ImageError{Image: name, Reason: "no signed statement: no Sigstore bundle refers to it"}
	}
	for _, b := range bundles {
		v, err := t.VerifyBundle(b.JSON, image)
		if err != nil {
			r.Rejected = append(r.Rejected, Rejection{Referrer: b.Referrer, Reason: err.Error()})
			continue
		}
		v.Referrer = b.Referrer
		r.Verified = append(r.Verified, *v)
	}
	if len(r.Verified) == 0 {
		return r, &ImageError{Image: name, Reason: fmt.Sprintf("no signed statement verifies with %s: %d refused", t.signer(), len(r.Rejected)), Rejected: r.Rejected}
	}
	var missing []string
	for _, p := range want {
		if len(r.Of(p)) == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return r, &ImageError{
			Image:    name,
			Reason:   fmt.Sprintf("no verified %s statement (verified: %s)", strings.Join(missing, ", "), strings.Join(r.PredicateTypes(), ", ")),
			Rejected: r.Rejected,
		}
	}
	return r, nil
}
