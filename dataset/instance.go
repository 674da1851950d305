// Package dataset reads SWE-bench task records (JSONL, JSON array, parquet)
// and validates them, reporting bad input with file, line (or row) and field.
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

	// Source locates the record for error messages: "file:line" (JSONL,
	// JSON array element) or "file:row N" (parquet).
	Source string `json:"-"`
}
