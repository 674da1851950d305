package grading

import "strings"

// parseGotest is upstream's parse_log_gotest (go.py): re.match of
// ^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$ on each stripped line, so indented
// subtest lines count with their full "Parent/sub" name.
func parseGotest(log string, sm *StatusMap) error {
	re := pyRegexp(`^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !strings.HasPrefix(line, "--- ") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		switch m[1] {
		case "PASS":
			sm.set(m[2], StatusPassed)
		case "FAIL":
			sm.set(m[2], StatusFailed)
		default:
			sm.set(m[2], StatusSkipped)
		}
		return nil
	})
}
