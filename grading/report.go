package grading

import "unicode/utf8"

// Bucket is one tests_status entry: the labelled tests that passed and
// failed, each in label order.
type Bucket struct {
	Success []string
	Failure []string
}

// TestsStatus is upstream's get_eval_tests_report result. FAIL_TO_FAIL and
// PASS_TO_FAIL stay empty, as upstream never asks for them when grading.
type TestsStatus struct {
	FailToPass Bucket
	PassToPass Bucket
	FailToFail Bucket
	PassToFail Bucket
}

// Resolution is upstream's ResolvedStatus.
type Resolution string

// Upstream's ResolvedStatus values.
const (
	ResolvedFull    Resolution = "RESOLVED_FULL"
	ResolvedPartial Resolution = "RESOLVED_PARTIAL"
	ResolvedNo      Resolution = "RESOLVED_NO"
)

// Report is one instance's entry of upstream's report.json.
type Report struct {
	InstanceID               string
	PatchIsNone              bool
	PatchExists              bool
	PatchSuccessfullyApplied bool
	Resolved                 bool
	// TestsStatus is nil when upstream's report has no "tests_status" (no
	// patch, or the patch/log counted as not applied).
	TestsStatus *TestsStatus
	// Resolution is the ResolvedStatus behind Resolved; "" when the tests
	// were not graded. Not part of report.json.
	Resolution Resolution
	// NotApplied says why patch_successfully_applied is false when the log
	// was read (a bad code, a missing marker). Not part of report.json.
	NotApplied string

	// Rules are the rules that graded; RulesV5 adds "infra_failure" (and
	// "infra_failure_reason") to report.json, as upstream v5 writes it.
	Rules Rules
	// InfraFailure is v5's infra_failure: the log was not graded and
	// infra_failure.py classified it in the environment tier.
	InfraFailure bool
	// InfraFailureReason is v5's infra_failure_reason (any tier), "" when
	// not classified; InfraTier is its tier (not in report.json).
	InfraFailureReason string
	InfraTier          string

	// The fields below are swebuild's and never part of report.json.

	// Decision is v5's get_logs_eval branch (LogResult.Decision).
	Decision string
	// Parser is the __name__ of the parser function (v5: the one
	// PARSER_REGISTRY names, e.g. parse_log_pytest_v2; v4.1: the one that
	// parsed); ParserRegistry is v5's registry name (parse_log_sphinx).
	Parser, ParserRegistry string
	// LogExitCode is the log's first ">>>>> Test Exit Code: N" (v5), nil
	// without one.
	LogExitCode *int
	// ExitCode is GradeOptions.ExitCode, the status the runner observed,
	// which v5 grading used instead of LogExitCode.
	ExitCode *int
	// ExitCodeDisagrees is true when both LogExitCode and ExitCode are known
	// and differ: the log's exit-code line is not the test command's status
	// (code under test can print that line itself).
	ExitCodeDisagrees bool
}

// MarshalJSON renders the report exactly as upstream writes report.json:
// json.dumps({instance_id: {...}}, indent=4) with no trailing newline.
func (r Report) MarshalJSON() ([]byte, error) {
	return r.JSON(), nil
}

// JSON is MarshalJSON without the error.
func (r Report) JSON() []byte {
	size := 256 + len(r.InstanceID)
	if ts := r.TestsStatus; ts != nil {
		for _, b := range []Bucket{ts.FailToPass, ts.PassToPass, ts.FailToFail, ts.PassToFail} {
			for _, l := range [][]string{b.Success, b.Failure} {
				for _, t := range l {
					size += len(t) + 24 // quotes, comma, newline, indent
				}
			}
		}
	}
	w := pyJSONWriter{buf: make([]byte, 0, size)}
	w.raw("{")
	w.newline(1)
	w.str(r.InstanceID)
	w.raw(": {")
	w.boolField(2, "patch_is_None", r.PatchIsNone, true)
	w.boolField(2, "patch_exists", r.PatchExists, false)
	w.boolField(2, "patch_successfully_applied", r.PatchSuccessfullyApplied, false)
	w.boolField(2, "resolved", r.Resolved, false)
	if r.Rules == RulesV5 {
		w.boolField(2, "infra_failure", r.InfraFailure, false)
		if r.InfraFailureReason != "" {
			w.raw(",")
			w.newline(2)
			w.str("infra_failure_reason")
			w.raw(": ")
			w.str(r.InfraFailureReason)
		}
	}
	if ts := r.TestsStatus; ts != nil {
		w.raw(",")
		w.newline(2)
		w.str("tests_status")
		w.raw(": {")
		w.bucket(3, "FAIL_TO_PASS", ts.FailToPass, true)
		w.bucket(3, "PASS_TO_PASS", ts.PassToPass, false)
		w.bucket(3, "FAIL_TO_FAIL", ts.FailToFail, false)
		w.bucket(3, "PASS_TO_FAIL", ts.PassToFail, false)
		w.newline(2)
		w.raw("}")
	}
	w.newline(1)
	w.raw("}")
	w.newline(0)
	w.raw("}")
	return w.buf
}

// pyJSONWriter writes JSON the way Python's json.dumps(obj, indent=4) does:
// ", " is never used between items (each item is on its own line), ": "
// between key and value, empty containers as "[]" / "{}", and strings with
// ensure_ascii escaping.
type pyJSONWriter struct {
	buf []byte
}

func (w *pyJSONWriter) raw(s string) { w.buf = append(w.buf, s...) }

func (w *pyJSONWriter) newline(level int) {
	w.buf = append(w.buf, '\n')
	for i := 0; i < level; i++ {
		w.buf = append(w.buf, "    "...)
	}
}

func (w *pyJSONWriter) boolField(level int, key string, v bool, first bool) {
	if !first {
		w.raw(",")
	}
	w.newline(level)
	w.str(key)
	if v {
		w.raw(": true")
	} else {
		w.raw(": false")
	}
}

func (w *pyJSONWriter) bucket(level int, key string, b Bucket, first bool) {
	if !first {
		w.raw(",")
	}
	w.newline(level)
	w.str(key)
	w.raw(": {")
	w.newline(level + 1)
	w.str("success")
	w.raw(": ")
	w.list(level+1, b.Success)
	w.raw(",")
	w.newline(level + 1)
	w.str("failure")
	w.raw(": ")
	w.list(level+1, b.Failure)
	w.newline(level)
	w.raw("}")
}

func (w *pyJSONWriter) list(level int, items []string) {
	if len(items) == 0 {
		w.raw("[]")
		return
	}
	w.raw("[")
	for i, s := range items {
		if i > 0 {
			w.raw(",")
		}
		w.newline(level + 1)
		w.str(s)
	}
	w.newline(level)
	w.raw("]")
}

// str writes s as Python's json.dumps(s) (ensure_ascii=True) does: `"` and
// `\` backslash-escaped, \n \r \t \b \f by name, every other character
// outside " ".."~" as \uXXXX (lower-case hex; surrogate pairs above
// U+FFFF). A byte that is not valid UTF-8 is written as \ufffd.
func (w *pyJSONWriter) str(s string) {
	const hex = "0123456789abcdef"
	b := append(w.buf, '"')
	for i := 0; i < len(s); {
		// Copy the longest run of characters written as they are.
		j := i
		for j < len(s) && s[j] >= ' ' && s[j] <= '~' && s[j] != '"' && s[j] != '\\' {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c == '"' || c == '\\' {
			b = append(b, '\\', c)
			i++
			continue
		}
		r, n := rune(c), 1
		if c >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		i += n
		switch r {
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			u := []rune{r}
			if r > 0xffff {
				r -= 0x10000
				u = []rune{0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff}
			}
			for _, x := range u {
				b = append(b, '\\', 'u', hex[x>>12&0xf], hex[x>>8&0xf], hex[x>>4&0xf], hex[x&0xf])
			}
		}
	}
	w.buf = append(b, '"')
}
