// Package dataset reads SWE-bench task records (JSONL, JSON array, parquet)
// and validates them, reporting bad input with file, line (or row) and field.
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
//     Instance.EnvSetupCommit for upstream's fallback;
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

// Instance is one SWE-bench task record. Field names follow the HuggingFace
// dataset; FAIL_TO_PASS and PASS_TO_PASS are decoded into real lists whether
// the source holds them as JSON-array strings or as arrays.
type Instance struct {
	Repo                   string   `json:"repo"`
	InstanceID             string   `json:"instance_id"`
	BaseCommit             string   `json:"base_commit"`
	Patch                  string   `json:"patch"`
	TestPatch              string   `json:"test_patch"`
	ProblemStatement       string   `json:"problem_statement,omitempty"`
	HintsText              string   `json:"hints_text,omitempty"`
	CreatedAt              string   `json:"created_at,omitempty"`
	Version                string   `json:"version"`
	FailToPass             []string `json:"FAIL_TO_PASS"`
	PassToPass             []string `json:"PASS_TO_PASS"`
	EnvironmentSetupCommit string   `json:"environment_setup_commit"`
	// ImageAssets is the record's image_assets (SWE-bench Multimodal) as
	// JSON text: the object itself, or the content of the string holding
	// it. Upstream's JavaScript eval.sh downloads its "test_patch" entries.
	ImageAssets string `json:"image_assets,omitempty"`

	// The v5 fields (upstream SWE-bench v5 datasets carry them in every
	// record): the record's own eval script (v5 runs it, with the test
	// command's exit status recorded after the end marker), the name of the
	// log parser v5 grades with (PARSER_REGISTRY[log_parser], no lookup by
	// repo), the eval type ("pass_and_fail" or "fail_only") and the image
	// the record names (e.g. "swebench/sweb.eval.x86_64.<id>:latest").
	// Empty when the record has none (v4.1.0-era datasets).
	EvalScript string `json:"eval_script,omitempty"`
	LogParser  string `json:"log_parser,omitempty"`
	EvalType   string `json:"eval_type,omitempty"`
	Image      string `json:"image,omitempty"`

	// Source locates the record for error messages: "file:line" (JSONL,
	// JSON array element) or "file:row N" (parquet, N counted from 0 as
	// pandas and the HuggingFace viewer show it).
	Source string `json:"-"`
}

// EnvSetupCommit is the commit upstream fetches requirements.txt /
// environment.yml at: environment_setup_commit, or base_commit when the
// record has none (swebench/harness/test_spec/python.py, get_requirements).
func (in *Instance) EnvSetupCommit() string {
	if in.EnvironmentSetupCommit != "" {
		return in.EnvironmentSetupCommit
	}
	return in.BaseCommit
}
