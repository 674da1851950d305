package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/verify"
)

// TestV5RecordsWithoutSpecs (issue 26): a v5 record carrying its own
// eval_script, log_parser and image (fixture__calc-1 as v5FixtureDataset
// writes it; its repo is in no spec table but the fixture's --specs file)
// is verified and graded without --specs: `verify --gold` runs the
// record's script in the image its image field names (re-rooted at the
// local registry) and resolves; `grade` of that run's log, without
// --specs, writes the same report. Rendering it still needs the tables:
// `plan` without --specs names the record's unknown repo.
func TestV5RecordsWithoutSpecs(t *testing.T) {
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	md := filepath.Join(tmp, "metadata.jsonl")
	if _, err := f.build(t, ctx, f.dataset, f.reg+"/swebuild-test/nospecs", md, "--instance", "fixture__calc-1", "--platform", "linux/amd64"); err != nil {
		t.Fatalf("building fixture__calc-1: %v", err)
	}
	mirror := f.reg + "/swebuild-test/nospecs-mirror"
	var pubOut, pubErr bytes.Buffer
	if err := runPublish(ctx, []string{"--metadata-file", md, "--repo", mirror + "/swebench", "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &pubOut, &pubErr); err != nil {
		t.Fatalf("publishing under %s: %v\n%s", mirror, err, pubErr.String())
	}
	ds, _ := v5FixtureDataset(t, f)
	cache := t.TempDir()

	runDir := filepath.Join(tmp, "gold")
	var stdout, stderr bytes.Buffer
	err := runVerify(ctx, []string{"--gold", "--dataset", ds, "--platform", "linux/amd64", "--images", "dataset=" + mirror,
		"--run-dir", runDir, "--timeout", "10m", "--cache-dir", cache}, &stdout, &stderr)
	t.Logf("verify --gold without --specs: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	if err != nil {
		t.Fatalf("verify --gold without --specs: %v", err)
	}
	sum, err := verify.ReadSummary(filepath.Join(runDir, "summary.json"))
	if err != nil || len(sum.Results) != 1 {
		t.Fatalf("summary: %v, %+v", err, sum)
	}
	gold := sum.Results[0]
	if !gold.Resolved || gold.Script == nil || gold.Script.Source != verify.ScriptDataset {
		t.Fatalf("gold: resolved %v, script %+v; want resolved with the record's own script", gold.Resolved, gold.Script)
	}

	// grade the run's log, without --specs: upstream's report.json again.
	log := filepath.Join(gold.Dir, "test_output.txt")
	stdout.Reset()
	stderr.Reset()
	if err := runGrade(ctx, []string{"--dataset", ds, "--instance", "fixture__calc-1", "--log", log, "--cache-dir", cache}, &stdout, &stderr); err != nil {
		t.Fatalf("grade without --specs: %v\n%s", err, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join(gold.Dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSuffix(stdout.String(), "\n"); got != string(want) || !strings.Contains(got, `"resolved": true`) {
		t.Errorf("grade without --specs:\n%s\nverify's report.json:\n%s", got, want)
	}

	stdout.Reset()
	stderr.Reset()
	err = runPlan(ctx, []string{"--dataset", ds, "--cache-dir", cache}, &stdout, &stderr)
	if err == nil || !strings.Contains(stdout.String()+stderr.String()+err.Error(), "fixture/calc") {
		t.Errorf("plan without --specs: %v\n%s%s; want the unknown repo named", err, stdout.String(), stderr.String())
	}
}
