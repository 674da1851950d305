package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The log parsers upstream v5.0.2 changed since v4.1.0 (RulesV5). Each is
// the v4.1.0 function with v5's change; the others are unchanged.

// isSkipSummary is v5's _is_skip_summary: pytest's "SKIPPED [N]
// path:line: reason" summary line, whose "[N]" is not a test. Only for
// SKIPPED (re.match(r"^\[\d+\]$", name), \d Unicode).
func isSkipSummary(status, name string) bool {
	if status != StatusSkipped || len(name) < 3 || name[0] != '[' || name[len(name)-1] != ']' {
		return false
	}
	for _, r := range name[1 : len(name)-1] {
		if !isPyDigit(r) {
			return false
		}
	}
	return true
}

// pyFields is Python's str.split() with no arguments.
func pyFields(s string) []string {
	return strings.FieldsFunc(s, pystr.IsSpace)
}

// parsePytestV5 is v5's parse_log_pytest (and its aliases
// parse_log_astroid, _flask, _marshmallow, _pvlib, _pyvista, _sqlfluff,
// _xarray): v4.1.0's without skip-summary lines.
func parsePytestV5(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{skipSummary: true})
}

// parseMatplotlibV5 is v5's parse_log_matplotlib.
func parseMatplotlibV5(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{mouseButtons: true, skipSummary: true})
}

// parsePytestOptionsV5 is v5's parse_log_pytest_options (and
// parse_log_pydicom, _requests, _pylint).
func parsePytestOptionsV5(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{optionNames: true, skipSummary: true})
}

// parsePytestV2V5 is v5's parse_log_pytest_v2 (and parse_log_astropy,
// _scikit, _sphinx): after the same cleaning, a line starting with a status
// keys the whole rest of the fields joined by one space (names with
// spaces), a FAILED line first losing everything from its first " - "; a
// line ending with a status keys all fields but the last.
func parsePytestV2V5(log string, sm *StatusMap) error {
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		line = cleanV2(line)
		if hasStatusPrefix(line) {
			if strings.HasPrefix(line, StatusFailed) {
				if i := strings.Index(line, " - "); i >= 0 {
					line = line[:i]
				}
			}
			f := pyFields(line)
			if len(f) >= 2 && !isSkipSummary(f[0], f[1]) {
				sm.set(strings.Join(f[1:], " "), f[0])
			}
		} else if hasStatusSuffix(line) {
			f := pyFields(line)
			if len(f) >= 2 {
				sm.set(strings.Join(f[:len(f)-1], " "), f[len(f)-1])
			}
		}
	}
	return nil
}

// parseSeabornV5 is v5's parse_log_seaborn: lines with fewer than two
// fields are skipped (v4.1.0 raised IndexError on some).
func parseSeabornV5(log string, sm *StatusMap) error {
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		f0, f1, n := pySplit2(line)
		if n < 2 {
			continue
		}
		switch {
		case strings.HasPrefix(line, StatusFailed):
			sm.set(f1, StatusFailed)
		case strings.Contains(line, " "+StatusPassed+" "):
			if f1 == StatusPassed {
				sm.set(f0, StatusPassed)
			}
		case strings.HasPrefix(line, StatusPassed):
			sm.set(f1, StatusPassed)
		}
	}
	return nil
}

// parseMavenV5 is v5's parse_log_maven: "-Dtest=" names queue up and each
// "BUILD SUCCESS|FAILURE" line takes the oldest waiting name; results seen
// while no name waits are paired, in order, with the names still waiting at
// the end.
func parseMavenV5(log string, sm *StatusMap) error {
	re := pyRegexp(`^.*-Dtest=(` + reNotS + `+).*$`)
	var pending, unmatched []string
	record := func(name, status string) {
		if status == "SUCCESS" {
			sm.set(name, StatusPassed)
		} else {
			sm.set(name, StatusFailed)
		}
	}
	err := forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if strings.Contains(line, "-Dtest=") {
			if m := re.FindStringSubmatch(line); m != nil {
				pending = append(pending, m[1])
			}
		}
		status := ""
		switch {
		case strings.HasSuffix(line, "BUILD SUCCESS"):
			status = "SUCCESS"
		case strings.HasSuffix(line, "BUILD FAILURE"):
			status = "FAILURE"
		default:
			return nil
		}
		if len(pending) > 0 {
			record(pending[0], status)
			pending = pending[1:]
		} else {
			unmatched = append(unmatched, status)
		}
		return nil
	})
	for len(pending) > 0 && len(unmatched) > 0 {
		record(pending[0], unmatched[0])
		pending, unmatched = pending[1:], unmatched[1:]
	}
	return err
}

// parseGradleCustomV5 is v5's parse_log_gradle_custom: also a test name
// alone on a line (^([^>]\S*\s+>\s+\S+)$) followed, after any other lines,
// by a line that is only PASSED or FAILED.
func parseGradleCustomV5(log string, sm *StatusMap) error {
	full := pyRegexp(`^([^>].+)` + reS + `+(PASSED|FAILED)$`)
	nameOnly := pyRegexp(`^([^>]` + reNotS + `*` + reS + `+>` + reS + `+` + reNotS + `+)$`)
	pending := ""
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if strings.HasSuffix(line, "PASSED") || strings.HasSuffix(line, "FAILED") {
			if m := full.FindStringSubmatch(line); m != nil {
				if m[2] == "PASSED" {
					sm.set(m[1], StatusPassed)
				} else {
					sm.set(m[1], StatusFailed)
				}
				pending = ""
				return nil
			}
		}
		if strings.Contains(line, ">") {
			if m := nameOnly.FindStringSubmatch(line); m != nil {
				pending = m[1]
				return nil
			}
		}
		if pending != "" && (line == "PASSED" || line == "FAILED") {
			if line == "PASSED" {
				sm.set(pending, StatusPassed)
			} else {
				sm.set(pending, StatusFailed)
			}
			pending = ""
		}
		return nil
	})
}

// parseJestV5 is v5's parse_log_jest: v4.1.0's with the name stripped.
func parseJestV5(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		for _, m := range [...]struct{ mark, status string }{{"✓", StatusPassed}, {"✕", StatusFailed}, {"○", StatusSkipped}} {
			if rest, ok := markThenRest(line, m.mark); ok {
				sm.set(pystr.Strip(trimDuration(rest)), m.status)
				break
			}
		}
		return nil
	})
}
