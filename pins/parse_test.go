package pins

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

func TestParse(t *testing.T) {
	var allIDs []string
	for _, r := range All() {
		allIDs = append(allIDs, r.ID)
	}
	without := func(ids ...string) []string {
		return slices.DeleteFunc(slices.Clone(allIDs), func(id string) bool { return slices.Contains(ids, id) })
	}
	for _, tc := range []struct {
		value  string
		rules  []string
		lifted []string
		str    string
		err    string // substring; "" = no error
	}{
		{value: "", rules: allIDs, str: "default"},
		{value: "default", rules: allIDs, str: "default"},
		{value: "none", rules: nil, str: "none"},
		{value: "default,-" + IDChromeApt, rules: without(IDChromeApt), str: "default,-" + IDChromeApt},
		{value: "-" + IDChromeApt, rules: without(IDChromeApt), str: "default,-" + IDChromeApt},
		{value: "-" + IDChromeApt + ",-" + IDPnpmArm64, rules: without(IDChromeApt, IDPnpmArm64), str: "default,-" + IDChromeApt + ",-" + IDPnpmArm64},
		// Listed ids apply in All's order.
		{value: IDMavenForMvnd + "," + IDSphinxPygments, rules: []string{IDSphinxPygments, IDMavenForMvnd}, str: IDSphinxPygments + "," + IDMavenForMvnd},
		{value: "+" + IDCondaChannels, rules: []string{IDCondaChannels}, str: IDCondaChannels},
		{value: "none," + IDCondaChannels, rules: []string{IDCondaChannels}, str: IDCondaChannels},
		{value: "default,-" + spec.RulePuppeteerChromium, rules: allIDs, lifted: []string{spec.RulePuppeteerChromium}, str: "default,-" + spec.RulePuppeteerChromium},
		{value: "none,-" + spec.RuleNodeWithoutArm64, rules: nil, lifted: []string{spec.RuleNodeWithoutArm64}, str: "none,-" + spec.RuleNodeWithoutArm64},
		{value: "default,-bogus", err: `unknown rule "bogus"; pin rules: ` + strings.Join(allIDs, ", ") + "; x86-only rules (lift with -ID): " + spec.RuleNodeWithoutArm64 + ", " + spec.RulePuppeteerChromium},
		{value: "defualt", err: `unknown rule "defualt"`},
		{value: spec.RulePuppeteerChromium, err: "is an x86-only rule, on unless lifted: write -" + spec.RulePuppeteerChromium},
		{value: "default,,-" + IDChromeApt, err: "empty item"},
		{value: "-" + spec.RuleUseX86, err: `unknown rule "USE_X86"`},
	} {
		s, err := Parse(tc.value)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q): err %v, want %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.value, err)
			continue
		}
		var got []string
		for _, r := range s.Rules() {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.rules) || !slices.Equal(s.LiftedX86(), tc.lifted) || s.String() != tc.str {
			t.Errorf("Parse(%q) = rules %q lifted %q string %q; want %q %q %q", tc.value, got, s.LiftedX86(), s.String(), tc.rules, tc.lifted, tc.str)
		}
		// String parses back to the same selection.
		back, err := Parse(s.String())
		if err != nil || back.String() != s.String() {
			t.Errorf("Parse(%q).String() = %q does not parse back (%v)", tc.value, s.String(), err)
		}
	}
}

// TestDefaultMinusRule renders the whole shared reference (Verified and
// Multilingual/Multimodal, both arches) with --pins default and with
// default,-ID for every rule: the lines default,-ID loses against default
// are exactly the lines the rule alone adds to upstream's files, the lines
// it gets back exactly those the rule removes, and its pins are default's
// minus ID.
func TestDefaultMinusRule(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	def, _ := Parse("default")
	rd := &render.Renderer{Tables: tables, Pins: def}
	refs := references(t)
	// The Verified sphinx envs are bundled files that pin Pygments already;
	// Lite's spec-built sphinx envs are where sphinx-pygments-2.18 acts.
	lite := reference{name: "lite-sphinx", recs: map[string]*core.Instance{}}
	for id, r := range spectest.Records(t, spectest.SharedDir(t), "SWE-bench_Lite/test")["SWE-bench_Lite/test"] {
		if r.Repo == "sphinx-doc/sphinx" {
			lite.recs[id] = r
		}
	}
	refs = append(refs, lite)
	for _, rule := range All() {
		minus, err := Parse("default,-" + rule.ID)
		if err != nil {
			t.Fatal(err)
		}
		only, _ := Only(rule.ID)
		rm, ro := &render.Renderer{Tables: tables, Pins: minus}, &render.Renderer{Tables: tables, Pins: only}
		upstream := &render.Renderer{Tables: tables}
		changed := 0
		for _, ref := range refs {
			for _, id := range sortedIDs(ref) {
				for _, p := range core.AllPlatforms() {
					inst := ref.recs[id]
					var res [4]*render.Result
					for i, r := range []*render.Renderer{rd, rm, ro, upstream} {
						if res[i], err = r.Render(context.Background(), inst, p); err != nil {
							t.Fatalf("%s %s: %v", id, p, err)
						}
					}
					wantPins := slices.DeleteFunc(slices.Clone(res[0].Pins), func(s string) bool { return s == rule.ID })
					if !slices.Equal(res[1].Pins, wantPins) {
						t.Errorf("%s %s: default,-%s pins %q, want %q", id, p, rule.ID, res[1].Pins, wantPins)
					}
					if len(res[2].Pins) > 0 {
						changed++
					}
					for _, f := range files {
						lost, gained := lineDiff(renderedFile(res[0], f), renderedFile(res[1], f))
						ruleRemoved, ruleAdded := lineDiff(renderedFile(res[3], f), renderedFile(res[2], f))
						if !slices.Equal(lost, ruleAdded) || !slices.Equal(gained, ruleRemoved) {
							t.Errorf("%s %s %s: default,-%s lost %q gained %q; the rule alone adds %q removes %q",
								id, p.Arch(), f, rule.ID, lost, gained, ruleAdded, ruleRemoved)
						}
					}
				}
			}
		}
		if changed == 0 {
			t.Errorf("rule %s changes no reference render: the test proves nothing for it", rule.ID)
		}
		t.Logf("%s: changes %d renders alone; default,-%s drops exactly those changes", rule.ID, changed, rule.ID)
	}
}

func sortedIDs(ref reference) []string {
	ids := make([]string, 0, len(ref.recs))
	for id := range ref.recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestLiftX86Rule: -puppeteer-bundled-chromium gives the p5.js instances
// it covers linux/arm64 again; USE_X86 stays; the other rule stays.
func TestLiftX86Rule(t *testing.T) {
	shared := spectest.SharedDir(t)
	recs := spectest.Records(t, shared, "SWE-bench_Multimodal/dev")["SWE-bench_Multimodal/dev"]
	count := func(value string) map[string]int {
		tables, err := spec.Load()
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(value)
		if err != nil {
			t.Fatal(err)
		}
		if err := tables.LiftX86Rules(s.LiftedX86()...); err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, r := range recs {
			d := tables.Decide(r)
			n[d.Rule]++
		}
		return n
	}
	before, after := count("default"), count("default,-"+spec.RulePuppeteerChromium)
	if before[spec.RulePuppeteerChromium] == 0 {
		t.Fatalf("no Multimodal dev instance is x86-only by %s: %v", spec.RulePuppeteerChromium, before)
	}
	if after[spec.RulePuppeteerChromium] != 0 || after[""] != before[""]+before[spec.RulePuppeteerChromium] {
		t.Errorf("lifted: %v, before %v", after, before)
	}
	t.Logf("x86-only by rule, default: %v; lifted: %v", before, after)
}
