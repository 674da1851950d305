// Package publish copies built instance images to a destination repository
// and writes one multi-arch index per instance.
//
// Its input is the typed record every stage shares (core.Image, read from
// the build metadata file). Publish copies each per-arch image by digest
// (from a registry, the same one or another, or an OCI layout directory),
// streaming blobs that are not already there and mounting those it can,
// then writes the instance's index (manifests.Index) only after every child
// is in place, so a reader never sees a partial index. What was done is
// appended to the ledger (Ledger: core.Image records in a locked,
// append-only JSON lines file), which makes a killed run resumable and a
// re-run a no-op: an image or index already published with the same digest
// is not copied again. With RequireVerified, only images whose gold patch
// was verified are published. The referrers a record names (provenance,
// SBOM, verification statement) travel with its image to the per-arch and
// the index repository, and are its only ones of their kinds there.
//
// Before anything is written, Run checks that the destination registry
// answers and accepts the credential for a push (CheckTargets).
//
// Network policy (retries, time budget, per-host limits, credentials) is
// the registry package's; publish makes no retries of its own.
package publish
