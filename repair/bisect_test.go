package repair

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

var both = []core.Platform{core.AMD64, core.ARM64}

func pypi(name string) Change {
	return Change{Ecosystem: "pypi", Name: name, From: "1.0", To: "1.1", Platforms: both}
}

// fakeOracle breaks gold when every package of one of breakers has its new
// version applied (not held back); the frozen step fails when outside.
type fakeOracle struct {
	breakers [][]string
	outside  bool
	calls    []Step
	err      error
}

func (f *fakeOracle) Try(_ context.Context, s Step) (Outcome, error) {
	f.calls = append(f.calls, s)
	if f.err != nil {
		return Outcome{}, f.err
	}
	fail := Outcome{Failures: []Failure{{InstanceID: "fixture__calc-1", Platform: core.AMD64, Tests: []string{"tests/test_calc.py::test_div"}}}, Seconds: 10}
	if s.Frozen {
		if f.outside {
			return fail, nil
		}
		return Outcome{Pass: true, Seconds: 10}, nil
	}
	held := map[string]bool{}
	for _, h := range s.Held {
		held[h.Name] = true
	}
	for _, set := range f.breakers {
		if !slices.ContainsFunc(set, func(n string) bool { return held[n] }) {
			return fail, nil
		}
	}
	return Outcome{Pass: true, Seconds: 10}, nil
}

var tonight = Outcome{Failures: []Failure{{InstanceID: "fixture__calc-1", Platform: core.AMD64}}}

func names(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestBisect(t *testing.T) {
	four := []Change{pypi("fixlog"), pypi("fixdep"), pypi("fixaux"), pypi("fixfmt")} // sorted: aux, dep, fmt, log
	deb := Change{Ecosystem: "deb", Name: "libc6", From: "2.36-9", To: "2.36-10", Platforms: both}
	added := Change{Ecosystem: "pypi", Name: "newdep", To: "0.1", Platforms: both}
	for _, tc := range []struct {
		name     string
		changes  []Change
		oracle   fakeOracle
		verdict  string
		culprits []string
		together []string
		rebuilds int
		// held are the packages each rebuild held back (the frozen
		// step: "frozen"), in order.
		held   []string
		reason string
	}{
		{name: "one breaks, second of four", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixdep"}}},
			verdict: VerdictCulprit, culprits: []string{"fixdep"}, rebuilds: 5,
			held:   []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux,fixfmt,fixlog", "fixdep"},
			reason: "pypi/fixdep 1.0 -> 1.1 breaks the gold patches"},
		{name: "one breaks, first of four", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixaux"}}},
			verdict: VerdictCulprit, culprits: []string{"fixaux"}, rebuilds: 4,
			held: []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux"}},
		{name: "one breaks, last of four", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixlog"}}},
			// the repair (fixlog held) is the second step of the search
			verdict: VerdictCulprit, culprits: []string{"fixlog"}, rebuilds: 4,
			held: []string{"frozen", "fixfmt,fixlog", "fixlog", "fixaux,fixdep,fixfmt"}},
		{name: "the only change", changes: []Change{pypi("fixdep")}, oracle: fakeOracle{breakers: [][]string{{"fixdep"}}},
			verdict: VerdictCulprit, culprits: []string{"fixdep"}, rebuilds: 2, held: []string{"frozen", "fixdep"}},
		{name: "two break on their own", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixdep"}, {"fixlog"}}},
			verdict: VerdictCulprit, culprits: []string{"fixdep", "fixlog"}, rebuilds: 7,
			held: []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux,fixfmt,fixlog", "fixdep",
				"fixdep,fixlog", "fixaux,fixdep,fixfmt"}},
		{name: "two that only break together, neighbours", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixaux", "fixdep"}}},
			verdict: VerdictInteraction, together: []string{"fixaux", "fixdep"}, rebuilds: 4,
			held:   []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux,fixfmt,fixlog"},
			reason: "no single package explains it: pypi/fixaux 1.0 -> 1.1 and pypi/fixdep 1.0 -> 1.1 break the gold patches only together"},
		{name: "two that only break together, far apart", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixaux", "fixlog"}}},
			verdict: VerdictInteraction, together: []string{"fixaux", "fixlog"}, rebuilds: 6,
			held: []string{"frozen", "fixfmt,fixlog", "fixlog", "fixaux,fixdep,fixfmt", "fixfmt", "fixdep,fixfmt"}},
		{name: "three only together", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixaux", "fixdep", "fixfmt"}}},
			verdict: VerdictInteraction, together: []string{"fixaux", "fixdep", "fixfmt"}, rebuilds: 6,
			held:   []string{"frozen", "fixfmt,fixlog", "fixlog", "fixaux,fixdep,fixlog", "fixdep,fixlog", "fixaux,fixlog"},
			reason: "with more of pypi/fixaux 1.0 -> 1.1"},
		{name: "last night's set fails too", changes: four, oracle: fakeOracle{breakers: [][]string{{"fixdep"}}, outside: true},
			verdict: VerdictOutside, rebuilds: 1, held: []string{"frozen"}, reason: "last night's captured set fails too"},
		{name: "nothing changed", oracle: fakeOracle{breakers: [][]string{{"fixdep"}}},
			verdict: VerdictOutside, rebuilds: 0, reason: "same packages as last night's"},
		{name: "only changes no hold can pin", changes: []Change{deb, added}, oracle: fakeOracle{},
			verdict: VerdictUnexplained, rebuilds: 1, held: []string{"frozen"},
			reason: "none of the 2 changes is one a hold can pin (deb/libc6 2.36-9 -> 2.36-10, pypi/newdep added 0.1)"},
		{name: "a culprit among changes no hold can pin", changes: append([]Change{deb, added}, four...), oracle: fakeOracle{breakers: [][]string{{"fixfmt"}}},
			verdict: VerdictCulprit, culprits: []string{"fixfmt"}, rebuilds: 5,
			held: []string{"frozen", "fixfmt,fixlog", "fixlog", "fixaux,fixdep,fixlog", "fixfmt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.oracle
			r, err := Bisect(context.Background(), tc.changes, tonight, &o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tc.verdict || !slices.Equal(names(r.Culprits), tc.culprits) || !slices.Equal(names(r.Together), tc.together) {
				t.Errorf("verdict %s culprits %q together %q (%s); want %s %q %q", r.Verdict, names(r.Culprits), names(r.Together), r.Reason,
					tc.verdict, tc.culprits, tc.together)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q, want %q in it", r.Reason, tc.reason)
			}
			var held []string
			for _, s := range o.calls {
				if s.Frozen {
					held = append(held, "frozen")
					continue
				}
				held = append(held, strings.Join(names(s.Held), ","))
			}
			if r.Rebuilds != tc.rebuilds || len(o.calls) != tc.rebuilds || len(r.Steps) != tc.rebuilds || !slices.Equal(held, tc.held) {
				t.Errorf("rebuilds %d (oracle called %d times, %d steps), held %q\nwant %d, %q", r.Rebuilds, len(o.calls), len(r.Steps), held, tc.rebuilds, tc.held)
			}
			if r.Seconds != float64(10*tc.rebuilds) {
				t.Errorf("seconds %v, want %d", r.Seconds, 10*tc.rebuilds)
			}
			switch {
			case r.Verdict == VerdictCulprit && (r.Repair == nil || !r.Repair.Outcome.Pass || !slices.Equal(names(r.Repair.Step.Held), tc.culprits)):
				t.Errorf("repair step %+v, want the culprits held back, passing", r.Repair)
			case r.Verdict != VerdictCulprit && r.Repair != nil:
				t.Errorf("repair step %+v on a %s verdict", r.Repair, r.Verdict)
			}
		})
	}
}

// TestBisectLogarithmic: with one culprit among n changes, wherever it is,
// the bisection names it in at most ceil(log2 n) + 3 rebuilds.
func TestBisectLogarithmic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13, 32, 100} {
		var cs []Change
		for i := range n {
			cs = append(cs, pypi(fmt.Sprintf("pkg%03d", i)))
		}
		bound := bits.Len(uint(n-1)) + 3
		worst := 0
		for at := range n {
			o := &fakeOracle{breakers: [][]string{{cs[at].Name}}}
			r, err := Bisect(context.Background(), cs, tonight, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != VerdictCulprit || len(r.Culprits) != 1 || r.Culprits[0].Name != cs[at].Name {
				t.Fatalf("n=%d culprit %s: %s %q", n, cs[at].Name, r.Verdict, names(r.Culprits))
			}
			worst = max(worst, r.Rebuilds)
		}
		if worst > bound {
			t.Errorf("n=%d: %d rebuilds at worst, want at most ceil(log2 n)+3 = %d", n, worst, bound)
		}
		t.Logf("n=%d: at most %d rebuilds (bound %d)", n, worst, bound)
	}
}

func TestBisectErrors(t *testing.T) {
	if _, err := Bisect(context.Background(), []Change{pypi("a")}, Outcome{Pass: true}, &fakeOracle{}); err == nil {
		t.Error("tonight passed: no error")
	}
	boom := errors.New("buildkit gone")
	_, err := Bisect(context.Background(), []Change{pypi("a"), pypi("b")}, tonight, &fakeOracle{err: boom})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "rebuild 1 (last night's captured set (frozen))") {
		t.Errorf("oracle error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Bisect(ctx, []Change{pypi("a")}, tonight, &fakeOracle{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
