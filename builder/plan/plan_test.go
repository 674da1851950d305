package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
)

type refMeta struct {
	EnvKey      string `json:"env_image_key"`
	InstanceKey string `json:"instance_image_key"`
	InUseX86    bool   `json:"in_USE_X86"`
}

func verified(t *testing.T) (string, []dataset.Instance) {
	shared := spectest.SharedDir(t)
	insts, err := spectest.ReadJSONL(filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return shared, insts
}

// TestPlanVerified checks node counts and keys per platform against the
// reference meta.json files, the x86-only ids, and env node sharing.
func TestPlanVerified(t *testing.T) {
	shared, insts := verified(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables}
	p, err := Build(context.Background(), r, insts, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 0 {
		t.Fatalf("errors: %+v", p.Errors[0])
	}
	// Expected graph from the reference data.
	for _, platform := range core.AllPlatforms() {
		arch := platform.Arch()
		wantEnv := map[string][]string{}
		wantInst := map[string]string{}
		var wantSkipped []string
		for _, inst := range insts {
			raw, err := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", inst.InstanceID, arch, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m refMeta
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if platform == core.ARM64 && m.InUseX86 {
				wantSkipped = append(wantSkipped, inst.InstanceID)
				continue
			}
			wantEnv[m.EnvKey] = append(wantEnv[m.EnvKey], inst.InstanceID)
			wantInst[m.InstanceKey] = m.EnvKey
		}
		sort.Strings(wantSkipped)
		var pp *PlatformPlan
		for i := range p.Platforms {
			if p.Platforms[i].Platform == platform {
				pp = &p.Platforms[i]
			}
		}
		if pp == nil {
			t.Fatalf("no plan for %s", arch)
		}
		if pp.Totals.Base != 1 || pp.Totals.Env != len(wantEnv) || pp.Totals.Instance != len(wantInst) {
			t.Errorf("%s totals %+v, want 1 base, %d env, %d instance", arch, pp.Totals, len(wantEnv), len(wantInst))
		}
		t.Logf("%s: %+v", pp.Platform, pp.Totals)
		if strings.Join(pp.Skipped, ",") != strings.Join(wantSkipped, ",") {
			t.Errorf("%s: skipped %d ids, want %d", arch, len(pp.Skipped), len(wantSkipped))
		}
		for _, n := range pp.Nodes {
			switch n.Kind {
			case render.KindEnv:
				want := wantEnv[n.Key]
				sort.Strings(want)
				if strings.Join(n.Instances, ",") != strings.Join(want, ",") {
					t.Errorf("env node %s: instances %v, want %v", n.Key, n.Instances, want)
				}
				// Sharing means identical env scripts.
				first, _ := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", n.Instances[0], arch, "setup_env.sh"))
				for _, id := range n.Instances[1:] {
					other, _ := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", id, arch, "setup_env.sh"))
					if !bytes.Equal(first, other) {
						t.Errorf("env node %s shared by %s and %s with different setup_env.sh", n.Key, n.Instances[0], id)
					}
				}
				if n.Parent != "sweb.base.py."+arch+":latest" {
					t.Errorf("env node %s parent %s", n.Key, n.Parent)
				}
			case render.KindInstance:
				if wantInst[n.Key] != n.Parent {
					t.Errorf("instance node %s: parent %s, want %s", n.Key, n.Parent, wantInst[n.Key])
				}
				if string(n.Build.Files[render.FileSetupRepo]) == "" || len(n.Build.Dockerfile) == 0 {
					t.Errorf("instance node %s has no build input", n.Key)
				}
			}
		}
	}
	if len(p.X86Only) != 86 {
		t.Errorf("%d x86-only Verified ids, want 86", len(p.X86Only))
	}
	var buf bytes.Buffer
	if err := p.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"linux/arm64: 1 base", "86 x86-only instances have no linux/arm64 node", "x86-only by USE_X86 (no linux/arm64 node): " + p.X86Only[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestPlanErrorsKeepGoing: an instance with an unknown version is reported
// with its source, and the others are planned.
func TestPlanErrorsKeepGoing(t *testing.T) {
	_, insts := verified(t)
	insts = append([]dataset.Instance(nil), insts[:3]...)
	insts[1].Version = "99.9"
	insts[1].Source = "x.jsonl:2"
	tables, _ := spec.Load()
	p, err := Build(context.Background(), &render.Renderer{Tables: tables}, insts, []core.Platform{core.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 1 || p.Errors[0].InstanceID != insts[1].InstanceID || p.Errors[0].Source != "x.jsonl:2" {
		t.Fatalf("errors %+v", p.Errors)
	}
	if p.Platforms[0].Totals.Instance != 2 {
		t.Errorf("totals %+v", p.Platforms[0].Totals)
	}
	if _, err := Build(context.Background(), &render.Renderer{Tables: tables}, insts, []core.Platform{"linux/s390x"}); err == nil {
		t.Error("unknown platform accepted")
	}
}
