package core

// Instance is one SWE-bench task record (package dataset loads and validates
// them, package taskrepo reads them from a task repo). Field names follow the HuggingFace
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

	// Extra are the record's other columns, those no field above holds
	// (SWE-bench Verified's difficulty, anything a dataset adds), in the
	// order read. They are kept so that a record written out again (a task
	// repo's task.yaml) loses nothing.
	Extra []Column `json:"-"`

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

// Column is one of a record's other columns: its name and its value as
// JSON text (a string, number, boolean, null, array or object).
type Column struct {
	Name  string
	Value string
}

// SetExtra sets column name to value (JSON text), replacing an earlier
// one of that name, as a later key of a JSON object does.
func (in *Instance) SetExtra(name, value string) {
	for i := range in.Extra {
		if in.Extra[i].Name == name {
			in.Extra[i].Value = value
			return
		}
	}
	in.Extra = append(in.Extra, Column{Name: name, Value: value})
}
