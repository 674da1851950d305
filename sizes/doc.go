// Package sizes measures and compares the sizes of image sets.
//
// A set is named by a repository prefix and a naming scheme (swebuild's,
// upstream's, or a reference template), or by a file of core.Image records
// (a build metadata file or a publish ledger). Measure reads each
// (instance, platform) image's manifest and config through the registry
// client and sums compressed layer sizes, unique layers shared across the
// set, and, when asked, uncompressed sizes; Compare and NewReport put two
// sets side by side (ours against another registry, arm64 against x86_64)
// with a growth limit, and Write renders the report as JSON (schema in
// report.schema.json), CSV, Markdown or HTML.
package sizes
