package grading

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/core"
)

// This file holds upstream SWE-bench v5.0.2's grading rules
// (swebench/harness/grading.py, infra_failure.py and the log parser changes
// since v4.1.0), used when GradeOptions.Rules is RulesV5.

// TestExitCode is the marker v5's eval scripts write after the end marker
// with the test command's exit status: ">>>>> Test Exit Code: N".
const TestExitCode = ">>>>> Test Exit Code"

// Upstream v5's get_logs_eval branches, as the reference names them
// (LogResult.Decision).
const (
	DecisionGraded         = "graded"
	DecisionWholeLog       = "graded_from_whole_log_fallback"
	DecisionSuiteRanEmpty  = "graded_with_empty_status_map_suite_ran"
	DecisionMarkersMissing = "markers_missing"
	DecisionBadCode        = "bad_code"
	DecisionNoResults      = "no_results_and_no_sign_the_suite_ran"
	DecisionExitCode       = "nonzero_test_exit_code_without_a_failure"
	DecisionPatchIsNone    = "patch_is_None"
)

// Upstream's EvalType values (a v5 record's eval_type).
const (
	EvalTypePassAndFail = "pass_and_fail"
	EvalTypeFailOnly    = "fail_only"
)

// Infra failure tiers of infra_failure.py.
const (
	TierEnvironment = "environment"
	TierAmbiguous   = "ambiguous"
)

// ErrParserNotImplemented is returned (wrapped) where swebuild does not
// follow upstream v5: parse_log_prismjs on a fullTitle that is not a
// string (upstream would key its map by a number or null).
var ErrParserNotImplemented = errors.New("upstream v5 log parser not implemented by swebuild")

// rules returns the rules grading inst: o.Rules, or for "" RulesV5 when the
// record names its log_parser and RulesV41 otherwise.
func (o GradeOptions) rules(inst core.Instance) (Rules, error) {
	switch o.Rules {
	case RulesV5, RulesV41:
		return o.Rules, nil
	case "":
		if inst.LogParser != "" {
			return RulesV5, nil
		}
		return RulesV41, nil
	}
	return "", fmt.Errorf("unknown grading rules %q (want %q or %q)", o.Rules, RulesV5, RulesV41)
}

// v5Base maps a name of v5's PARSER_REGISTRY to the v4.1.0 function it is
// (v5 registers aliases such as parse_log_sphinx = parse_log_pytest_v2).
func v5Base(name string) (string, error) {
	switch name {
	case "parse_log_astroid", "parse_log_flask", "parse_log_marshmallow", "parse_log_pvlib",
		"parse_log_pyvista", "parse_log_sqlfluff", "parse_log_xarray":
		return "parse_log_pytest", nil
	case "parse_log_pydicom", "parse_log_requests", "parse_log_pylint":
		return "parse_log_pytest_options", nil
	case "parse_log_astropy", "parse_log_scikit", "parse_log_sphinx":
		return "parse_log_pytest_v2", nil
	case "parse_log_bpmn_js", "parse_log_carbon", "parse_log_eslint", "parse_log_grommet",
		"parse_log_highlightjs", "parse_log_lighthouse", "parse_log_next", "parse_log_openlayers",
		"parse_log_prismjs", "parse_log_quarto_cli":
		return name, nil // added by v5 (parse_multimodal.go)
	}
	if _, ok := parserNamed(name); ok {
		return name, nil
	}
	return "", fmt.Errorf("%w: %q is not in upstream v5's PARSER_REGISTRY", ErrUnknownParser, name)
}

// v5Parse returns v5's version of the v4.1.0 parser named base: the
// parsers v5 changed, the v4.1.0 one otherwise.
func v5Parse(base string) (parseFunc, bool) {
	switch base {
	case "parse_log_pytest":
		return parsePytestV5, true
	case "parse_log_pytest_options":
		return parsePytestOptionsV5, true
	case "parse_log_matplotlib":
		return parseMatplotlibV5, true
	case "parse_log_pytest_v2":
		return parsePytestV2V5, true
	case "parse_log_seaborn":
		return parseSeabornV5, true
	case "parse_log_maven":
		return parseMavenV5, true
	case "parse_log_gradle_custom":
		return parseGradleCustomV5, true
	case "parse_log_jest":
		return parseJestV5, true
	case "parse_log_bpmn_js":
		return parseBpmnJS, true
	case "parse_log_carbon":
		return parseCarbon, true
	case "parse_log_eslint":
		return parseESLint, true
	case "parse_log_grommet":
		return parseGrommet, true
	case "parse_log_highlightjs":
		return parseHighlightJS, true
	case "parse_log_openlayers":
		return parseOpenlayers, true
	case "parse_log_prismjs":
		return parsePrismJS, true
	case "parse_log_quarto_cli":
		return parseQuartoCLI, true
	}
	p, ok := parserNamed(base)
	if !ok || p.parse == nil {
		return nil, false
	}
	return p.parse, true
}

// v5Parser resolves the parser grading a log of inst under v5:
// PARSER_REGISTRY[o.Parser or inst.LogParser], a dispatcher's choice
// followed. It returns the registry name, the __name__ of the function it
// names (v4.1.0's, for an alias), the name of the function that parses (a
// dispatcher's choice) and that function.
func (o GradeOptions) v5Parser(inst core.Instance) (string, string, string, parseFunc, error) {
	name := o.Parser
	if name == "" {
		name = inst.LogParser
	}
	if name == "" {
		return "", "", "", nil, fmt.Errorf("record %s has no log_parser, which v5 rules pick the parser by (name one with --parser, or grade with v4.1 rules)", inst.InstanceID)
	}
	base, err := v5Base(name)
	if err != nil {
		return "", "", "", nil, err
	}
	p, _ := parserNamed(base)
	sub := base
	if p.dispatch != nil {
		if sub, err = p.dispatch(inst.InstanceID); err != nil {
			return "", "", "", nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	parse, ok := v5Parse(sub)
	switch sub { // the two that read test_spec.version
	case "parse_log_next":
		parse, ok = nextParser(inst.Version), true
	case "parse_log_lighthouse":
		parse, ok = lighthouseParser(inst.Version), true
	}
	if !ok {
		return "", "", "", nil, fmt.Errorf("%s dispatches to %s, which is not a parser", name, sub)
	}
	return name, base, sub, parse, nil
}

// failOnly returns whether inst is graded with EvalType.FAIL_ONLY under v5:
// its eval_type, or for a record without one, upstream v4.1.0's
// FAIL_ONLY_REPOS. Any other value raises ValueError in upstream.
func v5FailOnly(inst core.Instance) (bool, error) {
	switch inst.EvalType {
	case EvalTypeFailOnly:
		return true, nil
	case EvalTypePassAndFail:
		return false, nil
	case "":
		return FailOnlyRepo(inst.Repo), nil
	}
	return false, fmt.Errorf("record %s: eval_type %q is not %q or %q", inst.InstanceID, inst.EvalType, EvalTypePassAndFail, EvalTypeFailOnly)
}

// suiteRanPattern is v5's SUITE_RAN (re.M): evidence that a test runner
// executed, every count non-zero. Python's \d and \s are spelled out; \w is
// Unicode letters, numbers and "_" (Python 3.11's \w minus nothing but the
// characters Unicode 15 added).
const suiteRanPattern = `(?m)Executed [1-9]` + reD + `* of ` + reD + `+` +
	`|TOTAL: [1-9]` + reD + `* (?:SUCCESS|FAILED)` +
	`|[1-9]` + reD + `* passing` +
	`|Tests:` + reS + `+[1-9]` + reD + `*` +
	`|Test Suites:` + reS + `+(?:` + reD + `+ [\p{L}\p{N}_]+, )*[1-9]` + reD + `* total` +
	`|^# tests [1-9]` + reD + `*` +
	`|[1-9]` + reD + `* specs?, ` + reD + `+ failures?` +
	`|': ok$`

// SuiteRan returns the first match of v5's SUITE_RAN in log, and whether
// there is one.
func SuiteRan(log string) (string, bool) {
	loc := regexp.MustCompile(suiteRanPattern).FindStringIndex(log)
	if loc == nil {
		return "", false
	}
	return log[loc[0]:loc[1]], true
}

// ParseTestExitCode is v5's parse_test_exit_code: the status of the FIRST
// ">>>>> Test Exit Code: N" anywhere in log (\s* after the colon, -?\d+ with
// Python's Unicode digits), nil when there is none. A value beyond int is
// clamped to the nearest int (still non-zero, which is all upstream asks).
func ParseTestExitCode(log string) *int {
	re := regexp.MustCompile(regexp.QuoteMeta(TestExitCode) + `:` + reS + `*(-?` + reD + `+)`)
	m := re.FindStringSubmatch(log)
	if m == nil {
		return nil
	}
	s, neg := m[1], false
	if strings.HasPrefix(s, "-") {
		s, neg = s[1:], true
	}
	v := 0
	for _, r := range s {
		d := pyDigitValue(r)
		if v > (math.MaxInt-d)/10 {
			v = math.MaxInt
			break
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return &v
}

// pyDigitValue is int()'s value of a character Python's \d matches: every
// Unicode Nd block is runs of ten consecutive digits starting at zero, so
// the value is the count of digits just before r, modulo 10.
func pyDigitValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	k := 0
	for isPyDigit(r - rune(k) - 1) {
		k++
	}
	return k % 10
}

// infraSignature is one row of INFRA_FAILURE_SIGNATURES, with needles:
// strings one of which every text the pattern matches holds (a pattern
// needs none of them to be searched for in a text holding none).
type infraSignature struct {
	reason, tier, pattern string
	needles               []string
}

// infraSignatures is infra_failure.py's INFRA_FAILURE_SIGNATURES, in its
// order (the first that matches wins); patterns under re.MULTILINE.
func infraSignatures() [8]infraSignature {
	return [...]infraSignature{
		{"browser_launch_failed", TierEnvironment, `Failed to launch|Failed to connect to the bus`, []string{"Failed to launch", "Failed to connect to the bus"}},
		{"display_unavailable", TierEnvironment, `cannot open display|Missing X server|unable to open X display`, []string{"cannot open display", "Missing X server", "unable to open X display"}},
		{"out_of_memory", TierEnvironment, `Cannot allocate memory|OutOfMemoryError|^Killed$`, []string{"Cannot allocate memory", "OutOfMemoryError", "Killed"}},
		{"container_unavailable", TierEnvironment, `Error response from daemon|Cannot connect to the Docker daemon`, []string{"Error response from daemon", "Cannot connect to the Docker daemon"}},
		{"network_unreachable", TierEnvironment, `Could not resolve host|Temporary failure in name resolution`, []string{"Could not resolve host", "Temporary failure in name resolution"}},
		{"missing_module", TierAmbiguous, `Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError`, []string{"Cannot find module", "MODULE_NOT_FOUND", "ModuleNotFoundError"}},
		{"no_tests_collected", TierAmbiguous, `no tests ran|collected 0 items`, []string{"no tests ran", "collected 0 items"}},
		{"tests_timed_out", TierAmbiguous, `Timeout error: ` + reD + `+ seconds exceeded`, []string{"Timeout error: "}},
	}
}

// infraMatchers are the signatures' patterns, compiled once.
var infraMatchers = sync.OnceValue(func() (out [8]*regexp.Regexp) {
	for i, s := range infraSignatures() {
		out[i] = regexp.MustCompile(`(?m)` + s.pattern)
	}
	return out
})

// ClassifyInfra is v5's classify_text: the reason and tier of the first
// infra-failure signature found in text (a log after universal newlines),
// ok false when none matches or text is empty. classify_logs over several
// files is ClassifyInfra of their texts joined by "\n". A pattern is
// matched only against a text holding one of its needles: Go's regexp
// scans an alternation of literals at a few MB/s, strings.Contains at
// memory speed, and most logs hold no needle (measured: 362 reference
// logs, 78% of grading's CPU in these matches before).
func ClassifyInfra(text string) (reason, tier string, ok bool) {
	if text == "" {
		return "", "", false
	}
	res := infraMatchers()
	for i, s := range infraSignatures() {
		if slices.ContainsFunc(s.needles, func(n string) bool { return strings.Contains(text, n) }) && res[i].MatchString(text) {
			return s.reason, s.tier, true
		}
	}
	return "", "", false
}

// gradedText is the part of a log both rules grade: the test output
// between its markers (the whole log with wholeLog). A log with a bad code
// or without the markers is not graded: reason says why and decision is
// upstream v5's branch for it.
func gradedText(log string, wholeLog bool) (section, reason, decision string) {
	if c := badCode(log); c != "" {
		return "", fmt.Sprintf("log contains %q", c), DecisionBadCode
	}
	if wholeLog {
		return log, "", ""
	}
	section, ok := testOutputSection(log)
	if !ok {
		return "", fmt.Sprintf("log lacks %q or %q", StartTestOutput, EndTestOutput), DecisionMarkersMissing
	}
	return section, "", ""
}

// evalLogV5 is v5's get_logs_eval: v4.1.0's bad codes, markers and
// whole-log fallback, then no results and no SUITE_RAN evidence is not
// graded, then a non-zero exit status (opts.ExitCode, else the log's first
// exit-code line) with a non-empty map holding no FAILED or ERROR entry is
// not graded (#620).
func evalLogV5(inst core.Instance, log string, opts GradeOptions) (LogResult, error) {
	name, base, sub, parse, err := opts.v5Parser(inst)
	if err != nil {
		return LogResult{}, fmt.Errorf("grading log: %w", err)
	}
	if err := checkUTF8(log); err != nil {
		return LogResult{}, err
	}
	log = NormalizeNewlines(log)
	res := LogResult{StatusMap: NewStatusMap(), Rules: RulesV5, Registry: name, Function: base}
	section, reason, decision := gradedText(log, opts.WholeLog)
	if reason != "" {
		res.Reason, res.Decision = reason, decision
		return res, nil
	}
	res.Parser = sub
	sm := NewStatusMap()
	if err := parse(section, sm); err != nil {
		return LogResult{}, fmt.Errorf("grading log with %s: %w", sub, err)
	}
	decision = DecisionGraded
	if sm.Len() == 0 && !opts.WholeLog {
		res.FellBack = true
		decision = DecisionWholeLog
		if err := parse(log, sm); err != nil {
			return LogResult{}, fmt.Errorf("grading whole log with %s: %w", sub, err)
		}
	}
	if sm.Len() == 0 {
		ev, ok := SuiteRan(log)
		if !ok {
			res.Reason = "no test results and no sign the suite ran (SUITE_RAN)"
			res.Decision = DecisionNoResults
			return res, nil
		}
		res.SuiteRan = ev
		decision = DecisionSuiteRanEmpty
	}
	res.LogExitCode = ParseTestExitCode(log)
	code := res.LogExitCode
	if opts.ExitCode != nil {
		code = opts.ExitCode
	}
	if code != nil && *code != 0 && sm.Len() > 0 && !hasFailure(sm) {
		res.Reason = fmt.Sprintf("test command exited %d and the log reports no FAILED or ERROR test", *code)
		res.Decision = DecisionExitCode
		return res, nil
	}
	res.StatusMap = sm
	res.Applied = true
	res.Decision = decision
	return res, nil
}

// hasFailure reports whether sm holds a FAILED or ERROR entry.
func hasFailure(sm *StatusMap) bool {
	for _, k := range sm.keys {
		if st := sm.m[k]; st == StatusFailed || st == StatusError {
			return true
		}
	}
	return false
}

// resolveCase is v5's _resolve_case (#290): the key of sm for label, exact
// or, for a label with more "[" than "]" that is no key, the first key in
// map order starting with label when every such key agrees on pass (PASSED
// or XFAIL) versus not; ok false otherwise.
func resolveCase(sm *StatusMap, label string) (string, bool) {
	if _, ok := sm.m[label]; ok {
		return label, true
	}
	if strings.Count(label, "[") <= strings.Count(label, "]") {
		return "", false
	}
	first, seen, passing := "", false, false
	for _, k := range sm.keys {
		if !strings.HasPrefix(k, label) {
			continue
		}
		st := sm.m[k]
		p := st == StatusPassed || st == StatusXFail
		if !seen {
			first, seen, passing = k, true, p
		} else if p != passing {
			return "", false
		}
	}
	return first, seen
}

// EvalTestsReportV5 is v5's get_eval_tests_report: with failOnly, a label
// fails iff it is a key whose status is FAILED (exact keys only); otherwise
// labels resolve through resolveCase, a FAIL_TO_PASS label succeeds when
// PASSED or XFAIL and fails when missing, FAILED, ERROR or SKIPPED, and a
// PASS_TO_PASS label also succeeds when SKIPPED. Other statuses land in
// neither list.
func EvalTestsReportV5(sm *StatusMap, failToPass, passToPass []string, failOnly bool) TestsStatus {
	return evalTestsReport(sm, failToPass, passToPass, failOnly, func(t string, maintained bool) (success, failure bool) {
		key, ok := resolveCase(sm, t)
		st := sm.m[key]
		if ok && (st == StatusPassed || st == StatusXFail || maintained && st == StatusSkipped) {
			return true, false
		}
		return false, !ok || st == StatusFailed || st == StatusError || st == StatusSkipped
	})
}

// gradeV5 is v5's get_eval_report for a prediction with a patch.
func gradeV5(inst core.Instance, log string, opts GradeOptions, r Report) (Report, error) {
	failOnly, err := v5FailOnly(inst)
	if err != nil {
		return Report{}, fmt.Errorf("grading %s: %w", inst.InstanceID, err)
	}
	res, err := evalLogV5(inst, log, opts)
	if err != nil {
		return Report{}, fmt.Errorf("grading %s: %w", inst.InstanceID, err)
	}
	r.Decision, r.Parser, r.ParserRegistry = res.Decision, res.Function, res.Registry
	r.LogExitCode, r.ExitCode = res.LogExitCode, opts.ExitCode
	r.ExitCodeDisagrees = opts.ExitCode != nil && res.LogExitCode != nil && *opts.ExitCode != *res.LogExitCode
	if !res.Applied {
		r.NotApplied = res.Reason
		if reason, tier, ok := ClassifyInfra(NormalizeNewlines(log)); ok {
			r.InfraFailure = tier == TierEnvironment
			r.InfraFailureReason, r.InfraTier = reason, tier
		}
		return r, nil
	}
	r.PatchSuccessfullyApplied = true
	ts := EvalTestsReportV5(res.StatusMap, inst.FailToPass, inst.PassToPass, failOnly)
	r.Resolution = ResolutionStatus(ts)
	r.Resolved = r.Resolution == ResolvedFull
	r.TestsStatus = &ts
	return r, nil
}

// RunFailure is v5's make_run_report classification of one instance that
// was not resolved or errored (#586): classify_logs(test_output.txt,
// run_instance.log). Environment-tier reasons go to infra_failure_ids,
// ambiguous ones to ambiguous_failure_ids; the instance stays unresolved
// or errored either way.
type RunFailure struct {
	// Reason is failure_reasons[id]; "" when no signature matched.
	Reason string
	// Tier is TierEnvironment or TierAmbiguous ("" with no Reason).
	Tier string
}

// ClassifyRun is make_run_report's per-instance classification: texts are
// the contents of test_output.txt and run_instance.log, in that order, of
// those that exist (after universal newlines), which classify_logs joins
// with "\n". Call it only for an instance make_run_report counts as
// unresolved or errored (no report.json); resolved and empty-patch ones are
// never classified.
func ClassifyRun(texts ...string) RunFailure {
	reason, tier, ok := ClassifyInfra(strings.Join(texts, "\n"))
	if !ok {
		return RunFailure{}
	}
	return RunFailure{Reason: reason, Tier: tier}
}
