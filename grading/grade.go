package grading

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/swebuild/swebuild/core"
)

// Log markers and bad codes, upstream's constants.
const (
	StartTestOutput = ">>>>> Start Test Output"
	EndTestOutput   = ">>>>> End Test Output"
	ApplyPatchFail  = ">>>>> Patch Apply Failed"
	ResetFailed     = ">>>>> Reset Failed"
	TestsError      = ">>>>> Tests Errored"
	TestsTimeout    = ">>>>> Tests Timed Out"
)

// GradeOptions changes how a log is read.
type GradeOptions struct {
	// WholeLog parses the whole log and does not require the Start/End
	// markers: what logs of harnesses older than the markers need (their
	// stored reports were graded that way). The bad codes still make the
	// log "not applied". Off means exactly upstream v4.1.0.
	WholeLog bool
	// Parser names the upstream parser function to use instead of the
	// repository's (e.g. "parse_log_pytest" for a profile's repositories,
	// which upstream's map does not list); "" means MAP_REPO_TO_PARSER.
	Parser string
	// Rules chooses upstream's grading rules: RulesV5 (swebench 5.0.2:
	// exit status, suite ran, infra labels, ...) or RulesV41 (v4.1.0,
	// byte-identical to its report.json). "" means RulesV5 for a record
	// that carries log_parser and RulesV41 otherwise.
	Rules Rules
	// ExitCode is the test command's exit status as the runner observed it
	// from outside the container (verify's wrapper), nil when unknown. With
	// RulesV5 it is used instead of the first ">>>>> Test Exit Code: N"
	// line of the log, which the code under test can print itself; the
	// report says when the two disagree.
	ExitCode *int
}

// Rules names a version of upstream's grading rules.
type Rules string

// The grading rules swebuild implements.
const (
	RulesV41 Rules = "v4.1"
	RulesV5  Rules = "v5"
)

// LogResult is upstream's get_logs_eval result with the reason behind it.
type LogResult struct {
	// StatusMap is the parsed map; empty when Applied is false.
	StatusMap *StatusMap
	// Applied is get_logs_eval's second value: false when a bad code occurs
	// in the log or a marker is missing.
	Applied bool
	// Reason says why Applied is false.
	Reason string
	// FellBack is true when the marked section parsed to nothing and the
	// whole log was parsed instead (upstream's fallback).
	FellBack bool
	// Parser is the upstream function that parsed the log (a dispatcher's
	// choice, e.g. parse_log_minitest for jekyll/jekyll-8167); "" when the
	// log was not parsed.
	Parser string
	// Rules are the rules that read the log.
	Rules Rules
	// Registry is, under RulesV5, the PARSER_REGISTRY name that picked the
	// parser (e.g. "parse_log_sphinx" for parse_log_pytest_v2), and
	// Function the __name__ of the function it names (parse_log_pytest_v2;
	// a dispatcher's own name).
	Registry, Function string
	// Decision is, under RulesV5, the branch of upstream v5's get_logs_eval
	// that decided (DecisionGraded, DecisionExitCode, ...).
	Decision string
	// SuiteRan is, under RulesV5, the SUITE_RAN evidence that let an empty
	// status map be graded.
	SuiteRan string
	// LogExitCode is, under RulesV5, the log's first ">>>>> Test Exit Code:
	// N" (nil without one, or when the log was not read that far).
	LogExitCode *int
}

// badCode returns the first of upstream's bad codes found in log, in
// upstream's order, or "".
func badCode(log string) string {
	for _, c := range [...]string{ApplyPatchFail, ResetFailed, TestsError, TestsTimeout} {
		if strings.Contains(log, c) {
			return c
		}
	}
	return ""
}

// parser is the parser grading a log of repo: the one opts.Parser names, or
// MAP_REPO_TO_PARSER's.
func (o GradeOptions) parser(repo string) (parserDef, error) {
	if o.Parser != "" {
		p, ok := parserNamed(o.Parser)
		if !ok {
			return parserDef{}, fmt.Errorf("%w: %q", ErrUnknownParser, o.Parser)
		}
		return p, nil
	}
	p, ok := parserForRepo(repo)
	if !ok {
		return parserDef{}, fmt.Errorf("%q: %w", repo, ErrNoParser)
	}
	return p, nil
}

// EvalLog is upstream v4.1.0's get_logs_eval for a log of inst (its Repo
// picks the parser, its InstanceID is what the dispatching parsers read):
// universal newlines; any bad code, or a missing marker, means not applied;
// otherwise the text after the first start marker up to the next end marker
// is parsed, and the whole log when that gives an empty map. Errors: the
// repository has no parser (ErrNoParser), the log is not UTF-8 (upstream's
// read() raises), or the parser raises on the log (ErrUpstreamParserRaises).
//
// Under RulesV5 (opts.Rules, or "" for a record with LogParser) it is
// upstream v5.0.2's get_logs_eval instead: see evalLogV5.
func EvalLog(inst core.Instance, log string, opts GradeOptions) (LogResult, error) {
	rules, err := opts.rules(inst)
	if err != nil {
		return LogResult{}, fmt.Errorf("grading log: %w", err)
	}
	if rules == RulesV5 {
		return evalLogV5(inst, log, opts)
	}
	p, err := opts.parser(inst.Repo)
	if err != nil {
		return LogResult{}, fmt.Errorf("grading log: %w", err)
	}
	if err := checkUTF8(log); err != nil {
		return LogResult{}, err
	}
	log = NormalizeNewlines(log)
	res := LogResult{StatusMap: NewStatusMap(), Rules: RulesV41}
	section, reason, _ := gradedText(log, opts.WholeLog)
	if reason != "" {
		res.Reason = reason
		return res, nil
	}
	name, parse, err := p.resolve(inst.InstanceID)
	if err != nil {
		return LogResult{}, fmt.Errorf("grading log: %w", err)
	}
	res.Parser = name
	res.Applied = true
	if err := parse(section, res.StatusMap); err != nil {
		return LogResult{}, fmt.Errorf("grading log with %s: %w", name, err)
	}
	if res.StatusMap.Len() == 0 && !opts.WholeLog {
		res.FellBack = true
		if err := parse(log, res.StatusMap); err != nil {
			return LogResult{}, fmt.Errorf("grading whole log with %s: %w", name, err)
		}
	}
	return res, nil
}

// checkUTF8 fails for a log upstream's read() cannot decode.
func checkUTF8(log string) error {
	if utf8.ValidString(log) {
		return nil
	}
	off := 0
	for off < len(log) {
		r, n := utf8.DecodeRuneInString(log[off:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		off += n
	}
	return fmt.Errorf("grading log: byte %d is not valid UTF-8 (upstream cannot read the log)", off)
}

// testOutputSection is what upstream's parsers read of a log: from after
// the first StartTestOutput to the first EndTestOutput after it (or the
// end); ok false when the log lacks either marker.
func testOutputSection(log string) (section string, ok bool) {
	start := strings.Index(log, StartTestOutput)
	if start < 0 || !strings.Contains(log, EndTestOutput) {
		return "", false
	}
	section = log[start+len(StartTestOutput):]
	if end := strings.Index(section, EndTestOutput); end >= 0 {
		section = section[:end]
	}
	return section, true
}

// testPassed is upstream's test_passed: PASSED or XFAIL.
func testPassed(sm *StatusMap, test string) bool {
	st, ok := sm.Get(test)
	return ok && (st == StatusPassed || st == StatusXFail)
}

// testFailed is upstream's test_failed: missing, FAILED or ERROR.
func testFailed(sm *StatusMap, test string) bool {
	st, ok := sm.Get(test)
	return !ok || st == StatusFailed || st == StatusError
}

// EvalTestsReport is upstream's get_eval_tests_report (calculate_to_fail
// off): each FAIL_TO_PASS / PASS_TO_PASS label lands in success (passed),
// failure (failed or missing) or neither (SKIPPED and any other status), in
// label order. failOnly selects upstream's FAIL_ONLY rule: failure iff the
// status is FAILED.
func EvalTestsReport(sm *StatusMap, failToPass, passToPass []string, failOnly bool) TestsStatus {
	return evalTestsReport(sm, failToPass, passToPass, failOnly, func(t string, _ bool) (success, failure bool) {
		if testPassed(sm, t) {
			return true, false
		}
		return false, testFailed(sm, t)
	})
}

// evalTestsReport is what v4.1.0's and v5's get_eval_tests_report share:
// each FAIL_TO_PASS and PASS_TO_PASS label, in label order, lands in
// success, failure or neither; with failOnly (upstream's FAIL_ONLY) failure
// iff the label is a key whose status is FAILED, otherwise as judge says
// (maintained is true for PASS_TO_PASS labels). The FAIL_TO_FAIL and
// PASS_TO_FAIL buckets stay empty.
func evalTestsReport(sm *StatusMap, failToPass, passToPass []string, failOnly bool,
	judge func(label string, maintained bool) (success, failure bool)) TestsStatus {
	classify := func(labels []string, maintained bool) Bucket {
		b := Bucket{Success: []string{}, Failure: []string{}}
		for _, t := range labels {
			if failOnly {
				if st, ok := sm.Get(t); ok && st == StatusFailed {
					b.Failure = append(b.Failure, t)
				} else {
					b.Success = append(b.Success, t)
				}
				continue
			}
			switch success, failure := judge(t, maintained); {
			case success:
				b.Success = append(b.Success, t)
			case failure:
				b.Failure = append(b.Failure, t)
			}
		}
		return b
	}
	return TestsStatus{
		FailToPass: classify(failToPass, false),
		PassToPass: classify(passToPass, true),
		FailToFail: Bucket{Success: []string{}, Failure: []string{}},
		PassToFail: Bucket{Success: []string{}, Failure: []string{}},
	}
}

// ResolutionStatus is upstream's get_resolution_status: FULL when the
// FAIL_TO_PASS and PASS_TO_PASS rates are both 1 (an empty bucket pair rates
// 1), PARTIAL when FAIL_TO_PASS is strictly between 0 and 1 and
// PASS_TO_PASS is 1, NO otherwise.
func ResolutionStatus(ts TestsStatus) Resolution {
	f2pOne := len(ts.FailToPass.Failure) == 0
	f2pSome := len(ts.FailToPass.Success) > 0
	p2pOne := len(ts.PassToPass.Failure) == 0
	switch {
	case f2pOne && p2pOne:
		return ResolvedFull
	case !f2pOne && f2pSome && p2pOne:
		return ResolvedPartial
	}
	return ResolvedNo
}

// Grade is upstream v4.1.0's get_eval_report(test_spec, prediction, log,
// include_tests_status=True) for inst: patch nil is a prediction whose
// model_patch is None (patch_is_None, nothing graded); any other patch,
// even empty, exists. The labels are inst.FailToPass and inst.PassToPass.
// On error (see EvalLog) upstream produces no report at all.
//
// Under RulesV5 it is upstream v5.0.2's get_eval_report: the record's
// eval_type, v5's get_logs_eval (EvalLog), a log not graded classified by
// infra_failure.py (InfraFailure, InfraFailureReason), and v5's test rules
// (EvalTestsReportV5). With opts.ExitCode the observed status replaces the
// log's exit-code line, and ExitCodeDisagrees says when they differ.
func Grade(inst core.Instance, log string, patch *string, opts GradeOptions) (Report, error) {
	r := Report{InstanceID: inst.InstanceID}
	rules, err := opts.rules(inst)
	if err != nil {
		return Report{}, fmt.Errorf("grading %s: %w", inst.InstanceID, err)
	}
	r.Rules = rules
	if patch == nil {
		r.PatchIsNone = true
		if rules == RulesV5 {
			r.Decision = DecisionPatchIsNone
		}
		return r, nil
	}
	r.PatchExists = true
	if rules == RulesV5 {
		return gradeV5(inst, log, opts, r)
	}
	res, err := EvalLog(inst, log, opts)
	if err != nil {
		return Report{}, fmt.Errorf("grading %s: %w", inst.InstanceID, err)
	}
	if !res.Applied {
		r.NotApplied = res.Reason
		return r, nil
	}
	r.Parser = res.Parser
	r.PatchSuccessfullyApplied = true
	ts := EvalTestsReport(res.StatusMap, inst.FailToPass, inst.PassToPass, FailOnlyRepo(inst.Repo))
	r.Resolution = ResolutionStatus(ts)
	r.Resolved = r.Resolution == ResolvedFull
	r.TestsStatus = &ts
	return r, nil
}
