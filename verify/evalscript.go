package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/internal/pystr"
)

// Which eval script a run uses (Target.Script.Source).
const (
	// ScriptDataset is the record's own eval_script, as upstream SWE-bench
	// v5 runs it (EvalScriptV5): the default.
	ScriptDataset = "dataset"
	// ScriptGenerated is the eval.sh swebuild renders from the spec
	// tables, byte-identical to upstream v4.1.0's.
	ScriptGenerated = "generated"
)

// Upstream v5's exit-status lines (swebench.harness.constants).
const (
	EndTestOutput   = ">>>>> End Test Output"
	TestExitCode    = ">>>>> Test Exit Code"
	TestExitCodeVar = "SWEBENCH_TEST_EXIT_CODE"
)

// ScriptInfo says which eval script a run used: its source, the sha256 of
// its text (the record's eval_script field as the dataset has it, or the
// generated eval.sh), and why the generated one was used when the dataset's
// was asked for.
type ScriptInfo struct {
	Source   string `json:"source"`
	SHA256   string `json:"sha256"`
	Fallback string `json:"fallback,omitempty"`
}

func scriptInfo(source, text, fallback string) ScriptInfo {
	sum := sha256.Sum256([]byte(text))
	return ScriptInfo{Source: source, SHA256: hex.EncodeToString(sum[:]), Fallback: fallback}
}

// EvalScriptV5 is the script upstream v5 runs for a record's eval_script
// (swebench.harness.utils.make_test_spec: TestSpec.eval_script of
// record_test_exit_code(parse_eval_script(s))): the script stripped of
// surrounding white space (Python's str.strip), split at "\n", without its
// "#!/bin/bash" and "set -uxo pipefail" lines, with the test command's exit
// status kept in SWEBENCH_TEST_EXIT_CODE just before the first line holding
// ">>>>> End Test Output" and echoed as ">>>>> Test Exit Code: N" just after
// it, under a new "#!/bin/bash" / "set -uxo pipefail" head. recorded is
// false when the script has no end marker (upstream then leaves it
// untouched and trusts the log alone).
func EvalScriptV5(s string) (script string, recorded bool) {
	var lines []string
	for _, l := range strings.Split(pystr.Strip(s), "\n") {
		if l != "#!/bin/bash" && l != "set -uxo pipefail" {
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		if strings.Contains(l, EndTestOutput) {
			out := make([]string, 0, len(lines)+3)
			out = append(out, lines[:i]...)
			out = append(out, TestExitCodeVar+"=$?", l, `echo "`+TestExitCode+`: $`+TestExitCodeVar+`"`)
			out = append(out, lines[i+1:]...)
			lines, recorded = out, true
			break
		}
	}
	return strings.Join(append([]string{"#!/bin/bash", "set -uxo pipefail"}, lines...), "\n") + "\n", recorded
}

// exitTrailer ends the script verify runs when the script records the test
// command's exit status: eval.sh then exits with it, and the engine takes it
// from the container runtime as the exit status of the test process, which
// no process of the run can write (the echoed line is the code under test's
// output like any other).
// It prints nothing (xtrace is off for it, its trace going nowhere), so the
// test output is upstream's.
const exitTrailer = "{ set +x; } 2>/dev/null; exit \"${" + TestExitCodeVar + ":-255}\"\n"

// testExitCodeRE is upstream's TEST_EXIT_CODE_RE.
var testExitCodeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(TestExitCode) + `:\s*(-?\d+)`) })

// LogExitCode is the first ">>>>> Test Exit Code: N" of a test output, as
// upstream's parse_test_exit_code reads it (nil when absent). The code under
// test can print such a line itself.
func LogExitCode(log string) *int {
	m := testExitCodeRE().FindStringSubmatch(log)
	if m == nil {
		return nil
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return nil
	}
	return &n
}

// ExitStatus is the test command's exit status as the runtime reported it
// and as the log says it, and whether they disagree.
type ExitStatus struct {
	// Wrapper is the exit status of the test process (eval.sh, which exits
	// with the test command's status) as the container runtime reported it
	// (nil: the script does not record it, or the run timed out). The name
	// is kept from when a wrapper script in the container took it.
	Wrapper *int `json:"wrapper"`
	// Log is the first ">>>>> Test Exit Code" line's (nil: none).
	Log *int `json:"log"`
	// Disagree: both are known and differ (the code under test printed a
	// line of its own, or the script was changed while it ran).
	Disagree bool `json:"disagree,omitempty"`
}

func (e ExitStatus) String() string {
	show := func(p *int) string {
		if p == nil {
			return "none"
		}
		return strconv.Itoa(*p)
	}
	return fmt.Sprintf("test command exit status %s (runtime), %s (log)", show(e.Wrapper), show(e.Log))
}
