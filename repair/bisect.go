// Package repair finds the package that broke an env's gold patches between
// two nights and proposes the pin rule that repairs it.
//
// When tonight's rebuild of an env resolves other packages than last
// night's (the drift of its environment documents) and gold patches that
// passed on last night's images fail on tonight's, Bisect rebuilds the env
// first with last night's whole captured set (the frozen rule), then with
// parts of the changed packages held back at last night's versions (the
// frozen rule per package, pins.HoldRule), until one package and version
// explain the failure: in O(log n) rebuilds of n changed packages. Where no
// single package explains it (two that only break together; a change
// outside the package lists), it says so, and the night keeps last night's
// images.
//
// Bisect is a pure function of the changes and an Oracle (build this env
// with this held-back set, verify gold: pass or fail); package pipeline
// has the real one (BuildKit builds, gold checks). Proposal turns a result
// into a rule of a pins file (pins.FileRule) carrying its evidence.
package repair

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// Change is one package an env resolved differently tonight: From is last
// night's version, To tonight's ("" for a package added or removed), on
// Platforms.
type Change struct {
	Ecosystem string          `json:"ecosystem"`
	Name      string          `json:"name"`
	From      string          `json:"from,omitempty"`
	To        string          `json:"to,omitempty"`
	Platforms []core.Platform `json:"platforms"`
	// URL: installed from a URL or a directory on either night (pip's
	// "name @ url", "-e path"), so not on an index: no version to hold.
	URL bool `json:"url,omitempty"`
}

// Key is "pypi/fixdep".
func (c Change) Key() string { return c.Ecosystem + "/" + c.Name }

// String is the drift report's form: "pypi/fixdep 1.0 -> 1.1", "pypi/x
// added 2.0", "pypi/x removed 1.0".
func (c Change) String() string {
	switch {
	case c.From == "":
		return c.Key() + " added " + c.To
	case c.To == "":
		return c.Key() + " removed " + c.From
	}
	return c.Key() + " " + c.From + " -> " + c.To
}

// Holdable reports whether the frozen rule per package can hold c back: a
// PyPI package at one version last night and another tonight (pip
// constraints can pin a version, not forbid or force a package).
func (c Change) Holdable() bool {
	return c.Ecosystem == sbom.PyPI && c.From != "" && c.To != "" && !c.URL
}

func (c Change) id() string {
	var ps []string
	for _, p := range c.Platforms {
		ps = append(ps, p.String())
	}
	return c.String() + " " + strings.Join(ps, ",")
}

func compareChanges(a, b Change) int {
	return cmp.Or(cmp.Compare(a.Key(), b.Key()), cmp.Compare(a.id(), b.id()))
}

// Step is one rebuild of the env.
type Step struct {
	// Frozen: last night's whole captured set (the frozen rule, --freeze);
	// Held is then empty.
	Frozen bool `json:"frozen,omitempty"`
	// Held are the changes held back at their From version (the frozen
	// rule per package); every other package resolves as it did tonight.
	Held []Change `json:"held,omitempty"`
}

// Label says what the step built: "last night's captured set (frozen)",
// "holding back pypi/a 1.0, pypi/b 2.0", "tonight's set".
func (s Step) Label() string {
	if s.Frozen {
		return "last night's captured set (frozen)"
	}
	if len(s.Held) == 0 {
		return "tonight's set"
	}
	var h []string
	for _, c := range s.Held {
		h = append(h, c.Key()+" "+c.From)
	}
	return "holding back " + strings.Join(h, ", ")
}

func (s Step) key() string {
	if s.Frozen {
		return "frozen"
	}
	var ids []string
	for _, c := range s.Held {
		ids = append(ids, c.id())
	}
	slices.Sort(ids)
	return strings.Join(ids, "\n")
}

// Failure is one image whose gold patch failed.
type Failure struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	// Tests are the labelled tests that failed (FAIL_TO_PASS and
	// PASS_TO_PASS), when the run got that far.
	Tests []string `json:"failing_tests,omitempty"`
	// Error says what failed when there are no test results (the env or
	// the image did not build, the run broke).
	Error string `json:"error,omitempty"`
}

// String is "fixture__calc-1 linux/amd64".
func (f Failure) String() string { return f.InstanceID + " " + f.Platform.String() }

// Outcome is what one rebuild gave: Pass when every gold patch of the
// env's instances passed on every platform built.
type Outcome struct {
	Pass     bool      `json:"pass"`
	Failures []Failure `json:"failures,omitempty"`
	// Seconds is the rebuild's wall time (builds and gold checks).
	Seconds float64 `json:"seconds,omitempty"`
}

// Oracle rebuilds the env with a step's packages held back and verifies
// its instances' gold patches: each env once per platform, shared by its
// instances. An error means no answer (the builder is gone), not a fail.
type Oracle interface {
	Try(ctx context.Context, s Step) (Outcome, error)
}

// OracleFunc is an Oracle.
type OracleFunc func(ctx context.Context, s Step) (Outcome, error)

// Try calls f.
func (f OracleFunc) Try(ctx context.Context, s Step) (Outcome, error) { return f(ctx, s) }

// Verdicts.
const (
	// VerdictCulprit: holding back Culprits (each breaks gold on its own)
	// makes every gold patch pass; Repair is that build.
	VerdictCulprit = "culprit"
	// VerdictInteraction: no single package explains it; Together break
	// gold only together (each alone passes). Last night's images stay.
	VerdictInteraction = "interaction"
	// VerdictOutside: last night's whole captured set fails too, or no
	// package changed: the cause is outside the package lists (the base
	// image, the spec, a flaky test). Last night's images stay.
	VerdictOutside = "outside"
	// VerdictUnexplained: the changes a hold can pin do not explain it
	// (last night's set passes); Reason says what was found. Last
	// night's images stay.
	VerdictUnexplained = "unexplained"
)

// Tried is one step and what it gave.
type Tried struct {
	Step    Step    `json:"step"`
	Label   string  `json:"label"`
	Outcome Outcome `json:"outcome"`
}

// Result is what Bisect found.
type Result struct {
	Verdict string `json:"verdict"`
	// Reason is one sentence for people.
	Reason string `json:"reason"`
	// Culprits are the changes the repair holds back (VerdictCulprit).
	Culprits []Change `json:"culprits,omitempty"`
	// Together are the changes that break gold only together
	// (VerdictInteraction): at least these two.
	Together []Change `json:"together,omitempty"`
	// Changed are every change of the env; Holdable those bisected.
	Changed  []Change `json:"changed"`
	Holdable int      `json:"holdable"`
	// Steps are the rebuilds, in order; Rebuilds counts them, Seconds
	// sums their wall time.
	Steps    []Tried `json:"steps"`
	Rebuilds int     `json:"rebuilds"`
	Seconds  float64 `json:"seconds"`
	// Repair is the last step of a culprit verdict: the env with the
	// culprits held back, every gold patch passing (the images to publish).
	Repair *Tried `json:"repair,omitempty"`
}

// MaxCulprits bounds how many packages that each break gold on their own
// one repair holds back.
const MaxCulprits = 3

// Bisect finds which of changes broke the env. tonight is tonight's
// outcome (no held set; it must have failed); oracle rebuilds.
//
// Failure is taken to be monotone in the set of new versions applied (more
// new versions never repair what fewer broke), and last night's set (the
// frozen step) to pass. With n holdable changes and one culprit it takes
// ceil(log2 n) + 3 rebuilds at most: the frozen step, the search for the
// shortest failing prefix of the sorted changes, the culprit alone, and
// the repair (the culprit held back). An interaction costs another search
// of the prefix for the partner.
func Bisect(ctx context.Context, changes []Change, tonight Outcome, oracle Oracle) (*Result, error) {
	if tonight.Pass {
		return nil, errors.New("tonight's build passed: nothing to bisect")
	}
	all := slices.Clone(changes)
	slices.SortFunc(all, compareChanges)
	var c []Change
	for _, ch := range all {
		if ch.Holdable() {
			c = append(c, ch)
		}
	}
	b := &bisector{oracle: oracle, memo: map[string]Outcome{}, c: c,
		res: &Result{Changed: all, Holdable: len(c), Steps: []Tried{}}}
	b.memo[Step{Held: nil}.key()] = tonight
	err := b.run(ctx, all)
	return b.res, err
}

type bisector struct {
	oracle Oracle
	memo   map[string]Outcome
	c      []Change // holdable, sorted
	res    *Result
}

func (b *bisector) try(ctx context.Context, s Step) (Outcome, error) {
	if o, ok := b.memo[s.key()]; ok {
		return o, nil
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	o, err := b.oracle.Try(ctx, s)
	if err != nil {
		return Outcome{}, fmt.Errorf("rebuild %d (%s): %w", b.res.Rebuilds+1, s.Label(), err)
	}
	b.memo[s.key()] = o
	b.res.Steps = append(b.res.Steps, Tried{Step: s, Label: s.Label(), Outcome: o})
	b.res.Rebuilds++
	b.res.Seconds += o.Seconds
	return o, nil
}

// fails applies the new versions of applied, holding back every other
// holdable change.
func (b *bisector) fails(ctx context.Context, applied []Change) (bool, error) {
	on := make(map[string]bool, len(applied))
	for _, a := range applied {
		on[a.id()] = true
	}
	var held []Change
	for _, ch := range b.c {
		if !on[ch.id()] {
			held = append(held, ch)
		}
	}
	o, err := b.try(ctx, Step{Held: held})
	return !o.Pass, err
}

func (b *bisector) run(ctx context.Context, all []Change) error {
	r := b.res
	if len(all) == 0 {
		r.Verdict = VerdictOutside
		r.Reason = "tonight's env lists the same packages as last night's: the cause is outside the package lists (the base image, the spec, the test itself)"
		return nil
	}
	frozen, err := b.try(ctx, Step{Frozen: true})
	if err != nil {
		return err
	}
	if !frozen.Pass {
		r.Verdict = VerdictOutside
		r.Reason = "last night's captured set fails too: the cause is outside the package lists (the base image, Debian packages, the spec, a flaky test)"
		return nil
	}
	if len(b.c) == 0 {
		r.Verdict = VerdictUnexplained
		r.Reason = fmt.Sprintf("last night's captured set passes, but none of the %d changes is one a hold can pin (%s): the frozen rule repairs it, no single package rule", len(all), list(all))
		return nil
	}
	var held []Change // the culprits found so far, held back from here on
	for {
		var u []Change
		for _, ch := range b.c {
			if !slices.ContainsFunc(held, func(h Change) bool { return h.id() == ch.id() }) {
				u = append(u, ch)
			}
		}
		// Known: applying all of u fails (tonight, or the repair that
		// held back the culprits so far). Last night's set passed, so the
		// shortest failing prefix of u is at least one long.
		lo, err := shortestFailing(1, len(u), func(n int) (bool, error) { return b.fails(ctx, u[:n]) })
		if err != nil {
			return err
		}
		culprit := u[lo-1]
		alone, err := b.fails(ctx, []Change{culprit})
		if err != nil {
			return err
		}
		if !alone {
			return b.interaction(ctx, u[:lo-1], culprit)
		}
		held = append(held, culprit)
		var rest []Change
		for _, ch := range u {
			if ch.id() != culprit.id() {
				rest = append(rest, ch)
			}
		}
		f, err := b.fails(ctx, rest)
		if err != nil {
			return err
		}
		if !f {
			r.Verdict = VerdictCulprit
			r.Culprits = held
			for i := range r.Steps {
				if r.Steps[i].Step.key() == (Step{Held: held}).key() {
					t := r.Steps[i]
					r.Repair = &t
				}
			}
			r.Reason = fmt.Sprintf("%s breaks the gold patches; held back, every gold patch passes", list(held))
			return nil
		}
		if len(rest) == 0 || len(held) == MaxCulprits {
			r.Verdict = VerdictUnexplained
			r.Reason = fmt.Sprintf("%s each break the gold patches on their own, and holding them back still fails: no repair of %d packages or fewer", list(held), MaxCulprits)
			return nil
		}
	}
}

// shortestFailing is the smallest n from lo to hi for which fails(n) is
// true, by bisection: fails(hi) is known to be, and a failure is monotone
// (applying more changes keeps failing once some do).
func shortestFailing(lo, hi int, fails func(n int) (bool, error)) (int, error) {
	for lo < hi {
		mid := (lo + hi) / 2
		f, err := fails(mid)
		if err != nil {
			return 0, err
		}
		if f {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// interaction: culprit alone does not break gold, but with prefix applied
// it does. Find the shortest prefix that breaks with it: its last change
// is a partner.
func (b *bisector) interaction(ctx context.Context, prefix []Change, culprit Change) error {
	r := b.res
	// Applying prefix and culprit fails (known).
	lo, err := shortestFailing(1, len(prefix), func(n int) (bool, error) {
		return b.fails(ctx, append(slices.Clone(prefix[:n]), culprit))
	})
	if err != nil {
		return err
	}
	if len(prefix) == 0 {
		// Cannot happen with a monotone failure: the culprit was the
		// first change, and applying it alone failed.
		r.Verdict = VerdictUnexplained
		r.Reason = fmt.Sprintf("%s fails applied with nothing else and passes alone: the outcomes contradict each other (a flaky test?)", culprit)
		return nil
	}
	partner := prefix[lo-1]
	pair, err := b.fails(ctx, []Change{partner, culprit})
	if err != nil {
		return err
	}
	r.Verdict = VerdictInteraction
	if pair {
		r.Together = []Change{partner, culprit}
		r.Reason = fmt.Sprintf("no single package explains it: %s and %s break the gold patches only together (each alone passes)", partner, culprit)
		return nil
	}
	r.Together = append(slices.Clone(prefix[:lo]), culprit)
	r.Reason = fmt.Sprintf("no single package explains it: %s break the gold patches only together with more of %s", list([]Change{partner, culprit}), list(prefix[:lo-1]))
	return nil
}

func list(cs []Change) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return strings.Join(s, ", ")
}
