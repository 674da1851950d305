package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/verify"
)

// flakyTest is the test flakyDataset adds to fixture__calc-1, and flakyRuns
// how many gold runs build --verify makes of it.
const (
	flakyTest = "tests/test_ops.py::test_flaky_one_in_three"
	flakyRuns = 15
)

// flakyDataset writes a test-only dataset of one record: fixture__calc-1
// (same repository, base commit, environment and gold patch, so the shared
// build's images serve) whose test patch also adds flakyTest, labelled
// PASS_TO_PASS. The test fails when random.SystemRandom().randrange(3) is 0:
// one run in three on average, each run drawing from os.urandom in a fresh
// container (no state is shared between runs, so nothing fixes which run
// fails).
func flakyDataset(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["instance_id"] != "fixture__calc-1" {
			continue
		}
		tp := rec["test_patch"].(string)
		q := strings.Replace(tp, "@@ -22,3 +22,15 @@", "@@ -22,3 +22,20 @@", 1)
		q += "+\n+\n+def test_flaky_one_in_three():\n+    import random\n+    assert random.SystemRandom().randrange(3) != 0\n"
		if !strings.HasSuffix(tp, "+    assert div(a, b) == want\n") || strings.Count(q, "@@ -22,3 +22,20 @@") != 1 {
			t.Fatalf("fixture__calc-1's test patch changed; update flakyDataset:\n%s", tp)
		}
		rec["test_patch"] = q
		var p2p []string
		if err := json.Unmarshal([]byte(rec["PASS_TO_PASS"].(string)), &p2p); err != nil {
			t.Fatal(err)
		}
		l, _ := json.Marshal(append(p2p, flakyTest))
		rec["PASS_TO_PASS"] = string(l)
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "dataset-flaky.jsonl")
		if err := os.WriteFile(p, append(line, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatalf("%s has no fixture__calc-1", src)
	return ""
}

// TestFlakyFixtureLabelled is the issue's "a fixture test that fails one run
// in three": fixture__calc-1 with flakyTest added (flakyDataset) goes through
// the nightly's steps on linux/amd64: `build --verify --verify-repeat 15`
// (a shard), `ci merge`, `publish --unsigned` of the merge's publish
// metadata, `ci summary`. The image is exported and indexed labelled flaky,
// not verified; its published statement is WARNED and lists the test in
// warnedTests with its rate in flakeRates; the index carries
// io.swebuild.gold=flaky; the night's summary names the test and its rate.
// The rate expected is counted from the runs' own test output (pytest's
// PASSED/FAILED line of the test), not from what swebuild made of it.
//
// The test draws its outcome in each run, so it can come out the same in all
// 15: all passed with probability (2/3)^15 = 0.23%, all failed (1/3)^15; the
// test then fails saying so.
func TestFlakyFixtureLabelled(t *testing.T) {
	stacktest.Thorough(t)
	f, _ := sharedFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	const id = "fixture__calc-1"
	ds := flakyDataset(t, f.dataset)
	salt := strconv.FormatInt(time.Now().UnixNano(), 36)
	staging, repo := f.reg+"/swebuild-test/flaky-staging-"+salt, f.reg+"/swebuild-test/flaky-"+salt

	// The plan of the night: one shard, linux/amd64.
	ids := filepath.Join(tmp, "ids.txt")
	if err := os.WriteFile(ids, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(tmp, "plan.json")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"ci", "matrix", "--ids", ids, "--platform", "linux/amd64", "--shards", "1", "--plan-out", plan, "--github-output", filepath.Join(tmp, "gh-matrix")}, &stdout, &stderr); code != 0 {
		t.Fatalf("ci matrix exit %d: %s", code, stderr.String())
	}

	// The shard: build --verify --verify-repeat 15.
	shard := filepath.Join(tmp, "shards", "amd64-0")
	if err := os.MkdirAll(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	md, runDir := filepath.Join(shard, "meta.jsonl"), filepath.Join(tmp, "build")
	stdout.Reset()
	stderr.Reset()
	err := runBuild(ctx, []string{"--dataset", ds, "--specs", f.specs, "--instance", id, "--platform", "linux/amd64",
		"--verify", "--verify-repeat", strconv.Itoa(flakyRuns), "--reverify", "--push", staging, "--metadata-file", md,
		"--run-dir", runDir, "--context-dir", f.rootfs, "--context-dir", f.ctxDir, "--progress", "quiet"}, &stdout, &stderr)
	t.Logf("build --verify --verify-repeat %d:\n%s\n%s", flakyRuns, stdout.String(), tail(stderr.String(), 4000))

	// What the runs' own output says: how many of them failed the test.
	failed, ran := countFlakyRuns(t, runDir, id)
	t.Logf("%s failed in %d of %d gold runs (pytest's own lines)", flakyTest, failed, ran)
	if ran != flakyRuns {
		t.Fatalf("%d gold runs found in %s, want %d", ran, runDir, flakyRuns)
	}
	if failed == 0 || failed == ran {
		t.Fatalf("%s failed in %d of %d runs: every run drew the same outcome (probability 0.23%%), nothing flaky to label", flakyTest, failed, ran)
	}
	if err != nil {
		t.Fatalf("build --verify with a flaky gold: %v (a flaky gold is exported labelled, not an error)", err)
	}
	rate := fmt.Sprintf("failed %d/%d", failed, ran)

	recs, err := core.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	var built core.Image
	for _, r := range recs {
		if r.Kind == core.KindInstance {
			built = r
		}
	}
	if built.Status != core.StatusBuilt || built.IsVerified() || !built.IsFlaky() ||
		!slices.Equal(built.Flaky, []core.Flake{{Test: flakyTest, Failed: failed, Runs: ran}}) {
		t.Fatalf("build record: status %s verified %v flaky %+v; want built, not verified, flaky %s %s", built.Status, built.IsVerified(), built.Flaky, flakyTest, rate)
	}

	// ci merge: indexed, counted flaky.
	merge, pub := filepath.Join(tmp, "merge.json"), filepath.Join(tmp, "publish.jsonl")
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"ci", "merge", "--plan", plan, "--results", filepath.Join(tmp, "shards"), "--out", merge, "--publish-metadata", pub, "--github-output", filepath.Join(tmp, "gh-merge")}, &stdout, &stderr)
	t.Logf("ci merge:\n%s\n%s", stdout.String(), stderr.String())
	if code != 0 || !strings.Contains(stdout.String(), "1 instances: 1 to index") {
		t.Fatalf("ci merge exit %d, want 0 with the flaky instance to index", code)
	}

	// publish the merge's publish metadata.
	stdout.Reset()
	stderr.Reset()
	if err := runPublish(ctx, []string{"--metadata-file", pub, "--repo", repo, "--unsigned", "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	}
	t.Logf("publish:\n%s", stdout.String())

	// The index is labelled.
	namer := manifests.Namer{Repo: repo}
	ref, err := name.ParseReference(namer.IndexRepo(id)+":"+manifests.LatestTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ggcrremote.Index(ref, ggcrremote.WithContext(ctx))
	if err != nil {
		t.Fatalf("reading the index %s: %v", ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Annotations[manifests.AnnotationGold]; got != manifests.GoldFlaky {
		t.Errorf("index %s: %s = %q, want %q (annotations %v)", ref, manifests.AnnotationGold, got, manifests.GoldFlaky, im.Annotations)
	}
	if got := im.Annotations[manifests.AnnotationFlakyTests]; !strings.Contains(got, flakyTest+" ("+rate+")") {
		t.Errorf("index %s: %s = %q, want it to name %s (%s)", ref, manifests.AnnotationFlakyTests, got, flakyTest, rate)
	}

	// The statement lists the test with its rate.
	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := name.NewRepository(namer.ArchRepo(core.AMD64.Arch(), id), name.Insecure)
	vs, err := (&attest.Referrers{Client: client}).Statements(ctx, arch, mustHash(t, built.Digest.String()), attest.TestResultPredicate)
	if err != nil || len(vs) != 1 {
		t.Fatalf("the published image's verification statement: %d, %v", len(vs), err)
	}
	tr, err := attest.ParseVerificationStatement(vs[0])
	if err != nil {
		t.Fatal(err)
	}
	rates, _ := tr.Extra["flakeRates"].(map[string]any)
	got, _ := rates[flakyTest].(map[string]any)
	if tr.Result != "WARNED" || !slices.Equal(tr.WarnedTests, []string{flakyTest}) || slices.Contains(tr.PassedTests, flakyTest) || slices.Contains(tr.FailedTests, flakyTest) ||
		got["failedRuns"] != float64(failed) || got["runs"] != float64(ran) || tr.Extra["goldRuns"] != float64(ran) || tr.Extra["goldResolvedRuns"] != float64(ran-failed) {
		t.Errorf("statement: result %s warned %v flakeRates %v goldRuns %v goldResolvedRuns %v; want WARNED, %s warned with failedRuns %d of runs %d",
			tr.Result, tr.WarnedTests, tr.Extra["flakeRates"], tr.Extra["goldRuns"], tr.Extra["goldResolvedRuns"], flakyTest, failed, ran)
	}

	// The night's summary names it.
	summary := filepath.Join(tmp, "summary.md")
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"ci", "summary", "--merge", merge, "-o", summary}, &stdout, &stderr)
	b, _ := os.ReadFile(summary)
	t.Logf("ci summary (exit %d):\n%s", code, b)
	for _, want := range []string{"1 indexed (1 of them flaky, labelled)", "| `" + id + "` | linux/amd64 | `" + flakyTest + "` " + rate + " |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ci summary lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("ci summary exit %d: a flaky gold labelled is not a failure of the night", code)
	}
}

// countFlakyRuns reads the gold runs of id under the build's run directory
// (the gold check's summary.json names their directories) and counts, from
// each run's test_output.txt as pytest printed it, the runs where flakyTest
// failed.
func countFlakyRuns(t *testing.T, runDir, id string) (failed, runs int) {
	t.Helper()
	var sums []string
	_ = filepath.WalkDir(runDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "summary.json" {
			sums = append(sums, p)
		}
		return nil
	})
	for _, s := range sums {
		sum, err := verify.ReadSummary(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sum.Results {
			if r.InstanceID != id || r.Mode != verify.ModeGold {
				continue
			}
			for _, a := range r.Runs {
				out, err := os.ReadFile(filepath.Join(a.Dir, "test_output.txt"))
				if err != nil {
					t.Fatal(err)
				}
				pass, fail := strings.Contains(string(out), "PASSED "+flakyTest), strings.Contains(string(out), "FAILED "+flakyTest)
				if pass == fail {
					t.Fatalf("run %d (%s): the test output has %s neither or both PASSED and FAILED", a.Run, a.Dir, flakyTest)
				}
				runs++
				if fail {
					failed++
				}
			}
		}
	}
	if len(sums) == 0 {
		t.Fatalf("no gold check summary under %s", runDir)
	}
	return failed, runs
}
