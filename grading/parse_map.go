// Package grading grades SWE-bench evaluation logs the way upstream SWE-bench
// v5.0.2 (RulesV5) or v4.1.0 (RulesV41) does: the log parsers,
// get_logs_eval, get_eval_report, v5's infra classification and
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
// MAP_REPO_TO_PARSER has no log parser for. Upstream raises KeyError.
var ErrNoParser = errors.New("no log parser for repository")

// ErrUnknownParser is returned (wrapped) for a parser name that is not one
// of upstream v4.1.0's parser functions.
var ErrUnknownParser = errors.New("not an upstream log parser")

// ErrUpstreamParserRaises is returned (wrapped) when upstream's parser
// raises an exception on the log (an IndexError from line.split()[1], an
// XML ParseError, a ValueError for an instance id a dispatcher does not
// know, ...); upstream then fails the instance without a report.
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

// ParseLog runs upstream's parser for repo over log (universal newlines are
// applied first, as Python's open().read() does) and returns the status map
// in upstream's insertion order. instanceID is upstream's
// test_spec.instance_id, which the dispatching parsers (parse_log_jekyll,
// parse_log_immutable_js) choose their sub-parser by.
func ParseLog(repo, instanceID, log string) (*StatusMap, error) {
	p, ok := parserForRepo(repo)
	if !ok {
		return nil, fmt.Errorf("parsing log of %q: %w", repo, ErrNoParser)
	}
	return runParser(p, instanceID, log)
}

// ParseLogWith is ParseLog with the parser named by its upstream function
// name (see ParserNames) instead of the repository's.
func ParseLogWith(parser, instanceID, log string) (*StatusMap, error) {
	p, ok := parserNamed(parser)
	if !ok {
		return nil, fmt.Errorf("parsing log: %w: %q", ErrUnknownParser, parser)
	}
	return runParser(p, instanceID, log)
}

func runParser(p parserDef, instanceID, log string) (*StatusMap, error) {
	name, parse, err := p.resolve(instanceID)
	if err != nil {
		return nil, fmt.Errorf("parsing log: %w", err)
	}
	sm := NewStatusMap()
	if err := parse(NormalizeNewlines(log), sm); err != nil {
		return nil, fmt.Errorf("parsing log with %s: %w", name, err)
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
