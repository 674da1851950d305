package grading

import (
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// parseDjango is upstream's parse_log_django: a per-line pass over stripped
// lines, then three multi-line patterns searched over the whole text (done
// here without regexps, see djangoMultiline). Lines "FAIL:" / "ERROR:" with
// no second field make it return ErrUpstreamParserRaises, where upstream's
// line.split()[1] raises IndexError.
func parseDjango(log string, sm *StatusMap) error {
	passSuffixes := [...]string{" ... ok", " ... OK", " ...  OK"} // upstream's order
	var prevTest string
	havePrev := false
	it := lineIter{s: log}
	lineNo := 0
	for raw, ok := it.next(); ok; raw, ok = it.next() {
		lineNo++
		line := pystr.Strip(raw)
		if line == "" {
			continue // no check below can fire on an empty line
		}

		if strings.Contains(line, "--version is equivalent to version") {
			sm.set("--version is equivalent to version", StatusPassed)
		}
		if i := strings.Index(line, " ... "); i >= 0 {
			prevTest = line[:i]
			havePrev = true
		}
		for _, suffix := range passSuffixes {
			if !strings.HasSuffix(line, suffix) {
				continue
			}
			// Upstream's "temporary, exclusive fix for django__django-7188";
			// the shortened line is what the checks below see.
			if strings.HasPrefix(line, "Applying sites.0002_alter_domain_unique...test_no_migrations") {
				k := strings.Index(line, "...")
				line = pystr.Strip(line[k+3:])
			}
			test := line
			if k := strings.LastIndex(line, suffix); k >= 0 {
				test = line[:k]
			}
			sm.set(test, StatusPassed)
			break
		}
		if i := strings.Index(line, " ... skipped"); i >= 0 {
			sm.set(line[:i], StatusSkipped)
		}
		if strings.HasSuffix(line, " ... FAIL") {
			sm.set(line[:strings.Index(line, " ... FAIL")], StatusFailed)
		}
		if strings.HasPrefix(line, "FAIL:") {
			_, f1, n := pySplit2(line)
			if n < 2 {
				return raisesAt("parse_log_django", lineNo, line, "line.split()[1] raises IndexError")
			}
			sm.set(f1, StatusFailed)
		}
		if strings.HasSuffix(line, " ... ERROR") {
			sm.set(line[:strings.Index(line, " ... ERROR")], StatusError)
		}
		if strings.HasPrefix(line, "ERROR:") {
			_, f1, n := pySplit2(line)
			if n < 2 {
				return raisesAt("parse_log_django", lineNo, line, "line.split()[1] raises IndexError")
			}
			sm.set(f1, StatusError)
		}
		if havePrev && strings.HasPrefix(pystr.LStrip(line), "ok") {
			sm.set(prevTest, StatusPassed)
		}
	}
	djangoMultiline(log, sm)
	return nil
}

// The three patterns upstream applies with re.finditer(pattern, log,
// re.MULTILINE) after the line pass, in this order; every match marks
// group 1 PASSED:
//
//  1. ^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$
//  2. ^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$
//  3. ^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$
//
// Each is "a line start, a lazy group 1 without newlines, \s...\s, a literal
// head, a tail". \s may be a newline, so the head may start on a later line
// than group 1. Every match has a head literal at its centre, so the scan
// finds head literals with strings.Index and, for each, checks the
// "\s...\s" before it and the tail after it. Walking heads in order visits
// the (line start, group-1 end) candidates in the order the regexp engine
// tries them; a match resumes the search after its end, like finditer.
const (
	djangoHeadInstalled = "Testing against Django installed in "
	djangoHeadISE       = "Internal Server Error: /"
	djangoHeadNoIssues  = "System check identified no issues (0 silenced)"
	djangoEndInstalled  = " silenced).\nok"
)

func djangoMultiline(log string, sm *StatusMap) {
	// Cheap exit: every pattern needs "..." and a "\nok" line.
	if !strings.Contains(log, "\nok") {
		return
	}
	djangoScan(log, djangoHeadInstalled, sm, func(h int) int {
		// ((?s:.*?))\ silenced\)\.\nok$ : the first " silenced).\nok" at or
		// after h that ends a line.
		from := h
		for {
			k := strings.Index(log[from:], djangoEndInstalled)
			if k < 0 {
				return -1
			}
			end := from + k + len(djangoEndInstalled)
			if end == len(log) || log[end] == '\n' {
				return end
			}
			from += k + 1
		}
	})
	djangoScan(log, djangoHeadISE, sm, func(h int) int {
		// (.*)\/\nok$ : the head's line ends with "/" (at or after h), the
		// next line is exactly "ok".
		le := strings.IndexByte(log[h:], '\n')
		if le < 0 {
			return 0
		}
		le += h
		if le-1 < h || log[le-1] != '/' {
			return 0
		}
		return okLineEnd(log, le)
	})
	djangoScan(log, djangoHeadNoIssues, sm, func(h int) int {
		// \nok$ right after the head.
		return okLineEnd(log, h)
	})
}

// okLineEnd: if log[i:] starts with "\nok" followed by "\n" or the end, the
// index after "ok"; otherwise 0.
func okLineEnd(log string, i int) int {
	if !strings.HasPrefix(log[i:], "\nok") {
		return 0
	}
	end := i + 3
	if end == len(log) || log[end] == '\n' {
		return end
	}
	return 0
}

// djangoScan runs one pattern. tail(h) gets the index just after the head
// literal and returns the match end (> 0), 0 for "no match here", or -1 for
// "no match here nor anywhere later".
func djangoScan(log, head string, sm *StatusMap, tail func(h int) int) {
	pos := 0 // finditer resumes here
	off := 0
	for {
		k := strings.Index(log[off:], head)
		if k < 0 {
			return
		}
		t := off + k
		off = t + 1
		e, ok := dotsBefore(log, t)
		if !ok {
			continue
		}
		p := strings.LastIndexByte(log[:e], '\n') + 1 // ^ of group 1's line
		if p < pos {
			continue
		}
		end := tail(t + len(head))
		if end < 0 {
			return
		}
		if end == 0 {
			continue
		}
		sm.set(log[p:e], StatusPassed)
		pos = end
		if off < end {
			off = end
		}
	}
}

// dotsBefore checks that log[:t] ends with \s + "..." + \s (each \s one
// Python whitespace character, newline included) and returns where the
// first \s starts (the end of group 1).
func dotsBefore(log string, t int) (int, bool) {
	sp, n := pystr.SpaceBefore(log, t)
	if !sp {
		return 0, false
	}
	t -= n
	if t < 3 || log[t-3:t] != "..." {
		return 0, false
	}
	t -= 3
	sp, n = pystr.SpaceBefore(log, t)
	if !sp {
		return 0, false
	}
	return t - n, true
}
