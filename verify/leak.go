package verify

// The history leak check: an instance image's /testbed repository must hold
// nothing newer than base_commit (agents have read future fixes from the git
// history of published images). Upstream's setup_repo.sh deletes newer tags,
// expires the reflog and fails when `git log --all --since` finds a newer
// commit; this check looks again at the finished image, comparing committer
// (or tagger) timestamps with base_commit's as upstream does, over every
// commit reachable from a ref, HEAD or a reflog entry.
//
// The one newer commit upstream makes itself is allowed: setup_repo.sh ends
// with `git commit --allow-empty -am SWE-bench` as setup@swebench.config, on
// top of base_commit. Such a commit is exempt when it lies between
// base_commit and HEAD.
//
// The same dump also shows where the work tree sits (leak_checkout.go): HEAD
// must be base_commit itself or that setup commit (one parent, base_commit,
// and the same tree), and no tracked file may differ from HEAD before the
// patch is applied.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SetupCommitEmail is the author e-mail of upstream's own setup commit.
const SetupCommitEmail = "setup@swebench.config"

// LeakDump is the raw history listing the wrapper writes.
type LeakDump struct {
	// BaseTime is BASE's committer time, `git show -s --format=%ct
	// BASE^{commit}` ("" if BASE is missing).
	BaseTime string
	// Commits: `git log --all --reflog --format='%H %ct %ae'` lines.
	Commits string
	// Refs: `git for-each-ref --format='%(refname) %(objectname)
	// %(*objectname) %(creatordate:unix)'` lines.
	Refs string
	// Reflog: `git log -g --all --format='%H %gD'` lines.
	Reflog string
	// OnTop: `git rev-list BASE..HEAD` (commits between base and HEAD).
	OnTop string
	// Head: `git show -s --format='%H %T %P' HEAD` (commit, tree, parents).
	Head string
	// Base: `git show -s --format='%H %T' BASE^{commit}` (commit, tree).
	Base string
	// Status: `git status --porcelain` in the work tree, before the patch.
	Status string
	// Errors collects the commands' stderr.
	Errors string
}

// leakScript is the shell fragment (run in /testbed, $base and $out set)
// writing the LeakDump files.
func leakScript() string {
	return `git show -s --format='%H %T %ct' "$base^{commit}" >"$out/leak_basecommit" 2>>"$out/leak_err"
git log --all --reflog --format='%H %ct %ae' >"$out/leak_commits" 2>>"$out/leak_err"
git for-each-ref --format='%(refname) %(objectname) %(*objectname) %(creatordate:unix)' >"$out/leak_refs" 2>>"$out/leak_err"
git log -g --all --format='%H %gD' >"$out/leak_reflog" 2>>"$out/leak_err"
git rev-list "$base..HEAD" >"$out/leak_ontop" 2>>"$out/leak_err"
git show -s --format='%H %T %P' HEAD >"$out/leak_head" 2>>"$out/leak_err"
git status --porcelain >"$out/leak_status" 2>>"$out/leak_err"
`
}

func leakDumpFrom(files map[string]string) LeakDump {
	// One git call gives both base parts: "<commit> <tree> <committer
	// time>" (one process less matters under QEMU, ~0.1 s each).
	base, baseTime := files["leak_basecommit"], ""
	if f := strings.Fields(base); len(f) == 3 {
		base, baseTime = f[0]+" "+f[1]+"\n", f[2]+"\n"
	}
	return LeakDump{
		BaseTime: baseTime,
		Commits:  files["leak_commits"],
		Refs:     files["leak_refs"],
		Reflog:   files["leak_reflog"],
		OnTop:    files["leak_ontop"],
		Head:     files["leak_head"],
		Base:     base,
		Status:   files["leak_status"],
		Errors:   files["leak_err"],
	}
}

// LeakReport is the result of CheckLeak.
type LeakReport struct {
	// Commits newer than base_commit (hash), not counting the setup commit.
	Commits []string `json:"commits,omitempty"`
	// Refs (tags, branches) pointing at such a commit or created after
	// base_commit, e.g. "refs/tags/v1.1.0".
	Refs []string `json:"refs,omitempty"`
	// Reflog entries naming such a commit, e.g. "HEAD@{1}".
	Reflog []string `json:"reflog,omitempty"`
	// Checkout is where /testbed's work tree sits before the patch.
	Checkout *Checkout `json:"checkout,omitempty"`
}

// Leaked reports whether the image's repository fails the check: anything
// newer than base_commit was found, or the work tree is not at
// base_commit (Checkout). Both are the FailureLeak class.
func (l *LeakReport) Leaked() bool {
	return l != nil && (l.historyLeaked() || (l.Checkout != nil && !l.Checkout.AtBase))
}

func (l *LeakReport) historyLeaked() bool {
	return len(l.Commits) > 0 || len(l.Refs) > 0 || len(l.Reflog) > 0
}

// AtBase reports whether the work tree was found at base_commit: HEAD is
// base_commit or the setup commit on it, and no tracked file is changed.
func (l *LeakReport) AtBase() bool {
	return l != nil && l.Checkout != nil && l.Checkout.AtBase
}

// String summarizes the findings in one line.
func (l *LeakReport) String() string {
	if !l.Leaked() {
		return "no history newer than base_commit; work tree at base_commit"
	}
	var out []string
	if l.historyLeaked() {
		out = append(out, "history newer than base_commit: "+l.historyString())
	}
	if l.Checkout != nil && !l.Checkout.AtBase {
		out = append(out, l.Checkout.String())
	}
	return strings.Join(out, "; ")
}

func (l *LeakReport) historyString() string {
	var parts []string
	if n := len(l.Commits); n > 0 {
		parts = append(parts, fmt.Sprintf("%d newer commit(s) (%s)", n, short(l.Commits)))
	}
	if n := len(l.Refs); n > 0 {
		parts = append(parts, fmt.Sprintf("%d ref(s) (%s)", n, strings.Join(l.Refs, ", ")))
	}
	if n := len(l.Reflog); n > 0 {
		parts = append(parts, fmt.Sprintf("%d reflog entr(ies) (%s)", n, strings.Join(l.Reflog, ", ")))
	}
	return strings.Join(parts, "; ")
}

func short(hashes []string) string {
	var s []string
	for i, h := range hashes {
		if i == 3 {
			s = append(s, "...")
			break
		}
		if len(h) > 12 {
			h = h[:12]
		}
		s = append(s, h)
	}
	return strings.Join(s, ", ")
}

// CheckLeak reads a LeakDump. The error says the dump cannot be judged (the
// base commit is not in the repository, or a line is malformed).
func CheckLeak(d LeakDump) (*LeakReport, error) {
	baseTS, err := strconv.ParseInt(strings.TrimSpace(d.BaseTime), 10, 64)
	if err != nil {
		msg := strings.TrimSpace(d.Errors)
		if msg == "" {
			msg = fmt.Sprintf("timestamp %q", strings.TrimSpace(d.BaseTime))
		}
		return nil, fmt.Errorf("leak check: reading base_commit's time: %s", msg)
	}
	onTop := map[string]bool{}
	for _, h := range strings.Fields(d.OnTop) {
		onTop[h] = true
	}
	rep := &LeakReport{}
	newer := map[string]bool{}
	exempt := map[string]bool{}
	for i, line := range lines(d.Commits) {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("leak check: commit listing line %d %q: want hash, time, e-mail", i+1, line)
		}
		ts, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("leak check: commit listing line %d %q: time: %w", i+1, line, err)
		}
		if ts <= baseTS || newer[f[0]] || exempt[f[0]] {
			continue
		}
		if onTop[f[0]] && len(f) == 3 && f[2] == SetupCommitEmail {
			exempt[f[0]] = true
			continue
		}
		newer[f[0]] = true
		rep.Commits = append(rep.Commits, f[0])
	}
	for i, line := range lines(d.Refs) {
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("leak check: ref listing line %d %q: want name, object, [peeled], time", i+1, line)
		}
		name, obj, peeled, tsText := f[0], f[1], "", f[len(f)-1]
		if len(f) == 4 {
			peeled = f[2]
		}
		target := obj
		if peeled != "" {
			target = peeled
		}
		ts, err := strconv.ParseInt(tsText, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("leak check: ref listing line %d %q: time: %w", i+1, line, err)
		}
		if newer[target] || (ts > baseTS && !exempt[target]) {
			rep.Refs = append(rep.Refs, name)
		}
	}
	for _, line := range lines(d.Reflog) {
		h, sel, _ := strings.Cut(line, " ")
		if newer[h] {
			rep.Reflog = append(rep.Reflog, sel)
		}
	}
	sort.Strings(rep.Refs)
	if rep.Checkout, err = checkCheckout(d); err != nil {
		return nil, err
	}
	return rep, nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
