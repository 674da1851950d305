package pipeline

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/taskrepo"
)

// TestBuildMultimodalTaskRepoOffline builds the copy of upstream's
// Multimodal task repo on the running stack with no internet, two solves at
// a time: every published task's solve must be accepted by BuildKit and fail
// only at its first network access, naming the host (the FROM ubuntu:jammy
// resolve: registry-1.docker.io), except the tasks whose problem_assets/
// directory the copy lacks (PROBLEM_ASSETS.csv, copy_source_present False),
// which must fail before the solve naming the task and the file. No node may
// build: nothing in this repo builds offline.
func TestBuildMultimodalTaskRepoOffline(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	repo := filepath.Join(spectest.SharedDir(t), "upstream-v5", "task-repo-multimodal")
	absent := map[string]bool{}
	f, err := os.Open(filepath.Join(repo, "PROBLEM_ASSETS.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, r := range rows[1:] {
		if r[col["copy_source_present"]] == "False" {
			absent[r[col["instance_id"]]] = true
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := Build(ctx, BuildOptions{
		Inputs:    Inputs{TaskRepo: repo, Pins: "default", CacheDir: t.TempDir()},
		Platforms: core.AllPlatforms(),
		Builder: builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2,
			RunDir: t.TempDir(), Progress: "quiet"},
	})
	if res == nil || res.Report == nil {
		t.Fatalf("Build: %v", err)
	}
	if err == nil {
		t.Fatal("Build gave no error; every task needs the network")
	}
	counts := map[string]int{}
	for _, r := range res.Report.Results {
		n := r.Node
		if r.Status != builder.StatusFailed || r.Err == nil {
			t.Errorf("%s: %s, want failed", n.ID(), r.Status)
			continue
		}
		msg := r.Err.Error()
		if absent[n.InstanceID] {
			want := "task " + n.InstanceID + ": Dockerfile line "
			if !strings.Contains(msg, want) || !strings.Contains(msg, `COPY source "problem_assets" is not in the context directory `+filepath.Join(repo, "tasks", n.InstanceID)) {
				t.Errorf("%s: %v\nwant the missing COPY source named", n.ID(), msg)
			}
			counts["copy source missing, "+n.Platform.String()]++
			continue
		}
		if !strings.Contains(msg, "needs the network: cannot reach registry-1.docker.io") || !strings.Contains(msg, "ubuntu:jammy") {
			t.Errorf("%s: %v\nwant the failure at the FROM ubuntu:jammy resolve naming registry-1.docker.io", n.ID(), msg)
		}
		counts["network at FROM ubuntu:jammy, "+n.Platform.String()]++
	}
	tr, _ := taskrepo.Open(repo)
	split := map[string]string{}
	for _, tk := range tr.Tasks {
		split[tk.Instance.InstanceID] = tk.Split
	}
	published := 0
	for _, pr := range res.Plan.Records {
		published++
		if s := split[pr.InstanceID]; s != "dev" && s != "test" {
			t.Errorf("%s: split %s built without being named", pr.InstanceID, s)
		}
	}
	if len(res.Report.Results) < published {
		t.Errorf("%d results for %d tasks", len(res.Report.Results), published)
	}
	t.Logf("%d tasks, %d nodes: %v", published, len(res.Report.Results), counts)
}
