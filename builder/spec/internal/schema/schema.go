// Package schema is the shape of data/specs.json: the upstream tables as
// internal/gen writes them and package spec reads them (spec.Tables embeds
// Tables), declared once for both.
package schema

// Tables are the upstream constants rendering reads, as data/specs.json
// holds them (the per-repo specs are files of their own, data/specs).
type Tables struct {
	Source             string                       `json:"source"`
	ReqsPaths          map[string][]string          `json:"reqs_paths"`
	EnvYMLPaths        map[string][]string          `json:"env_yml_paths"`
	UseX86             []string                     `json:"use_x86"`
	DefaultDockerSpecs map[string]string            `json:"default_docker_specs"`
	Branches           map[string]map[string]string `json:"repo_base_commit_branch"`
	NonTestExts        []string                     `json:"non_test_exts"`
	// RepoToExt is MAP_REPO_TO_EXT: the language of each repo (py, c, go,
	// java, js, php, rb, rs), which picks templates, scripts and key names.
	RepoToExt     map[string]string `json:"repo_to_ext"`
	RepoToInstall map[string]string `json:"repo_to_install"`
	Latest        string            `json:"latest"`
	URLRaw        string            `json:"swe_bench_url_raw"`
	// START_TEST_OUTPUT / END_TEST_OUTPUT markers.
	StartTestOutput string `json:"start_test_output"`
	EndTestOutput   string `json:"end_test_output"`
	// Dockerfile templates per language (_DOCKERFILE_BASE, _ENV,
	// _INSTANCE) and per docker_specs _variant (_DOCKERFILE_BASE_JS_2).
	// A language without an env template formats its base template again,
	// as upstream's get_dockerfile_env does.
	BaseTemplates     map[string]string `json:"dockerfile_base"`
	EnvTemplates      map[string]string `json:"dockerfile_env"`
	InstanceTemplates map[string]string `json:"dockerfile_instance"`
	VariantTemplates  map[string]string `json:"dockerfile_base_variants"`
	HeredocEnv        string            `json:"heredoc_env"`
	HeredocEval       string            `json:"heredoc_eval"`
	// HeredocEvalCommon is make_eval_script_list_common's delimiter.
	HeredocEvalCommon string `json:"heredoc_eval_common"`
	// RepoTestCmds names the function computing a repo's test commands
	// from the instance (JavaScript's MAP_REPO_TO_TEST_CMDS).
	RepoTestCmds       map[string]string `json:"repo_test_cmds"`
	ReplaceReqPackages [][2]string       `json:"replace_req_packages"`
}
