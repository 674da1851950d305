package drift

import (
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

// TestCauses: an image whose digest changed gets the recorded change that
// explains it: a repair's rule, other pin rules, another spec key; else a
// rebuild of the same inputs (same packages) or an unrecorded change
// (other packages); unknown without records. An unchanged digest gets no
// cause. The Markdown counts them and lists the unrecorded first.
func TestCauses(t *testing.T) {
	dg := func(c string) string { return "r@sha256:" + strings.Repeat(c, 64) }
	in := func(spec string, pins ...string) *Inputs { return &Inputs{SpecKey: spec, Pins: pins} }
	for _, tc := range []struct {
		name          string
		refA, refB    string
		a, b          *Inputs
		fixdepB       string
		cause, detail string
	}{
		{"repair rule added, spec key changed too", dg("a"), dg("b"), in("k1"), in("k2", "repair-fixture-calc-1.0-fixdep"), "1.0",
			CauseRepair, "+repair-fixture-calc-1.0-fixdep"},
		{"a pin rule dropped", dg("a"), dg("b"), in("k1", "sphinx-pygments-2.18"), in("k2"), "1.0", CausePin, "-sphinx-pygments-2.18"},
		{"a pins file rule added", dg("a"), dg("b"), in("k1"), in("k2", "hold-x"), "1.1", CausePin, "+hold-x"},
		{"spec key changed", dg("a"), dg("b"), in("k1", "p"), in("k2", "p"), "1.1", CauseSpec, "spec key k1 -> k2"},
		{"same inputs, same packages", dg("a"), dg("b"), in("k1"), in("k1"), "1.0", CauseRebuild, "same spec key and rules, same packages"},
		{"same inputs, other packages", dg("a"), dg("b"), in("k1"), in("k1"), "1.1", CauseUnrecorded, "same spec key and rules, 1 package change(s)"},
		{"no record of A", dg("a"), dg("b"), nil, in("k1"), "1.1", CauseUnknown, "no record of the build inputs in A"},
		{"same digest", dg("a"), dg("a"), in("k1"), in("k2", "repair-x"), "1.1", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := []Image{{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: tc.refA, Inputs: tc.a,
				Doc: doc(t, "instance", "fixture__calc-1", core.AMD64, listing(t, "fixdep==1.0"))}}
			b := []Image{{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: tc.refB, Inputs: tc.b,
				Doc: doc(t, "instance", "fixture__calc-1", core.AMD64, listing(t, "fixdep=="+tc.fixdepB))}}
			rep, err := Compare("A", a, "B", b)
			if err != nil {
				t.Fatal(err)
			}
			im := rep.Images[0]
			if im.Cause != tc.cause || im.CauseDetail != tc.detail {
				t.Errorf("cause %q %q, want %q %q", im.Cause, im.CauseDetail, tc.cause, tc.detail)
			}
			if got := rep.Summary.Causes[tc.cause]; tc.cause != "" && got != 1 || tc.cause == "" && len(rep.Summary.Causes) != 0 {
				t.Errorf("summary causes %v", rep.Summary.Causes)
			}
			if n := len(rep.Unrecorded()); (n == 1) != (tc.cause == CauseUnrecorded) {
				t.Errorf("Unrecorded() = %d images", n)
			}
			var md strings.Builder
			if err := WriteMarkdown(&md, rep); err != nil {
				t.Fatal(err)
			}
			want := "**Digests changed: 1** (1 " + tc.cause + ")."
			if tc.cause == CauseUnrecorded {
				want += " **1 changed with nothing recorded**"
			}
			if has := strings.Contains(md.String(), want); has != (tc.cause != "") {
				t.Errorf("Markdown:\n%s\nwant %q: %v", md.String(), want, tc.cause != "")
			}
		})
	}
}

// TestAddInputs: a prefix-named side's targets get the inputs of the
// ledger's record of the same instance, platform and digest only.
func TestAddInputs(t *testing.T) {
	d1, d2 := digest.Digest("sha256:"+strings.Repeat("1", 64)), digest.Digest("sha256:"+strings.Repeat("2", 64))
	recs := []core.Image{
		{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Digest: d1, SpecKey: "old", Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Digest: d2, SpecKey: "k2", Pins: []string{"p"}, Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "fixture__calc-2", Platform: core.AMD64, Digest: d1, SpecKey: "k3", Status: core.StatusFailed, Error: "x"},
	}
	ts := []Target{
		{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: "r@" + d2.String()},
		{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.ARM64, Ref: "r@" + d2.String()},
		{Kind: KindInstance, Name: "fixture__calc-2", Platform: core.AMD64, Ref: "r@" + d1.String()},
	}
	AddInputs(ts, recs)
	if ts[0].Inputs == nil || ts[0].Inputs.SpecKey != "k2" || len(ts[0].Inputs.Pins) != 1 || ts[1].Inputs != nil || ts[2].Inputs != nil {
		t.Errorf("inputs %+v %+v %+v", ts[0].Inputs, ts[1].Inputs, ts[2].Inputs)
	}
}
