package grading

import (
	"strings"
)

// The parsers of upstream's log_parsers/c.py. Each applies re.match to
// line.strip() for every line of log.split("\n") unless said otherwise.

// parseRedis is upstream's parse_log_redis:
// ^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$ ; ok is PASSED,
// err FAILED with re.sub(r"\s+in\s+\S+$", "", name), skip and ignore
// SKIPPED.
func parseRedis(log string, sm *StatusMap) error {
	re := pyRegexp(`^\[(ok|err|skip|ignore)\]:` + reS + `(.+?)(?:` + reS + `\((` + reD + `+` + reS + `*m?s)\))?$`)
	inFile := pyRegexp(reS + `+in` + reS + `+` + reNotS + `+$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !strings.HasPrefix(line, "[") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		switch m[1] {
		case "ok":
			sm.set(m[2], StatusPassed)
		case "err":
			sm.set(inFile.ReplaceAllLiteralString(m[2], ""), StatusFailed)
		default: // skip, ignore
			sm.set(m[2], StatusSkipped)
		}
		return nil
	})
}

// parseJq is upstream's parse_log_jq: ^\s*(PASS|FAIL):\s(.+)$ .
func parseJq(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pyStrip(line) // so \s* matches nothing
		var status string
		switch {
		case strings.HasPrefix(line, "PASS:"):
			status = StatusPassed
		case strings.HasPrefix(line, "FAIL:"):
			status = StatusFailed
		default:
			return nil
		}
		rest := line[len("PASS:"):]
		if rest == "" {
			return nil
		}
		if sp, n := spaceAt(rest, 0); sp && len(rest) > n {
			sm.set(rest[n:], status)
		}
		return nil
	})
}

// parseMicropython is upstream's parse_log_micropython_test:
// ^(pass|FAIL|skip)\s+(.+)$ .
func parseMicropython(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		var status string
		switch {
		case strings.HasPrefix(line, "pass"):
			status = StatusPassed
		case strings.HasPrefix(line, "FAIL"):
			status = StatusFailed
		case strings.HasPrefix(line, "skip"):
			status = StatusSkipped
		default:
			return nil
		}
		rest := line[4:]
		if rest == "" {
			return nil
		}
		// \s+ takes the whole run of whitespace: the stripped line does not
		// end in whitespace, so (.+) always gets what follows.
		if sp, _ := spaceAt(rest, 0); !sp {
			return nil
		}
		if name := pyLStrip(rest); name != "" {
			sm.set(name, status)
		}
		return nil
	})
}

// parseGoogletest is upstream's parse_log_googletest:
// ^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$ .
func parseGoogletest(log string, sm *StatusMap) error {
	re := pyRegexp(`^.*\[` + reS + `*(OK|FAILED)` + reS + `*\]` + reS + `(.*)` + reS + `\(.*\)$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !strings.HasSuffix(line, ")") || !strings.Contains(line, "]") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[1] == "OK" {
			sm.set(m[2], StatusPassed)
		} else {
			sm.set(m[2], StatusFailed)
		}
		return nil
	})
}
