// Package attest makes the attestations swebuild attaches to the images it
// publishes and reads them back:
//
//   - the verification statement: an in-toto Statement v1 with the
//     test-result predicate (https://in-toto.io/attestation/test-result/v0.1)
//     over a verify run of one per-arch image, bound to the image's digest
//     (VerificationStatement, of a verification.Verdict: VerificationOf);
//   - an OCI 1.1 artifact manifest carrying a statement, with the image as
//     its subject (Artifact);
//   - referrers that survive real registries (Referrers): written through
//     the referrers API where the registry serves it, else under the
//     referrers tag schema (sha256-<hex>) with a re-read and retry so that
//     concurrent writers on one image lose nothing, plus one write-once
//     tag per attachment; read from the API, the fallback tag and the
//     attachment tags; another build's referrers of the kinds a publish
//     attached superseded (Supersede).
//
// BuildKit's own SLSA provenance attestation is made by BuildKit (see
// builder/attest.go) and carried by publish; this package only reads it
// (ProvenanceStatement).
package attest
