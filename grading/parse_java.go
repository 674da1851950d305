package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The parsers of upstream's log_parsers/java.py; each matches patterns with
// re.match against line.strip() for every line of log.split("\n").

// parseMaven is upstream's parse_log_maven. Maven prints no passing tests,
// so upstream runs each test alone under set -x: a line matching
// ^.*-Dtest=(\S+).*$ names the current test (the last "-Dtest=" of the line
// followed by a non-space), and a line ending in "BUILD SUCCESS" or
// "BUILD FAILURE" gives it PASSED or FAILED. Before any name the test is
// called "---NO TEST NAME FOUND YET---".
func parseMaven(log string, sm *StatusMap) error {
	re := pyRegexp(`^.*-Dtest=(` + reNotS + `+).*$`)
	current := "---NO TEST NAME FOUND YET---"
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if strings.Contains(line, "-Dtest=") {
			if m := re.FindStringSubmatch(line); m != nil {
				current = m[1]
			}
		}
		switch {
		case strings.HasSuffix(line, "BUILD SUCCESS"):
			sm.set(current, StatusPassed)
		case strings.HasSuffix(line, "BUILD FAILURE"):
			sm.set(current, StatusFailed)
		}
		return nil
	})
}

// parseAnt is upstream's parse_log_ant:
// ^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$ ; PASS is PASSED, FAIL and
// ERR FAILED.
func parseAnt(log string, sm *StatusMap) error {
	re := pyRegexp(`^` + reS + `*\[junit\]` + reS + `+\[(PASS|FAIL|ERR)\]` + reS + `+(.*)$`)
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.HasPrefix(line, "[junit]") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[1] == "PASS" {
			sm.set(m[2], StatusPassed)
		} else {
			sm.set(m[2], StatusFailed)
		}
		return nil
	})
}

// parseGradleCustom is upstream's parse_log_gradle_custom:
// ^([^>].+)\s+(PASSED|FAILED)$ ; the name is everything before the last
// whitespace character preceding the status (so it may end in spaces).
func parseGradleCustom(log string, sm *StatusMap) error {
	re := pyRegexp(`^([^>].+)` + reS + `+(PASSED|FAILED)$`)
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.HasSuffix(line, "PASSED") && !strings.HasSuffix(line, "FAILED") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[2] == "PASSED" {
			sm.set(m[1], StatusPassed)
		} else {
			sm.set(m[1], StatusFailed)
		}
		return nil
	})
}
