package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// parseSympy is upstream's parse_log_sympy.
//
// First upstream runs re.findall(r"(_*) (.*)\.py:(.*) (_*)", log) and marks
// group2 + ".py:" + group3 FAILED. No part of the pattern matches a newline,
// so every match lies within one line, and working the backtracking through
// gives at most one match per line: with s0 the first and ls the last space
// of the line, there is a match iff line[s0+1:ls] contains ".py:", and then
// the test name is exactly line[s0+1:ls]. The scan below finds lines holding
// ".py:" with strings.Index rather than looking at every line.
//
// Then each stripped line starting with "test_" and ending with " E", " F"
// or " ok" marks split()[0] ERROR, FAILED or PASSED.
func parseSympy(log string, sm *StatusMap) error {
	off := 0
	for {
		k := strings.Index(log[off:], ".py:")
		if k < 0 {
			break
		}
		k += off
		start := strings.LastIndexByte(log[:k], '\n') + 1
		end := strings.IndexByte(log[k:], '\n')
		if end < 0 {
			end = len(log)
		} else {
			end += k
		}
		line := log[start:end]
		s0 := strings.IndexByte(line, ' ')
		ls := strings.LastIndexByte(line, ' ')
		if s0 >= 0 && ls > s0 && strings.Contains(line[s0+1:ls], ".py:") {
			sm.set(line[s0+1:ls], StatusFailed)
		}
		off = end
	}

	it := lineIter{s: log}
	for raw, ok := it.next(); ok; raw, ok = it.next() {
		line := pystr.Strip(raw)
		if !strings.HasPrefix(line, "test_") {
			continue
		}
		var status string
		switch {
		case strings.HasSuffix(line, " E"):
			status = StatusError
		case strings.HasSuffix(line, " F"):
			status = StatusFailed
		case strings.HasSuffix(line, " ok"):
			status = StatusPassed
		default:
			continue
		}
		f0, _, _ := pySplit2(line)
		sm.set(f0, status)
	}
	return nil
}
