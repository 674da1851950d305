package core

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
)

// Kind says what an Image record is about.
type Kind string

// Record kinds: the three node kinds of the build graph, the multi-arch
// index publish writes per instance, and a blob publish uploaded into a
// repository (its ledger's record of where each blob can be mounted from).
const (
	KindBase     Kind = "base"
	KindEnv      Kind = "env"
	KindInstance Kind = "instance"
	KindIndex    Kind = "index"
	KindBlob     Kind = "blob"
)

// Status is what happened to an image.
type Status string

// Statuses. A builder writes built or failed; publish writes published or
// failed.
const (
	StatusBuilt     Status = "built"
	StatusPublished Status = "published"
	StatusFailed    Status = "failed"
)

// Sizes are an image's measured sizes in bytes.
type Sizes struct {
	// Compressed is the sum of the layer blobs and the config as stored in
	// a registry.
	Compressed int64 `json:"compressed"`
	// Uncompressed is the sum of the layers' uncompressed sizes, when known.
	Uncompressed int64 `json:"uncompressed,omitempty"`
}

// Image is the one record of a built, verified or published image that
// every stage reads and writes: the builder writes one per node and platform
// (the metadata file), verify sets Verified, publish appends one per per-arch
// image and per index (the ledger), ci merges them and sizes measures them.
type Image struct {
	Kind Kind `json:"kind"`
	// InstanceID is the SWE-bench instance id (instance and index records).
	InstanceID string `json:"instance_id,omitempty"`
	// Key is the local image key a child Dockerfile names in FROM, e.g.
	// "sweb.env.py.x86_64.0123abcd:latest" (base, env and instance records).
	Key string `json:"key,omitempty"`
	// Platform is the image's platform; empty for an index.
	Platform Platform `json:"platform,omitzero"`
	// Digest is the manifest (or index) digest.
	Digest digest.Digest `json:"digest,omitempty"`
	// MediaType and Size describe the manifest, so an index can be
	// assembled from records alone.
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size,omitempty"`
	// Ref is a reference the image can be pulled by, pinned to Digest
	// (REGISTRY/REPO@sha256:...). For a published record it is the
	// published repository.
	Ref string `json:"ref,omitempty"`
	// Attestation and AttestationSize are the digest and size of the
	// attestation manifest (an OCI image manifest) BuildKit wrote for this
	// image (its SLSA provenance), in Ref's repository. Publish copies it
	// next to the image and lists it in the index.
	Attestation     digest.Digest `json:"attestation,omitempty"`
	AttestationSize int64         `json:"attestation_size,omitempty"`
	// SBOM and SBOMSize are the digest and size of the OCI artifact
	// manifest carrying the image's resolved environment (a CycloneDX
	// document, artifactType application/vnd.cyclonedx+json, package sbom)
	// attached to the image as a referrer in Ref's repository. Publish
	// carries it to the published per-arch repository. SBOMError says why
	// a built image has none (its capture or attachment failed; the image
	// itself is fine).
	SBOM      digest.Digest `json:"sbom,omitempty"`
	SBOMSize  int64         `json:"sbom_size,omitempty"`
	SBOMError string        `json:"sbom_error,omitempty"`
	// Verification and VerificationSize are the digest and size of the
	// OCI artifact manifest carrying the image's verification statement
	// (an in-toto test-result statement of the gold check that passed on
	// this image before it was exported, subject this digest, artifactType
	// application/vnd.in-toto+json), attached as a referrer in Ref's
	// repository or the OCI layout. Publish carries it to the per-arch and
	// the index repositories, as it carries the SBOM.
	Verification     digest.Digest `json:"verification,omitempty"`
	VerificationSize int64         `json:"verification_size,omitempty"`
	// Signatures are the Sigstore bundle referrers (one per signed
	// in-toto statement: the verification, the provenance, the SBOM)
	// publish attached to a published per-arch image, in its per-arch and
	// index repositories; SignedBy names who signed them ("key <id>" or
	// "certificate <identity>", sign.Signer.Name). Empty: not signed.
	Signatures []digest.Digest `json:"signatures,omitempty"`
	SignedBy   string          `json:"signed_by,omitempty"`
	// Tags are the tags a published record was written under.
	Tags []string `json:"tags,omitempty"`
	// OCILayout is an OCI image layout directory holding the image.
	OCILayout string `json:"oci_layout,omitempty"`
	// SpecKey identifies the build inputs (spec, scripts, pins, patch).
	SpecKey string `json:"spec_key,omitempty"`
	// Pins are the ids of the pin rules that changed the image's recipe
	// (`swebuild pins list`, a pins file's rules, frozen), as rendered: a
	// published digest that changes with them says so (drift's causes).
	Pins []string `json:"pins,omitempty"`
	// BaseCommit is the instance's base commit.
	BaseCommit string `json:"base_commit,omitempty"`
	// Dataset names the dataset the instance came from, with the revision
	// it was read at when it came from a hub (NAME@REVISION:SPLIT).
	Dataset string `json:"dataset,omitempty"`
	// Verified is the gold verification verdict: true (the gold patch
	// resolved the instance and the control did not), false, or absent
	// (not verified).
	Verified *bool `json:"verified,omitempty"`
	// Flaky lists, for an image whose gold runs disagreed (resolved in some
	// of them only), the labelled tests whose result differed and how
	// often each failed. Such an image is not verified (Verified false) but
	// published labelled: its index says flaky and so does the night's
	// summary.
	Flaky []Flake `json:"flaky,omitempty"`
	// Sizes are the measured sizes, when measured.
	Sizes *Sizes `json:"sizes,omitempty"`
	// Status is built, published or failed; Error says why it failed.
	Status Status `json:"status"`
	Error  string `json:"error,omitempty"`
	// Time is when the record was written (RFC 3339, UTC).
	Time string `json:"time,omitempty"`
}

// Flake is one labelled test whose result differed between the gold runs
// of an image: it failed (or had no result) in Failed of Runs runs.
type Flake struct {
	Test   string `json:"test"`
	Failed int    `json:"failed"`
	Runs   int    `json:"runs"`
}

func (f Flake) String() string { return fmt.Sprintf("%s (failed %d/%d)", f.Test, f.Failed, f.Runs) }

// IsFlaky reports whether the image's gold runs disagreed (Flaky).
func (im Image) IsFlaky() bool { return len(im.Flaky) > 0 }

// ID identifies what a record is about: the last record with a given ID in a
// file wins (see Latest).
func (im Image) ID() string {
	switch im.Kind {
	case KindInstance:
		return string(im.Kind) + " " + im.InstanceID + " " + im.Platform.String()
	case KindIndex:
		return string(im.Kind) + " " + im.InstanceID
	case KindBlob:
		return string(im.Kind) + " " + im.Ref
	default:
		return string(im.Kind) + " " + im.Key + " " + im.Platform.String()
	}
}

// OK reports whether the record is a success (built or published, no
// error).
func (im Image) OK() bool {
	return (im.Status == StatusBuilt || im.Status == StatusPublished) && im.Error == ""
}

// IsVerified reports whether the gold verification passed.
func (im Image) IsVerified() bool { return im.Verified != nil && *im.Verified }

// Bool returns a pointer to b, for Image.Verified.
func Bool(b bool) *bool { return &b }

// Now is the time format of Image.Time.
func Now(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// FieldError is a bad value in one record: the error names the field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks a record before it is written and after it is read. The
// error is a *FieldError naming the first bad field.
func (im Image) Validate() error {
	for _, check := range []func() *FieldError{im.checkKind, im.checkStatus, im.checkIdentity, im.checkValues, im.checkOutcome} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func bad(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (im Image) checkKind() *FieldError {
	switch im.Kind {
	case KindBase, KindEnv, KindInstance, KindIndex, KindBlob:
		return nil
	case "":
		return bad("kind", "required (base, env, instance, index or blob)")
	}
	return bad("kind", "%q is not base, env, instance, index or blob", im.Kind)
}

func (im Image) checkStatus() *FieldError {
	switch im.Status {
	case StatusBuilt, StatusPublished, StatusFailed:
		return nil
	case "":
		return bad("status", "required (built, published or failed)")
	}
	return bad("status", "%q is not built, published or failed", im.Status)
}

// checkIdentity: what each kind is identified by (instance id, key,
// platform, a blob's place).
func (im Image) checkIdentity() *FieldError {
	if (im.Kind == KindInstance || im.Kind == KindIndex) && im.InstanceID == "" {
		return bad("instance_id", "required for %s records", im.Kind)
	}
	if (im.Kind == KindBase || im.Kind == KindEnv) && im.Key == "" {
		return bad("key", "required for %s records", im.Kind)
	}
	if im.Kind != KindIndex && im.Kind != KindBlob {
		if im.Platform.IsZero() {
			return bad("platform", "required for %s records (linux/amd64 or linux/arm64)", im.Kind)
		}
		return nil
	}
	if !im.Platform.IsZero() {
		return bad("platform", "%s records have no platform (got %q)", im.Kind, im.Platform)
	}
	if im.Kind == KindBlob && (im.Digest == "" || im.Ref == "") {
		return bad("ref", "a blob record needs the digest and the repository@digest it is in")
	}
	return nil
}

// checkValues: the form of the digest, ref, size and time when given.
func (im Image) checkValues() *FieldError {
	if im.Digest != "" && !isSHA256(im.Digest) {
		return bad("digest", "%q is not a sha256 digest", im.Digest)
	}
	if im.Ref != "" {
		_, dg, ok := strings.Cut(im.Ref, "@")
		if !ok || digest.Digest(dg) != im.Digest {
			return bad("ref", "%q must be pinned to the record's digest %q", im.Ref, im.Digest)
		}
	}
	if fe := checkReferrer("attestation", im.Attestation, im.AttestationSize, "an attestation"); fe != nil {
		return fe
	}
	if fe := checkReferrer("verification", im.Verification, im.VerificationSize, "a verification statement"); fe != nil {
		return fe
	}
	for _, f := range im.Flaky {
		if f.Test == "" || f.Runs < 2 || f.Failed < 1 || f.Failed >= f.Runs {
			return bad("flaky", "%q failed %d of %d runs: a flaky test has a name and failed in some runs, not all", f.Test, f.Failed, f.Runs)
		}
	}
	for _, sg := range im.Signatures {
		if !isSHA256(sg) {
			return bad("signatures", "%q is not a sha256 digest", sg)
		}
	}
	if len(im.Signatures) > 0 && im.SignedBy == "" {
		return bad("signed_by", "required with signatures")
	}
	if im.Size < 0 {
		return bad("size", "%d is negative", im.Size)
	}
	if im.Time != "" {
		if _, err := time.Parse(time.RFC3339Nano, im.Time); err != nil {
			return bad("time", "%q is not an RFC 3339 time", im.Time)
		}
	}
	return nil
}

// isSHA256 reports whether d is a valid sha256 digest.
func isSHA256(d digest.Digest) bool {
	return d.Validate() == nil && d.Algorithm() == digest.SHA256
}

// checkReferrer checks a referrer's manifest digest (field, "" when there
// is none) and its size (field_size), which what needs.
func checkReferrer(field string, d digest.Digest, size int64, what string) *FieldError {
	if d == "" {
		return nil
	}
	if !isSHA256(d) {
		return bad(field, "%q is not a sha256 digest", d)
	}
	if size <= 0 {
		return bad(field+"_size", "%d: %s needs its manifest size", size, what)
	}
	return nil
}

// checkOutcome: a failure says why; a success has what it made.
func (im Image) checkOutcome() *FieldError {
	if im.Status == StatusFailed {
		if im.Error == "" {
			return bad("error", "required when status is failed")
		}
		return nil
	}
	switch {
	case im.Error != "":
		return bad("error", "must be empty when status is %s (got %q)", im.Status, im.Error)
	case im.Digest == "":
		return bad("digest", "required when status is %s", im.Status)
	case im.Status == StatusPublished && im.Ref == "":
		return bad("ref", "required when status is published")
	case im.Kind == KindInstance && im.SpecKey == "":
		return bad("spec_key", "required for a %s instance image", im.Status)
	}
	return nil
}

// Latest returns the last record of each ID in recs, sorted by ID.
func Latest(recs []Image) []Image {
	last := make(map[string]int, len(recs))
	for i, r := range recs {
		last[r.ID()] = i
	}
	out := make([]Image, 0, len(last))
	for _, i := range last {
		out = append(out, recs[i])
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID() < out[b].ID() })
	return out
}
