package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verification"
)

// TestVerdicts: a summary's gold results become verdicts with their run's
// report.json and eval.sh, the control result of the same instance and
// platform linked; a cached result needs no eval.sh; a result whose
// report.json is gone is left out and named.
func TestVerdicts(t *testing.T) {
	dir := t.TempDir()
	write := func(sub string, files ...string) string {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte(f+" of "+sub), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	settings := &verification.Settings{Grading: "auto", TimeoutSeconds: 1800, MaxOutput: 1 << 20, Network: "none", Repeat: 1}
	sum := &Summary{Settings: settings, Results: []Result{
		{InstanceID: "a__a-1", Platform: core.AMD64, Mode: ModeGold, Image: "r/x@sha256:" + strings.Repeat("1", 64), Resolved: true,
			Rules: "v5", Dir: write("gold-a", "report.json", "eval.sh"), Runs: []Attempt{{Run: 1}, {Run: 2}}},
		{InstanceID: "a__a-1", Platform: core.AMD64, Mode: ModeControl, Resolved: false, Failure: FailureTests, Dir: write("control-a", "report.json")},
		{InstanceID: "a__a-1", Platform: core.ARM64, Mode: ModeGold, Resolved: true, Cached: true, Dir: write("gold-a-arm", "report.json")},
		{InstanceID: "b__b-2", Platform: core.AMD64, Mode: ModeGold, Resolved: true, Dir: write("gold-b")},
	}}
	vs, err := sum.Verdicts()
	if err == nil || !strings.Contains(err.Error(), "verdict of b__b-2 linux/amd64") || !strings.Contains(err.Error(), "report.json") {
		t.Errorf("error %v, want one naming b__b-2's missing report.json", err)
	}
	if len(vs) != 2 {
		t.Fatalf("%d verdicts, want 2: %+v", len(vs), vs)
	}
	a, arm := vs[0], vs[1]
	if a.InstanceID != "a__a-1" || a.Platform != core.AMD64 || a.Digest() != "sha256:"+strings.Repeat("1", 64) || !a.GoldResolved ||
		a.Rules != "v5" || a.Runs != 2 || a.Settings != settings || string(a.Report) != "report.json of gold-a" || string(a.EvalScript) != "eval.sh of gold-a" {
		t.Errorf("amd64 verdict %+v", a)
	}
	if a.ControlUnresolved == nil || !*a.ControlUnresolved {
		t.Errorf("amd64 verdict: control unresolved %v, want true (the control run did not resolve)", a.ControlUnresolved)
	}
	if arm.Platform != core.ARM64 || !arm.Cached || arm.EvalScript != nil || arm.ControlUnresolved != nil || arm.Digest() != "" {
		t.Errorf("cached arm64 verdict %+v: want no eval.sh, no control, no digest", arm)
	}
	if _, err := VerdictOf(sum.Results[1], nil, settings); err == nil {
		t.Error("a control result made a verdict")
	}
}
