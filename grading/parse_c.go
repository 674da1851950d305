package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The parsers of upstream's log_parsers/c.py. Each applies re.match to
// line.strip() for every line of log.split("\n") unless said otherwise.

// parseRedis is upstream's parse_log_redis:
// ^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$ ; ok is PASSED,
// err FAILED with re.sub(r"\s+in\s+\S+$", "", name), skip and ignore
// SKIPPED. Matched by hand (trimDuration, stripInFile).
func parseRedis(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.HasPrefix(line, "[") {
			return nil
		}
		for _, m := range [...]struct{ tag, status string }{
			{"[ok]:", StatusPassed}, {"[err]:", StatusFailed}, {"[skip]:", StatusSkipped}, {"[ignore]:", StatusSkipped},
		} {
			rest, ok := markThenRest(line, m.tag)
			if !ok {
				continue
			}
			name := trimDuration(rest)
			if m.status == StatusFailed {
				name = stripInFile(name)
			}
			sm.set(name, m.status)
			break
		}
		return nil
	})
}

// stripInFile is re.sub(r"\s+in\s+\S+$", "", name): the last word, the
// whitespace before it, "in" and the whitespace before that go.
func stripInFile(name string) string {
	i := len(name)
	for i > 0 {
		if sp, n := pystr.SpaceBefore(name, i); sp {
			break
		} else {
			i -= n
		}
	}
	if i == len(name) || i == 0 {
		return name
	}
	j := i
	for j > 0 {
		sp, n := pystr.SpaceBefore(name, j)
		if !sp {
			break
		}
		j -= n
	}
	if j < 2 || name[j-2:j] != "in" {
		return name
	}
	k := j - 2
	for k > 0 {
		sp, n := pystr.SpaceBefore(name, k)
		if !sp {
			break
		}
		k -= n
	}
	if k == j-2 {
		return name
	}
	return name[:k]
}

// parseJq is upstream's parse_log_jq: ^\s*(PASS|FAIL):\s(.+)$ .
func parseJq(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line) // so \s* matches nothing
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
		if sp, n := pystr.SpaceAt(rest, 0); sp && len(rest) > n {
			sm.set(rest[n:], status)
		}
		return nil
	})
}

// parseMicropython is upstream's parse_log_micropython_test:
// ^(pass|FAIL|skip)\s+(.+)$ .
func parseMicropython(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
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
		if sp, _ := pystr.SpaceAt(rest, 0); !sp {
			return nil
		}
		if name := pystr.LStrip(rest); name != "" {
			sm.set(name, status)
		}
		return nil
	})
}

// parseGoogletest is upstream's parse_log_googletest:
// ^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$ on the stripped line. Matched by
// hand: the greedy .* picks the last "[" that works, the greedy name runs to
// the last whitespace character followed by "(" before the final ")".
// BenchmarkParseMultilingual/googletest/10MB: 170 ms of CPU with Go's
// regexp, 11 ms by hand.
func parseGoogletest(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.HasSuffix(line, ")") {
			return nil
		}
		for b := strings.LastIndexByte(line, '['); b >= 0; b = strings.LastIndexByte(line[:b], '[') {
			if name, status, ok := googletestAt(line, b+1); ok {
				sm.set(name, status)
				break
			}
		}
		return nil
	})
}

// googletestAt matches \s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$ at line[i:].
func googletestAt(line string, i int) (string, string, bool) {
	i = skipSpaces(line, i)
	var status string
	switch {
	case strings.HasPrefix(line[i:], "OK"):
		status, i = StatusPassed, i+2
	case strings.HasPrefix(line[i:], "FAILED"):
		status, i = StatusFailed, i+6
	default:
		return "", "", false
	}
	i = skipSpaces(line, i)
	if i >= len(line) || line[i] != ']' {
		return "", "", false
	}
	sp, n := pystr.SpaceAt(line, i+1)
	if !sp {
		return "", "", false
	}
	g := i + 1 + n
	// \s\( with the "(" before the final ")", as late as possible.
	for p := strings.LastIndexByte(line[:len(line)-1], '('); p >= g; p = strings.LastIndexByte(line[:p], '(') {
		if sp, n := pystr.SpaceBefore(line, p); sp && p-n >= g {
			return line[g : p-n], status, true
		}
	}
	return "", "", false
}
