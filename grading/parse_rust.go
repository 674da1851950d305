package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// parseCargo is upstream's parse_log_cargo (rust.py): re.match of
// ^test\s+(\S+)\s+\.\.\.\s+(\w+)$ on the stripped line; outcome "ok" is
// PASSED, "FAILED" FAILED, anything else is not recorded. Lines such as
// "test x - should panic ... ok", doc-tests and "... ignored" give nothing.
// Since only "ok" and "FAILED" are recorded, (\w+)$ is written
// (ok|FAILED)$: \s+ before it takes the whole whitespace run, so either
// form matches exactly when the last word is one of the two.
func parseCargo(log string, sm *StatusMap) error {
	re := pyRegexp(`^test` + reS + `+(` + reNotS + `+)` + reS + `+\.\.\.` + reS + `+(ok|FAILED)$`)
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.HasPrefix(line, "test") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[2] == "ok" {
			sm.set(m[1], StatusPassed)
		} else {
			sm.set(m[1], StatusFailed)
		}
		return nil
	})
}
