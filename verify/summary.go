package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/verification"
)

// Failure classes (Result.Failure).
const (
	FailurePatch   = "patch_apply_failed"
	FailureTimeout = "timeout"
	FailureTests   = "test_failures"
	FailureInfra   = "infrastructure_error"
	// FailureLeak: the image's git history has commits, tags or reflog
	// entries newer than base_commit.
	FailureLeak = "history_leak"
	// FailureFlaky: repeated runs disagree.
	FailureFlaky = "flaky"
	// FailureNotDiscriminating: the control run (no patch) resolves, so the
	// instance's tests do not tell a fix from no fix.
	FailureNotDiscriminating = "tests_do_not_discriminate"
	// FailureTruncated: the test output was longer than the limit, and
	// labelled tests have no result in the head and tail kept, so the run
	// cannot be graded as upstream grades the whole output.
	FailureTruncated = "output_truncated"
	// FailureEmptyPatch: a prediction whose model_patch is null or "" is
	// not run (upstream counts it in empty_patch_ids); its report.json is
	// what grading says of it (patch_is_None for null).
	FailureEmptyPatch = "empty_patch"
	// FailureHarness: a prediction whose patch changes the test harness
	// (HarnessChanges: what the test runner loads before or around the
	// tests) is not run, unless such changes are allowed
	// (Runner.AllowHarnessChanges); Attempt.Harness names the files.
	FailureHarness = "patch_modifies_test_harness"
	// FailureImageAbsent: the instance has no image for the platform where
	// verify was told to look (the --images repository has none, or the
	// metadata file or OCI layout names none): nothing ran.
	FailureImageAbsent = "image_absent"
)

// Truncation says a run's test output was longer than the limit: Size bytes,
// of which Omitted were left out between the head and the tail kept.
type Truncation struct {
	Size    int64 `json:"size"`
	Omitted int64 `json:"omitted"`
}

// OutputDigest is the size and sha256 of an output stream (a run's whole
// test output as the runtime streamed it).
type OutputDigest struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Counts are labelled tests that passed, of all labelled.
type Counts struct {
	Passed int `json:"passed"`
	Total  int `json:"total"`
}

func (c Counts) String() string { return fmt.Sprintf("%d/%d", c.Passed, c.Total) }

// Attempt is one run of one (instance, platform, mode).
type Attempt struct {
	Run         int     `json:"run"`
	Resolved    bool    `json:"resolved"`
	F2P         Counts  `json:"fail_to_pass"`
	P2P         Counts  `json:"pass_to_pass"`
	Seconds     float64 `json:"seconds"`
	TestSeconds float64 `json:"test_seconds"`
	// InContainerSeconds is the wrapper's own time (leak check, apply,
	// diffs, tests); Seconds minus it is container start and read-back.
	InContainerSeconds float64     `json:"in_container_seconds"`
	Failure            string      `json:"failure,omitempty"`
	Error              string      `json:"error,omitempty"`
	Leak               *LeakReport `json:"leak,omitempty"`
	// Truncated: the test output was cut to its head and tail, and graded
	// from them.
	Truncated *Truncation `json:"truncated,omitempty"`
	// Exit is the test command's exit status as the wrapper took it and
	// as the log says it (nil: neither known).
	Exit *ExitStatus `json:"exit_status,omitempty"`
	// Decision is, under v5's rules, the branch of get_logs_eval that
	// decided (grading.Report.Decision).
	Decision string `json:"decision,omitempty"`
	// Harness are the files of the patch that change the test harness:
	// reported for gold patches and allowed predictions, the reason a
	// prediction was not run (FailureHarness).
	Harness []HarnessFile `json:"harness_files,omitempty"`
	// Output is the size and sha256 of the whole test output as the
	// runtime streamed it.
	Output *OutputDigest `json:"test_output,omitempty"`
	Dir    string        `json:"dir"`
	// Labels maps each labelled test to pass or fail.
	Labels map[string]string `json:"-"`
}

// Result is one (instance, platform, mode, model) over its repeats.
type Result struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	// Mode is gold, control or predictions.
	Mode string `json:"mode"`
	// Model is a predictions run's model_name_or_path, as the file has it.
	Model string `json:"model,omitempty"`
	// Image is the reference of the image the runs used (pinned by digest
	// when verify was given digests): what a verification attestation binds
	// to.
	Image string `json:"image,omitempty"`
	// Script, Parser and Rules are what the runs used: the eval script
	// (source, sha256, fallback), the log parser and the grading rules.
	Script *ScriptInfo   `json:"eval_script,omitempty"`
	Parser string        `json:"log_parser,omitempty"`
	Rules  grading.Rules `json:"grading_rules,omitempty"`
	// Exit is the first run's exit status, or the first whose log and
	// wrapper disagree.
	Exit *ExitStatus `json:"exit_status,omitempty"`
	// Resolved: every run resolved.
	Resolved bool   `json:"resolved"`
	F2P      Counts `json:"fail_to_pass"`
	P2P      Counts `json:"pass_to_pass"`
	// Seconds is the mean wall time of a run; TestSeconds the mean time of
	// eval.sh inside the container.
	Seconds     float64 `json:"seconds"`
	TestSeconds float64 `json:"test_seconds"`
	// Failure is the class of the first failed run's failure ("" when
	// verification passed), FailureFlaky when runs disagree.
	Failure string `json:"failure,omitempty"`
	Error   string `json:"error,omitempty"`
	// FlakyTests are the labelled tests whose result differed between runs;
	// Flakes the same with how often each failed.
	FlakyTests []string    `json:"flaky_tests,omitempty"`
	Flakes     []Flake     `json:"flakes,omitempty"`
	Leak       *LeakReport `json:"leak,omitempty"`
	// Truncated is the first run's whose test output was cut.
	Truncated *Truncation `json:"truncated,omitempty"`
	// Harness are the first run's files that change the test harness.
	Harness []HarnessFile `json:"harness_files,omitempty"`
	// Discriminates (gold and predictions, when a control ran): the control
	// run of the same instance and platform came out unresolved.
	Discriminates *bool     `json:"discriminates,omitempty"`
	Dir           string    `json:"dir"`
	Runs          []Attempt `json:"runs"`
	// Cached: nothing ran; a successful verification of the same image
	// definition with the same inputs was found in the verification cache
	// under CacheKey (Dir is that run's logs, Runs is empty).
	Cached   bool   `json:"cached,omitempty"`
	CacheKey string `json:"cache_key,omitempty"`
	// Emulated: the platform is not the host's (Runner.Host), so its
	// containers ran through QEMU.
	Emulated bool `json:"emulated,omitempty"`
}

// Key identifies a result across summaries.
func (r Result) Key() string {
	k := r.InstanceID + "@" + r.Platform.String() + "#" + r.Mode
	if r.Mode == ModePredictions {
		k += "#" + r.Model
	}
	return k
}

// Label names the patch a result ran: gold, control, or the model (quoted).
func (r Result) Label() string { return runSpec{mode: r.Mode, model: r.Model}.label() }

// OK reports whether the result is what verification wants: a gold run
// resolved with a clean history and tests that discriminate; a control run
// unresolved (from its tests, not an infrastructure error); a predictions run
// graded without an infrastructure error or flakiness.
func (r Result) OK() bool {
	switch r.Mode {
	case ModeGold:
		return r.Resolved && r.Failure == "" && (r.Discriminates == nil || *r.Discriminates)
	case ModeControl:
		return !r.Resolved && (r.Failure == FailureTests || r.Failure == FailureTimeout)
	default:
		return r.Failure != FailureInfra && r.Failure != FailureFlaky && r.Failure != FailureLeak && r.Failure != FailureTruncated && r.Failure != FailureImageAbsent
	}
}

// ResolvedRuns counts the runs that resolved (a cached success: 1).
func (r Result) ResolvedRuns() int {
	if r.Cached {
		if r.Resolved {
			return 1
		}
		return 0
	}
	n := 0
	for _, a := range r.Runs {
		if a.Resolved {
			n++
		}
	}
	return n
}

// Flaky reports whether a gold result is flaky and nothing else: its runs
// disagree (FailureFlaky), some resolved, none leaked history or failed for
// the infrastructure, and the control (when one ran) did not resolve. Such
// an image is published labelled, never as verified.
func (r Result) Flaky() bool {
	if r.Mode != ModeGold || r.Failure != FailureFlaky || r.ResolvedRuns() == 0 || r.Leak.Leaked() || (r.Discriminates != nil && !*r.Discriminates) {
		return false
	}
	for _, a := range r.Runs {
		if a.Failure == FailureInfra || a.Failure == FailureLeak || a.Failure == FailurePatch {
			return false
		}
	}
	return true
}

// Flake is one labelled test whose result differed between the runs of a
// result (verification.Flake).
type Flake = verification.Flake

// flakes are the flaky tests of r (FlakyTests) with how often each failed
// among the runs graded (runs that failed for the infrastructure are not
// counted), in FlakyTests' order.
func (r Result) flakes() []Flake {
	var graded []Attempt
	for _, a := range r.Runs {
		if a.Failure != FailureInfra {
			graded = append(graded, a)
		}
	}
	var out []Flake
	for _, name := range r.FlakyTests {
		f := Flake{Test: name, Runs: len(graded)}
		for _, a := range graded {
			if a.Labels[name] != "pass" {
				f.Failed++
			}
		}
		out = append(out, f)
	}
	return out
}

// Why explains a result that is not OK.
func (r Result) Why() string {
	var parts []string
	if r.Failure != "" {
		parts = append(parts, r.Failure)
	}
	if r.Mode == ModeControl && r.Resolved {
		parts = append(parts, "the control run (no patch) resolves: the tests do not discriminate")
	}
	if r.Discriminates != nil && !*r.Discriminates {
		parts = append(parts, "the control run (no patch) also resolves: the tests do not discriminate")
	}
	if r.Error != "" {
		parts = append(parts, r.Error)
	}
	if r.Leak.Leaked() {
		parts = append(parts, r.Leak.String())
	}
	if len(r.Flakes) > 0 {
		var fs []string
		for _, f := range r.Flakes {
			fs = append(fs, f.String())
		}
		parts = append(parts, "flaky: "+strings.Join(fs, ", "))
	} else if len(r.FlakyTests) > 0 {
		parts = append(parts, "flaky: "+strings.Join(r.FlakyTests, ", "))
	}
	if len(parts) == 0 && !r.Resolved {
		parts = append(parts, "unresolved")
	}
	return strings.Join(parts, "; ")
}

// aggregate folds the attempts of one (target, mode, model).
func aggregate(t Target, mode, model string, runs []Attempt) Result {
	res := Result{InstanceID: t.Instance.InstanceID, Platform: t.Platform, Mode: mode, Model: model, Image: t.Image, Runs: runs, Resolved: len(runs) > 0}
	if len(runs) > 0 {
		res.F2P, res.P2P, res.Dir, res.Leak, res.Harness = runs[0].F2P, runs[0].P2P, runs[0].Dir, runs[0].Leak, runs[0].Harness
	}
	for _, a := range runs {
		res.Seconds += a.Seconds / float64(len(runs))
		res.TestSeconds += a.TestSeconds / float64(len(runs))
		if !a.Resolved {
			res.Resolved = false
		}
		if a.Failure != "" && res.Failure == "" {
			res.Failure, res.Error, res.F2P, res.P2P, res.Dir = a.Failure, a.Error, a.F2P, a.P2P, a.Dir
		}
		if a.Leak.Leaked() && !res.Leak.Leaked() {
			res.Leak = a.Leak
		}
		if a.Truncated != nil && res.Truncated == nil {
			res.Truncated = a.Truncated
		}
		if a.Exit != nil && (res.Exit == nil || a.Exit.Disagree && !res.Exit.Disagree) {
			res.Exit = a.Exit
		}
	}
	// Flaky tests: a label whose result differs between runs, and runs
	// whose verdicts differ.
	flaky := map[string]bool{}
	verdicts := map[bool]bool{}
	for _, a := range runs {
		if a.Failure == FailureInfra {
			continue
		}
		verdicts[a.Resolved] = true
		for _, b := range runs {
			if b.Failure == FailureInfra {
				continue
			}
			for name, st := range a.Labels {
				if b.Labels[name] != st {
					flaky[name] = true
				}
			}
		}
	}
	for name := range flaky {
		res.FlakyTests = append(res.FlakyTests, name)
	}
	sort.Strings(res.FlakyTests)
	res.Flakes = res.flakes()
	if len(res.FlakyTests) > 0 || len(verdicts) > 1 {
		res.Failure = FailureFlaky
	}
	if res.Failure == "" && res.Leak.Leaked() {
		res.Failure = FailureLeak
		res.Error = res.Leak.String()
	}
	return res
}

// Summary is the result of a verify run: one Result per (instance,
// platform, mode) in run order.
type Summary struct {
	// Settings are the run settings (absent in summaries of older
	// versions and of the build's gold check).
	Settings *verification.Settings `json:"settings,omitempty"`
	Results  []Result               `json:"results"`
}

// link sets Discriminates on gold and predictions results from the control
// result of the same instance and platform, and marks a gold result whose
// control resolves.
func (s *Summary) link() {
	control := map[string]Result{}
	for _, r := range s.Results {
		if r.Mode == ModeControl {
			control[r.InstanceID+"@"+r.Platform.String()] = r
		}
	}
	for i, r := range s.Results {
		c, ok := control[r.InstanceID+"@"+r.Platform.String()]
		if r.Mode == ModeControl || !ok || c.Failure == FailureInfra {
			continue
		}
		d := !c.Resolved
		s.Results[i].Discriminates = &d
		if !d && r.Mode == ModeGold && r.Failure == "" {
			s.Results[i].Failure = FailureNotDiscriminating
		}
	}
}

// Failed lists the results that are not OK.
func (s *Summary) Failed() []Result {
	var out []Result
	for _, r := range s.Results {
		if !r.OK() {
			out = append(out, r)
		}
	}
	return out
}

// Regression is a result that was resolved in the baseline and is not now.
type Regression struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	Mode       string        `json:"mode"`
	Model      string        `json:"model,omitempty"`
	Now        string        `json:"now"`
}

// Regressions compares s with an earlier summary: every gold or predictions
// result resolved in base and not resolved in s (missing from s counts as
// not resolved only when it was run and failed; results not run now are not
// compared).
func (s *Summary) Regressions(base *Summary) []Regression {
	was := map[string]Result{}
	for _, r := range base.Results {
		was[r.Key()] = r
	}
	var out []Regression
	for _, r := range s.Results {
		if r.Mode == ModeControl {
			continue
		}
		b, ok := was[r.Key()]
		if !ok || !b.Resolved || r.Resolved {
			continue
		}
		out = append(out, Regression{InstanceID: r.InstanceID, Platform: r.Platform, Mode: r.Mode, Model: r.Model, Now: r.Why()})
	}
	return out
}

// WriteJSON writes the summary as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding summary: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

// WriteFile writes the JSON summary to path.
func (s *Summary) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	if err := s.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// maxSummaryBytes bounds what ReadSummary reads: a summary of every
// instance of SWE-bench's test split on both platforms in three modes is a
// few tens of MiB.
const maxSummaryBytes = 512 << 20

// ReadSummary reads a summary written by WriteFile.
func ReadSummary(path string) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading summary: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, maxSummaryBytes+1))
	// A device or binary file fails on its first byte, not after the limit.
	if first, line, err := firstByte(br); err == nil && first != '{' {
		return nil, fmt.Errorf("reading summary %s:%d: not a summary: starts with byte %#02x, want a JSON object", path, line, first)
	}
	b, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("reading summary %s: %w", path, err)
	}
	if len(b) > maxSummaryBytes {
		return nil, fmt.Errorf("reading summary %s: larger than the %d-byte limit of a summary", path, maxSummaryBytes)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading summary %s: %w", path, err)
	}
	for i, r := range s.Results {
		if r.InstanceID == "" || r.Platform.IsZero() || r.Mode == "" {
			return nil, fmt.Errorf("reading summary %s: results[%d]: instance_id, platform and mode are required", path, i)
		}
		switch r.Mode {
		case ModeGold, ModeControl:
		case ModePredictions:
			if r.Model == "" {
				return nil, fmt.Errorf("reading summary %s: results[%d]: model is required for a predictions result", path, i)
			}
		default:
			// Summaries before the predictions mode had the model's
			// name as the mode.
			s.Results[i].Mode, s.Results[i].Model = ModePredictions, r.Mode
		}
	}
	return &s, nil
}

// WriteTable writes the regressions (if any) first, then one row per
// result, then the failures with their reasons.
func (s *Summary) WriteTable(w io.Writer, regressions []Regression) error {
	for _, r := range regressions {
		fmt.Fprintf(w, "REGRESSION %s %s %s: resolved in the baseline, now: %s\n", r.InstanceID, r.Platform, runSpec{mode: r.Mode, model: r.Model}.label(), r.Now)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPLATFORM\tMODE\tRESOLVED\tF2P\tP2P\tSECONDS\tTEST_SECONDS\tRUNS\tRESULT")
	for _, r := range s.Results {
		verdict := "ok"
		if r.Flaky() {
			verdict = "FLAKY (exported labelled, not verified)"
		} else if !r.OK() {
			verdict = "FAIL"
			if r.Failure != "" {
				verdict += " " + r.Failure
			}
		} else if r.Failure != "" {
			verdict = "ok (" + r.Failure + ")"
		} else if r.Cached {
			verdict = "ok (cached)"
		} else if r.Truncated != nil {
			verdict = "ok (graded from the head and tail of a long output)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%.1f\t%.1f\t%d\t%s\n", r.InstanceID, r.Platform, r.Label(), r.Resolved, r.F2P, r.P2P, r.Seconds, r.TestSeconds, len(r.Runs), verdict)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	failed := s.Failed()
	fmt.Fprintf(w, "%d results: %d ok, %d failed\n", len(s.Results), len(s.Results)-len(failed), len(failed))
	for _, r := range failed {
		if _, err := fmt.Fprintf(w, "%s %s %s: %s (logs: %s)\n", r.InstanceID, r.Platform, r.Label(), r.Why(), r.Dir); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
	}
	return nil
}
