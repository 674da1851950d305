// Package grading grades SWE-bench evaluation logs the way upstream SWE-bench
// v4.1.0 does: the log parsers, get_logs_eval, get_eval_report and
// report.json. Everything here is a pure function of its inputs; running a
// patch in a container is package verify's job, which calls this one.
package grading

import (
	"errors"
	"fmt"
)

// Test statuses, upstream's TestStatus enum values.
const (
	StatusFailed  = "FAILED"
	StatusPassed  = "PASSED"
	StatusSkipped = "SKIPPED"
	StatusError   = "ERROR"
	StatusXFail   = "XFAIL"
)

// ErrNoParser is returned (wrapped) for a repository that upstream v4.1.0's
// MAP_REPO_TO_PARSER has no Python log parser for. Upstream raises KeyError.
var ErrNoParser = errors.New("no log parser for repository")

// ErrUpstreamParserRaises is returned (wrapped) when the log holds a line on
// which upstream's Python parser raises an exception (an IndexError from
// line.split()[1]); upstream then fails the instance without a report.
var ErrUpstreamParserRaises = errors.New("upstream log parser raises an exception on this log")

// StatusMap is a parsed test-status map, test name to status. Like the Python
// dict upstream builds it keeps first-insertion order (a later assignment to
// an existing test changes the status, not the position).
type StatusMap struct {
	keys []string
	m    map[string]string
}

// NewStatusMap returns an empty map.
func NewStatusMap() *StatusMap {
	return &StatusMap{m: make(map[string]string)}
}

func (s *StatusMap) set(test, status string) {
	if _, ok := s.m[test]; !ok {
		s.keys = append(s.keys, test)
	}
	s.m[test] = status
}

// Len is the number of tests in the map.
func (s *StatusMap) Len() int { return len(s.keys) }

// Get returns the status of test and whether the map has it.
func (s *StatusMap) Get(test string) (string, bool) {
	st, ok := s.m[test]
	return st, ok
}

// Keys returns the tests in insertion order. The slice must not be modified.
func (s *StatusMap) Keys() []string { return s.keys }

// Map returns a copy of the map as a plain Go map.
func (s *StatusMap) Map() map[string]string {
	out := make(map[string]string, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// JSON renders the map as Python's json.dumps(status_map, indent=4) would:
// insertion order, ASCII-only escapes.
func (s *StatusMap) JSON() []byte {
	w := pyJSONWriter{}
	if len(s.keys) == 0 {
		w.raw("{}")
		return w.buf
	}
	w.raw("{")
	for i, k := range s.keys {
		if i > 0 {
			w.raw(",")
		}
		w.newline(1)
		w.str(k)
		w.raw(": ")
		w.str(s.m[k])
	}
	w.newline(0)
	w.raw("}")
	return w.buf
}

// parseFunc fills sm from log (already newline-normalized).
type parseFunc func(log string, sm *StatusMap) error

// ParserName returns the name of the upstream v4.1.0 function that parses
// logs of repo (the __name__ of MAP_REPO_TO_PARSER[repo], e.g.
// "parse_log_pytest_v2" for astropy/astropy), and whether there is one among
// the 18 Python repositories.
func ParserName(repo string) (string, bool) {
	name, _ := parserFor(repo)
	return name, name != ""
}

// parserFor is upstream's MAP_REPO_TO_PARSER_PY (log_parsers/python.py).
func parserFor(repo string) (string, parseFunc) {
	switch repo {
	case "marshmallow-code/marshmallow", "pallets/flask", "pvlib/pvlib-python",
		"pydata/xarray", "pylint-dev/astroid", "pytest-dev/pytest",
		"pyvista/pyvista", "sqlfluff/sqlfluff":
		return "parse_log_pytest", parsePytest
	case "psf/requests", "pydicom/pydicom", "pylint-dev/pylint":
		return "parse_log_pytest_options", parsePytestOptions
	case "astropy/astropy", "scikit-learn/scikit-learn", "sphinx-doc/sphinx":
		return "parse_log_pytest_v2", parsePytestV2
	case "django/django":
		return "parse_log_django", parseDjango
	case "matplotlib/matplotlib":
		return "parse_log_matplotlib", parseMatplotlib
	case "mwaskom/seaborn":
		return "parse_log_seaborn", parseSeaborn
	case "sympy/sympy":
		return "parse_log_sympy", parseSympy
	}
	return "", nil
}

// parserByName returns the upstream parser function called name (as
// ParserName reports them), or nil.
func parserByName(name string) (string, parseFunc) {
	for _, repo := range [...]string{"pytest-dev/pytest", "psf/requests", "sphinx-doc/sphinx",
		"django/django", "matplotlib/matplotlib", "mwaskom/seaborn", "sympy/sympy"} {
		if n, fn := parserFor(repo); n == name {
			return n, fn
		}
	}
	return "", nil
}

// parserFuncNames lists the names parserByName accepts.
func parserFuncNames() []string {
	return []string{"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2",
		"parse_log_django", "parse_log_matplotlib", "parse_log_seaborn", "parse_log_sympy"}
}

// ParseLog runs upstream's parser for repo over log (universal newlines are
// applied first, as Python's open().read() does) and returns the status map.
func ParseLog(repo string, log string) (map[string]string, error) {
	sm, err := ParseLogOrdered(repo, log)
	if err != nil {
		return nil, err
	}
	return sm.m, nil
}

// ParseLogOrdered is ParseLog keeping upstream's insertion order.
func ParseLogOrdered(repo string, log string) (*StatusMap, error) {
	_, fn := parserFor(repo)
	if fn == nil {
		return nil, fmt.Errorf("parsing log of %q: %w", repo, ErrNoParser)
	}
	sm := NewStatusMap()
	if err := fn(NormalizeNewlines(log), sm); err != nil {
		return nil, fmt.Errorf("parsing log of %q: %w", repo, err)
	}
	return sm, nil
}

// raisesAt builds the error for a line on which upstream's parser raises.
func raisesAt(parser string, lineNo int, line string, what string) error {
	if len(line) > 80 {
		line = line[:80] + "..."
	}
	return fmt.Errorf("%s: line %d %q: %s: %w", parser, lineNo, line, what, ErrUpstreamParserRaises)
}
