package grading

import (
	"strings"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// parsePHPUnit is upstream's parse_log_phpunit (php.py, PHPUnit --testdox).
// Lines are not stripped. A line matching ^(\w.+) \(.+\)$ starts a suite
// named by group 1 ("Money (Calc\Tests\Unit\Money)" gives "Money"); a line
// matching ^\s*([✔✘↩])\s*(.*)$ is a test "<suite> > <name>" (suite "None"
// before any suite line): ✔ PASSED, ✘ FAILED, ↩ SKIPPED.
func parsePHPUnit(log string, sm *StatusMap) error {
	suite := "None"
	return forEachLine(log, func(line string) error {
		if s, ok := phpunitSuite(line); ok {
			suite = s
			return nil
		}
		rest := pystr.LStrip(line)
		var status string
		switch {
		case strings.HasPrefix(rest, "✔"):
			status = StatusPassed
		case strings.HasPrefix(rest, "✘"):
			status = StatusFailed
		case strings.HasPrefix(rest, "↩"):
			status = StatusSkipped
		default:
			return nil
		}
		// All three marks are three bytes long in UTF-8.
		sm.set(suite+" > "+pystr.LStrip(rest[3:]), status)
		return nil
	})
}

// phpunitSuite matches ^(\w.+) \(.+\)$ : the line ends in ")" and group 1
// (greedy) runs up to the last " (" that leaves at least one character
// before that ")", and is at least two characters long, the first a word
// character.
func phpunitSuite(line string) (string, bool) {
	r, n := utf8.DecodeRuneInString(line)
	if !isPyWord(r) || !strings.HasSuffix(line, ")") {
		return "", false
	}
	body := line[:len(line)-1]
	for k := strings.LastIndex(body, " ("); k > n; k = strings.LastIndex(body[:k], " (") {
		if k+2 < len(body) {
			return line[:k], true
		}
	}
	return "", false
}
