package verify

// The checkout half of the leak check: inside each image the repository must
// sit at its base commit. Upstream's setup_repo.sh resets /testbed to
// base_commit and ends with `git commit --allow-empty -am SWE-bench`, so in a
// correct image HEAD is either base_commit itself (profiles with no setup
// commit) or one commit whose only parent is base_commit and whose tree is
// base_commit's tree. Before the patch is applied no tracked file may differ
// from HEAD (`git status --porcelain`).
//
// Untracked files ("??" lines) are listed but do not fail the check: the
// install step upstream runs before its commit leaves build output such as
// *.egg-info behind, and `git commit -a` does not take untracked files, so
// correct upstream images have them too.

import (
	"fmt"
	"strings"
)

// Checkout is where the work tree of /testbed sits before the patch.
type Checkout struct {
	// AtBase: HEAD is base_commit or the setup commit on it, and no tracked
	// file is changed.
	AtBase bool `json:"at_base"`
	// Base is base_commit's full hash, Head HEAD's, HeadParents HEAD's
	// parents.
	Base        string   `json:"base"`
	Head        string   `json:"head"`
	HeadParents []string `json:"head_parents,omitempty"`
	// SetupCommit: HEAD is a commit on base_commit with base_commit's tree.
	SetupCommit bool `json:"setup_commit,omitempty"`
	// Dirty are `git status --porcelain` lines of changed tracked files,
	// e.g. " M calc/ops.py"; Untracked the "??" lines' paths.
	Dirty     []string `json:"dirty,omitempty"`
	Untracked []string `json:"untracked,omitempty"`
	// Problem says why the checkout is not at base_commit ("" when it is).
	Problem string `json:"problem,omitempty"`
}

// String summarizes the checkout in one line.
func (c *Checkout) String() string {
	if c == nil {
		return "checkout not examined"
	}
	if c.AtBase {
		if c.SetupCommit {
			return fmt.Sprintf("work tree at base_commit %s (HEAD %s is the setup commit on it)", short([]string{c.Base}), short([]string{c.Head}))
		}
		return fmt.Sprintf("work tree at base_commit %s", short([]string{c.Base}))
	}
	return "wrong checkout: " + c.Problem
}

// checkCheckout reads the Head, Base and Status parts of a dump. The error
// says they cannot be judged (missing or malformed).
func checkCheckout(d LeakDump) (*Checkout, error) {
	errText := func() string {
		if e := strings.TrimSpace(d.Errors); e != "" {
			return ": " + e
		}
		return ""
	}
	head := strings.Fields(d.Head)
	if len(head) < 2 {
		return nil, fmt.Errorf("checkout check: reading HEAD: got %q, want commit, tree and parents%s", strings.TrimSpace(d.Head), errText())
	}
	base := strings.Fields(d.Base)
	if len(base) != 2 {
		return nil, fmt.Errorf("checkout check: reading base_commit: got %q, want commit and tree%s", strings.TrimSpace(d.Base), errText())
	}
	c := &Checkout{Base: base[0], Head: head[0], HeadParents: head[2:]}
	for _, l := range strings.Split(d.Status, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if p, ok := strings.CutPrefix(l, "?? "); ok {
			c.Untracked = append(c.Untracked, p)
			continue
		}
		c.Dirty = append(c.Dirty, l)
	}
	headTree, baseTree := head[1], base[1]
	var problems []string
	switch {
	case c.Head == c.Base:
	case len(c.HeadParents) == 1 && c.HeadParents[0] == c.Base && headTree == baseTree:
		c.SetupCommit = true
	case len(c.HeadParents) == 1 && c.HeadParents[0] == c.Base:
		problems = append(problems, fmt.Sprintf("HEAD %s is a commit on base_commit %s that changes the tree (%s, base %s)",
			c.Head, c.Base, short([]string{headTree}), short([]string{baseTree})))
	default:
		parents := "none"
		if len(c.HeadParents) > 0 {
			parents = strings.Join(c.HeadParents, ", ")
		}
		problems = append(problems, fmt.Sprintf("HEAD %s (parents: %s) is neither base_commit %s nor a setup commit on it", c.Head, parents, c.Base))
	}
	if len(c.Dirty) > 0 {
		problems = append(problems, fmt.Sprintf("%d changed tracked file(s) before the patch (HEAD %s): %s", len(c.Dirty), c.Head, listSome(c.Dirty, 5)))
	}
	c.Problem = strings.Join(problems, "; ")
	c.AtBase = c.Problem == ""
	return c, nil
}

// listSome joins the first n of list, with a count of the rest.
func listSome(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:n], ", ") + fmt.Sprintf(" and %d more", len(list)-n)
}
