// Package sign signs the in-toto statements swebuild attaches to the images
// it publishes (its verification statement, BuildKit's SLSA provenance, the
// CycloneDX SBOM as a statement) as Sigstore bundles, attaches each bundle
// to the image as an OCI 1.1 referrer the way cosign v3 writes attestations,
// and verifies them again, so that a consumer's unmodified
//
//	cosign verify-attestation --key cosign.pub --insecure-ignore-tlog=true \
//	  --type <predicate type> REPO/IMAGE@sha256:<digest>
//
// and swebuild's own checks accept the same bytes.
//
//   - Keys (keys.go): an ECDSA P-256 key pair in cosign's own files,
//     cosign.key (PEM "ENCRYPTED SIGSTORE PRIVATE KEY": PKCS #8 sealed with
//     scrypt and NaCl secretbox, go-securesystemslib's encrypted package, as
//     cosign generate-key-pair writes it) and cosign.pub (PKIX PEM).
//   - Signing (bundle.go): a DSSE envelope of payload type
//     application/vnd.in-toto+json signed by sigstore-go's sign.Bundle into
//     a bundle of media type application/vnd.dev.sigstore.bundle.v0.3+json.
//     With a key the signature is deterministic (RFC 6979) and the bundle
//     names the key by hint only: no transparency log entry, no certificate.
//     Keyless (keyless.go): an ephemeral key, a Fulcio certificate for an
//     OIDC identity token (GitHub Actions') and a Rekor entry.
//   - Verification (verify.go): sigstore-go's verifier with the key (or a
//     trusted root and a certificate identity), the statement's subject
//     checked against the image digest, as cosign v3 does.
//   - The registry (oci.go): a referrer manifest as cosign v3's
//     WriteAttestationNewBundleFormat writes it (artifactType and one layer
//     of the bundle media type, the empty config, manifest annotations
//     dev.sigstore.bundle.content and dev.sigstore.bundle.predicateType),
//     written through attest.Referrers, so registries without the
//     referrers API (distribution 2.8, GHCR) get the sha256-<hex> fallback
//     index cosign reads, and read through publication.Reader, the one
//     bounded reader of published images.
package sign
