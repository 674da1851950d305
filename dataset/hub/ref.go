package hub

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Ref names a split of a dataset on the hub as swebuild's --dataset takes
// it: NAME[@REVISION][:SPLIT], e.g. "SWE-bench/SWE-bench_Verified",
// "princeton-nlp/SWE-bench_Lite:dev",
// "SWE-bench/SWE-bench_Lite@6ec7bb89b9342f664a54a6e0a6ea6501d3437cc2:test".
// Its String form with a commit as revision is what the build metadata and
// the publish ledger record (core.Image.Dataset).
type Ref struct {
	Name     string // owner/name
	Revision string // branch, tag or commit; "" is the default branch
	Split    string // "" is DefaultSplit
}

// DefaultSplit is the split upstream SWE-bench loads when none is named.
const DefaultSplit = "test"

// DefaultRevision is the branch read when no revision is named.
const DefaultRevision = "main"

func (r Ref) String() string {
	s := r.Name
	if r.Revision != "" {
		s += "@" + r.Revision
	}
	if r.Split != "" {
		s += ":" + r.Split
	}
	return s
}

// aliases are upstream SWE-bench v4.1.0's short dataset names
// (swebench/harness/utils.py, load_swebench_dataset), matched without case.
var aliases = map[string]string{
	"swe-bench": "SWE-bench/SWE-bench", "swebench": "SWE-bench/SWE-bench", "swe_bench": "SWE-bench/SWE-bench",
	"swe-bench-lite": "SWE-bench/SWE-bench_Lite", "swebench-lite": "SWE-bench/SWE-bench_Lite",
	"swe_bench_lite": "SWE-bench/SWE-bench_Lite", "swe-bench_lite": "SWE-bench/SWE-bench_Lite",
	"lite": "SWE-bench/SWE-bench_Lite",
}

var (
	// repoPart is one part of a repo id as huggingface_hub's
	// validate_repo_id accepts it: [\w.-]{1,96}, starting and ending with a
	// word character, no "--" or ".." (the length is checked apart: a
	// counted repetition {0,94} compiles into 94 copies, ~10 ms of every
	// swebuild process's start-up, measured with GODEBUG=inittrace=1).
	repoPart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$`) })
	// splitName is datasets' _split_re.
	splitName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\w+(?:\.\w+)*$`) })
	// revisionName is a branch, tag or commit: git ref-name characters
	// without the ones a URL or a file name would need escaped for; at
	// most 255 bytes (checked apart, as repoPart's length).
	revisionName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./+-]*$`) })
)

// ParseRef reads NAME[@REVISION][:SPLIT]. NAME is "owner/name" or one of
// upstream's aliases ("lite", "swe-bench", ...).
func ParseRef(s string) (Ref, error) {
	var r Ref
	rest := s
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		r.Split = rest[i+1:]
		rest = rest[:i]
		if !splitName().MatchString(r.Split) {
			return Ref{}, fmt.Errorf("dataset %q: split %q is not a split name (letters, digits, '_', parts joined by '.')", s, r.Split)
		}
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		r.Revision = rest[i+1:]
		rest = rest[:i]
		if len(r.Revision) > 255 || !revisionName().MatchString(r.Revision) || strings.Contains(r.Revision, "..") {
			return Ref{}, fmt.Errorf("dataset %q: %q is not a revision (a branch, tag or commit)", s, r.Revision)
		}
	}
	if full, ok := aliases[strings.ToLower(rest)]; ok {
		rest = full
	}
	owner, name, ok := strings.Cut(rest, "/")
	if !ok || !validPart(owner) || !validPart(name) {
		return Ref{}, fmt.Errorf("dataset %q: %q is not a dataset name of the form owner/name (letters, digits, '_', '-', '.'; at most 96 each)", s, rest)
	}
	r.Name = rest
	return r, nil
}

func validPart(s string) bool {
	return len(s) <= 96 && repoPart().MatchString(s) && !strings.Contains(s, "--") && !strings.Contains(s, "..")
}

// isCommit reports whether rev is a full commit id, which names content
// that never changes.
func isCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for i := 0; i < len(rev); i++ {
		c := rev[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
