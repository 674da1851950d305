package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// TestNotPlannedX86Only: the build summary's "not built" list of
// Multimodal dev is its 15 x86-only p5.js instances on linux/arm64 (the
// README's count), named with their rule, and nothing for an amd64-only run.
func TestNotPlannedX86Only(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Multimodal", "dev.jsonl")
	loaded, err := Load(context.Background(), Inputs{Dataset: ds, Pins: "default", CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		platforms []core.Platform
		want      int
	}{{core.AllPlatforms(), 15}, {[]core.Platform{core.AMD64}, 0}} {
		p, err := loaded.Plan(context.Background(), tc.platforms)
		if err != nil {
			t.Fatal(err)
		}
		np := p.NotPlanned()
		if len(np) != tc.want {
			t.Errorf("%v: %d not planned, want %d", tc.platforms, len(np), tc.want)
		}
		for _, n := range np {
			if n.Platform != core.ARM64 || n.Reason != "x86-only (puppeteer-bundled-chromium)" {
				t.Errorf("%+v", n)
			}
		}
	}
}
