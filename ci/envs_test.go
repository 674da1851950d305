package ci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

func TestBuildEnvMatrix(t *testing.T) {
	amd, arm := core.AMD64, core.ARM64
	need := func(key string, plat core.Platform, base string) EnvNeed {
		return EnvNeed{Key: key, Platform: plat, Base: base}
	}
	tests := []struct {
		name      string
		needs     []EnvNeed
		platforms []core.Platform
		shards    int
		// want: job name -> its keys, comma-separated
		want    map[string]string
		order   []string
		wantErr string
	}{
		{
			name:      "one job per platform",
			needs:     []EnvNeed{need("e2", amd, "b"), need("e1", amd, "b"), need("a1", arm, "ba")},
			platforms: []core.Platform{amd, arm}, shards: 1,
			want:  map[string]string{"envs-amd64-0": "e1,e2", "envs-arm64-0": "a1"},
			order: []string{"envs-amd64-0", "envs-arm64-0"},
		},
		{
			name: "a base group is never split, the largest goes first",
			needs: []EnvNeed{need("py1", amd, "py"), need("py2", amd, "py"), need("py3", amd, "py"),
				need("go1", amd, "go"), need("rs1", amd, "rs"), need("rs2", amd, "rs")},
			platforms: []core.Platform{amd}, shards: 2,
			want:  map[string]string{"envs-amd64-0": "py1,py2,py3", "envs-amd64-1": "go1,rs1,rs2"},
			order: []string{"envs-amd64-0", "envs-amd64-1"},
		},
		{
			name:      "no more jobs than base groups",
			needs:     []EnvNeed{need("py1", amd, "py"), need("py2", amd, "py")},
			platforms: []core.Platform{amd, arm}, shards: 8,
			want:  map[string]string{"envs-amd64-0": "py1,py2"},
			order: []string{"envs-amd64-0"},
		},
		{name: "nothing to build", platforms: []core.Platform{amd}, shards: 1, want: map[string]string{}},
		{name: "listed twice", needs: []EnvNeed{need("e", amd, "b"), need("e", amd, "b")}, platforms: []core.Platform{amd}, shards: 1, wantErr: "listed twice"},
		{name: "platform not requested", needs: []EnvNeed{need("e", arm, "b")}, platforms: []core.Platform{amd}, shards: 1, wantErr: "was not requested"},
		{name: "zero shards", platforms: []core.Platform{amd}, shards: 0, wantErr: "at least 1"},
		{name: "over the job limit", platforms: []core.Platform{amd, arm}, shards: 129, wantErr: "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := BuildEnvMatrix(tt.needs, tt.platforms, tt.shards, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			var order []string
			for _, j := range m.Include {
				got[j.Name] = j.Keys
				order = append(order, j.Name)
				if j.Count != len(j.EnvKeys()) || j.Keys != strings.Join(j.EnvKeys(), ",") {
					t.Errorf("%s: count %d, keys %q %v", j.Name, j.Count, j.Keys, j.EnvKeys())
				}
				if j.Runner != DefaultRunners()[j.Platform].Label || j.QEMU {
					t.Errorf("%s: runner %q qemu %v", j.Name, j.Runner, j.QEMU)
				}
			}
			if len(got) != len(tt.want) || strings.Join(order, " ") != strings.Join(tt.order, " ") {
				t.Fatalf("jobs %v (order %v), want %v (order %v)", got, order, tt.want, tt.order)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: keys %q, want %q", k, got[k], v)
				}
			}
			b, err := m.Encode()
			if err != nil || !strings.HasPrefix(string(b), `{"include":[`) {
				t.Errorf("Encode %s %v", b, err)
			}
		})
	}
}

func TestEnvBinding(t *testing.T) {
	amd := core.AMD64
	d := digest.FromString("env")
	built := "reg/r/build-cache@" + d.String()
	p := Plan{
		Instances: []PlanInstance{
			{InstanceID: "a", Targets: []Target{{Platform: amd, Action: ActionBuild, Shard: "amd64-0", Env: "env-built"}}},
			{InstanceID: "b", Targets: []Target{{Platform: amd, Action: ActionBuild, Shard: "amd64-0", Env: "env-reused"}}},
			{InstanceID: "c", Targets: []Target{{Platform: amd, Action: ActionBuild, Shard: "amd64-1"}}},
			{InstanceID: "d", Targets: []Target{{Platform: amd, Action: ActionBuild, Shard: "amd64-1", Env: "env-unlisted"}}},
			{InstanceID: "e", Targets: []Target{{Platform: amd, Action: ActionBuild, Shard: "amd64-1", Env: "env-failed"}}},
		},
		Envs: []EnvTarget{
			{Key: "env-built", Platform: amd, Action: ActionBuild, Shard: "envs-amd64-0"},
			{Key: "env-failed", Platform: amd, Action: ActionBuild, Shard: "envs-amd64-0"},
			{Key: "env-reused", Platform: amd, Action: ActionExisting, Ref: "reg/r/build-cache@sha256:" + strings.Repeat("1", 64)},
		},
	}
	ok := []core.Image{
		{Kind: core.KindBase, Key: "base", Platform: core.AMD64, Status: core.StatusBuilt, Digest: d, Ref: built},
		{Kind: core.KindEnv, Key: "env-built", Platform: core.AMD64, Status: core.StatusBuilt, Digest: d, Ref: built},
		{Kind: core.KindEnv, Key: "env-failed", Platform: core.AMD64, Status: core.StatusFailed, Error: "failed: RUN conda: exit 1"},
	}
	tests := []struct {
		id       string
		platform core.Platform
		recs     []core.Image
		key, ref string
		wantErr  string
	}{
		{id: "a", platform: amd, recs: ok, key: "env-built", ref: built},
		{id: "b", platform: amd, recs: nil, key: "env-reused", ref: p.Envs[2].Ref},
		{id: "c", platform: amd, recs: ok},        // no env in the plan: the shard builds as before
		{id: "a", platform: core.ARM64, recs: ok}, // not a build target on arm64
		{id: "a", platform: amd, recs: nil, wantErr: "no result from env job envs-amd64-0"},
		{id: "e", platform: amd, recs: ok, wantErr: "failed in env job envs-amd64-0: failed: RUN conda"},
		{id: "d", platform: amd, recs: ok, wantErr: "does not list"},
	}
	for _, tt := range tests {
		key, ref, err := p.EnvBinding(tt.recs, tt.id, tt.platform)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s %s: error %v, want %q", tt.id, tt.platform, err, tt.wantErr)
			}
			continue
		}
		if err != nil || key != tt.key || ref != tt.ref {
			t.Errorf("%s %s: %q %q %v, want %q %q", tt.id, tt.platform, key, ref, err, tt.key, tt.ref)
		}
	}
	if plat, keys, err := p.EnvJobKeys("envs-amd64-0"); err != nil || plat != amd || strings.Join(keys, ",") != "env-built,env-failed" {
		t.Errorf("EnvJobKeys: %s %v %v", plat, keys, err)
	}
	if _, _, err := p.EnvJobKeys("envs-arm64-0"); err == nil {
		t.Error("EnvJobKeys of an unknown job: no error")
	}
}

func TestFindExistingEnvs(t *testing.T) {
	amd := core.AMD64
	const repo = "reg/r"
	rec := func(key, spec, ref string, st core.Status) core.Image {
		d := digest.FromString(key)
		return core.Image{Kind: core.KindEnv, Key: key, Platform: core.AMD64, Digest: d, Ref: ref + "@" + d.String(), SpecKey: spec, Status: st}
	}
	ledger := LatestEnvs([]core.Image{
		rec("old", "k0", repo+"/build-cache", core.StatusBuilt),
		rec("ok", "k1", repo+"/build-cache", core.StatusBuilt),
		rec("changed", "k-old", repo+"/build-cache", core.StatusBuilt),
		rec("elsewhere", "k3", "ghcr.io/x/build-cache", core.StatusBuilt),
		rec("gone", "k4", repo+"/build-cache", core.StatusBuilt),
		rec("failed", "k5", repo+"/build-cache", core.StatusBuilt),
		rec("failed", "k5", repo+"/build-cache", core.StatusFailed), // the latest wins
	})
	want := []EnvNeed{
		{Key: "ok", Platform: amd, SpecKey: "k1"}, {Key: "changed", Platform: amd, SpecKey: "k2"},
		{Key: "elsewhere", Platform: amd, SpecKey: "k3"}, {Key: "gone", Platform: amd, SpecKey: "k4"},
		{Key: "failed", Platform: amd, SpecKey: "k5"}, {Key: "unknown", Platform: amd, SpecKey: "k6"},
	}
	var held []string
	for _, k := range []string{"ok", "changed", "elsewhere", "failed"} {
		held = append(held, ledger[EnvKey{k, amd}].Ref)
	}
	chk := NewMapChecker(held...)
	got, err := FindExistingEnvs(context.Background(), ledger, want, repo, chk, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[EnvKey{"ok", amd}].SpecKey != "k1" {
		t.Errorf("reused %v, want only ok", got)
	}
	if chk.Calls() != 2 { // ok and gone are asked; the rest never reach the registry
		t.Errorf("%d registry lookups, want 2", chk.Calls())
	}
}

func TestReadPlanEnvs(t *testing.T) {
	for _, tt := range []struct{ envs, wantErr string }{
		{`[{"key":"e","platform":"linux/amd64","action":"build","shard":"envs-amd64-0"}]`, ""},
		{`[{"key":"e","platform":"linux/amd64","action":"existing","ref":"r@sha256:00"}]`, ""},
		{`[{"key":"e","platform":"linux/amd64","action":"build"}]`, "envs[0].shard"},
		{`[{"key":"e","platform":"linux/amd64","action":"existing"}]`, "envs[0].ref"},
		{`[{"platform":"linux/amd64","action":"build","shard":"s"}]`, "key and platform"},
		{`[{"key":"e","platform":"linux/amd64","action":"copy","shard":"s"}]`, "envs[0].action"},
	} {
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(path, []byte(`{"platforms":["linux/amd64"],"instances":[],"envs":`+tt.envs+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPlan(path)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: error %v, want %q", tt.envs, err, tt.wantErr)
		}
	}
}

// TestMergeBuiltInShards: a base or env record in a shard's metadata (a
// shard that built its env instead of starting from the env stage) is
// listed; instance records and failed parents are not.
func TestMergeBuiltInShards(t *testing.T) {
	d := digest.FromString("x")
	plan := Plan{Platforms: []core.Platform{core.AMD64}, Instances: []PlanInstance{{InstanceID: "a", Targets: []Target{{Platform: core.AMD64, Action: ActionBuild, Shard: "amd64-0"}}}}}
	results := []core.Image{
		{Kind: core.KindEnv, Key: "sweb.env.py.x86_64.e:latest", Platform: core.AMD64, Status: core.StatusBuilt, Digest: d, Ref: "r@" + d.String()},
		{Kind: core.KindBase, Key: "sweb.base.py.x86_64:latest", Platform: core.AMD64, Status: core.StatusFailed, Error: "x"},
		{Kind: core.KindInstance, InstanceID: "a", Platform: core.AMD64, Status: core.StatusBuilt, Digest: d, Ref: "r@" + d.String(), Verified: core.Bool(true)},
	}
	rep := Merge(plan, results)
	if strings.Join(rep.BuiltInShards, "|") != "env sweb.env.py.x86_64.e:latest linux/amd64" {
		t.Errorf("built in shards %q", rep.BuiltInShards)
	}
	if rep = Merge(plan, results[2:]); len(rep.BuiltInShards) != 0 {
		t.Errorf("built in shards %q with instance records only", rep.BuiltInShards)
	}
}
