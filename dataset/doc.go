// Package dataset reads SWE-bench task records (JSONL, JSON array, parquet)
// into core.Instance and validates them, reporting bad input with file, line (or row) and field.
//
// # Which fields are required
//
// Upstream SWE-bench v4.1.0 (make_test_spec and the grading code) reads:
//   - instance_id, repo, base_commit, test_patch: indexed directly (KeyError
//     if absent), so they are required here;
//   - version: read with .get but then used as the key of
//     MAP_REPO_VERSION_TO_SPECS[repo], so it is required too;
//   - FAIL_TO_PASS / PASS_TO_PASS: optional upstream ("if P2P, F2P keys not
//     found, it's a validation instance"), missing means an empty list. Same
//     here: a missing or null list loads as an empty, non-nil list;
//   - environment_setup_commit: optional upstream (requirements.txt /
//     environment.yml are fetched at base_commit when it is absent; the
//     Multilingual and Multimodal splits do not carry it). Optional here; use
//     core.Instance.EnvSetupCommit for upstream's fallback;
//   - patch: not read by generation or grading; only the gold-patch run
//     (verify) needs it. Optional here; verify must check it is non-empty.
//
// problem_statement, hints_text and created_at are optional and unchecked
// beyond their type; image_assets (Multimodal: a JSON object or a string
// holding one) is kept as JSON text for rendering, unchecked.
//
// Upstream v5's fields are optional (v4.1.0-era datasets lack them) and
// checked when present: eval_script (any string), log_parser (a name of
// [A-Za-z0-9._-]; whether the parser exists is for the grader to say),
// eval_type ("pass_and_fail" or "fail_only") and image (an image reference
// as Docker reads it). Any other field is ignored.
package dataset
