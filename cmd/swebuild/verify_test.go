package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/verify"
)

func TestVerifyFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", "x.jsonl", "--images", "r"}, "give --gold, --control or --predictions"},
		{[]string{"--gold", "--dataset", "x.jsonl"}, "exactly one of --images"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--metadata-file", "m"}, "exactly one of --images"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--workers", "0"}, "--workers 0"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--repeat", "0"}, "--repeat 0"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--format", "xml"}, "--format"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--log-parser", "parse_log_nope"}, "--log-parser"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--platform", "linux/s390x"}, "--platform"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--engine", "podman"}, "--engine \"podman\": want buildkit or docker"},
		{[]string{"--gold", "--dataset", "x.jsonl", "--images", "r", "--engine", "docker", "--builder", "unix:///b.sock"}, "--builder is for --engine buildkit"},
		{[]string{"--gold", "--images", "r"}, "--dataset is required"},
	} {
		var stdout, stderr bytes.Buffer
		err := runVerify(context.Background(), tc.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: err %v, stderr %q, want usage error naming %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

// fixtureStack builds the fixture's images for both platforms and pushes
// them to the local registry, returning the metadata file and the helpers
// needed to build again.
type fixtureStack struct {
	root, dataset, specs, rootfs, ctxDir, reg string
}

func newFixtureStack(t testing.TB) fixtureStack {
	st := stacktest.Require(t)
	rootfs := stacktest.Rootfs(t)
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctxDir, err := stacktest.FixtureContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fixtureStack{
		root: root, dataset: filepath.Join(root, "testdata", "fixture", "dataset.jsonl"),
		specs: filepath.Join(root, "testdata", "fixture", "specs.json"), rootfs: rootfs, ctxDir: ctxDir, reg: st.Registry,
	}
}

// parser is the log parser the fixture's spec profiles name for repo.
func (f fixtureStack) parser(t testing.TB, repo string) string {
	t.Helper()
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(f.specs); err != nil {
		t.Fatal(err)
	}
	p := tables.LogParser(repo)
	if p == "" {
		t.Fatalf("the fixture profiles name no log parser for %s", repo)
	}
	return p
}

func (f fixtureStack) build(t testing.TB, ctx context.Context, datasetPath, push, md string, extra ...string) (string, error) {
	args := append([]string{"--dataset", datasetPath, "--specs", f.specs, "--push", push, "--metadata-file", md,
		"--run-dir", filepath.Join(t.TempDir(), "build"), "--context-dir", f.rootfs, "--context-dir", f.ctxDir, "--progress", "quiet"}, extra...)
	var stdout, stderr bytes.Buffer
	err := runBuild(ctx, args, &stdout, &stderr)
	t.Logf("swebuild build %s:\n%s\n%s", strings.Join(extra, " "), stdout.String(), tail(stderr.String(), 3000))
	return stdout.String(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func loadFixture(t testing.TB, path string) map[string]core.Instance {
	t.Helper()
	insts, err := dataset.Load(context.Background(), path, dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]core.Instance{}
	for _, in := range insts {
		out[in.InstanceID] = in
	}
	return out
}

// brokenDataset writes the fixture dataset with two gold patches broken:
// fixture__calc-1's applies but does not fix the bug, fixture__textutil-1's
// does not apply at all.
func brokenDataset(t testing.TB, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec["instance_id"] {
		case "fixture__calc-1":
			p := rec["patch"].(string)
			q := strings.Replace(p, "+    return a / b\n", "+    return a // b\n", 1)
			if q == p {
				t.Fatal("fixture__calc-1's gold patch changed; update brokenDataset")
			}
			rec["patch"] = q
		case "fixture__textutil-1":
			rec["patch"] = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1,1 +1,1 @@\n-old line\n+new line\n"
		}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(line, '\n'))
	}
	p := filepath.Join(t.TempDir(), "dataset-broken.jsonl")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVerifyFixture is the end-to-end check on the offline fixture built for
// amd64 and arm64: every gold patch resolves on both platforms, the control
// run resolves none, each report.json is what grading the saved
// test_output.txt with the parser its spec profile names gives (pytest for
// the Python projects, TAP for the JavaScript one), broken gold patches are
// regressions against that baseline, and build --verify --push does not push
// them.
func TestVerifyFixture(t *testing.T) {
	stacktest.Thorough(t)
	f, built := sharedFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	md := built.MetadataFile

	// 1. Gold and control on both platforms.
	runDir := filepath.Join(tmp, "verify")
	base := filepath.Join(tmp, "baseline.json")
	var stdout, stderr bytes.Buffer
	err := runVerify(ctx, []string{"--gold", "--control", "--dataset", f.dataset, "--specs", f.specs, "--metadata-file", md,
		"--platform", "linux/amd64,linux/arm64", "--run-dir", runDir, "--summary", base, "--timeout", "10m"}, &stdout, &stderr)
	t.Logf("verify --gold --control:\n%s\n%s", stdout.String(), tail(stderr.String(), 4000))
	if err != nil {
		t.Fatalf("verify --gold --control: %v", err)
	}
	sum, err := verify.ReadSummary(base)
	if err != nil {
		t.Fatal(err)
	}
	insts := loadFixture(t, f.dataset)
	seen := map[string]bool{}
	for _, r := range sum.Results {
		seen[r.Mode+" "+r.InstanceID+" "+r.Platform.String()] = true
		switch r.Mode {
		case verify.ModeGold:
			if !r.Resolved || !r.OK() || r.Discriminates == nil || !*r.Discriminates || r.Leak.Leaked() {
				t.Errorf("gold %s %s: %+v", r.InstanceID, r.Platform, r)
			}
			// Inside the image /testbed sits at base_commit: HEAD is the
			// fixture's setup commit on it (setup_repo.sh ends with one)
			// and no tracked file is changed before the patch.
			for _, a := range r.Runs {
				c := a.Leak.Checkout
				if !a.Leak.AtBase() || c.Base != insts[r.InstanceID].BaseCommit || !c.SetupCommit || len(c.HeadParents) != 1 || c.HeadParents[0] != c.Base || len(c.Dirty) != 0 {
					t.Errorf("gold %s %s run %d: checkout %+v, want the setup commit on base_commit %s and a clean work tree", r.InstanceID, r.Platform, a.Run, c, insts[r.InstanceID].BaseCommit)
				} else {
					t.Logf("gold %s %s run %d: %s (untracked: %v)", r.InstanceID, r.Platform, a.Run, c, c.Untracked)
				}
			}
			if r.F2P.Passed != len(insts[r.InstanceID].FailToPass) || r.P2P.Passed != len(insts[r.InstanceID].PassToPass) {
				t.Errorf("gold %s %s: F2P %s P2P %s, want all passed", r.InstanceID, r.Platform, r.F2P, r.P2P)
			}
			// report.json is what grading the saved log gives.
			log, err := os.ReadFile(filepath.Join(r.Dir, "test_output.txt"))
			if err != nil {
				t.Fatal(err)
			}
			saved, err := os.ReadFile(filepath.Join(r.Dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			patch := insts[r.InstanceID].Patch
			rep, err := grading.Grade(insts[r.InstanceID], string(log), &patch, grading.GradeOptions{Parser: f.parser(t, insts[r.InstanceID].Repo)})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rep.JSON(), saved) {
				t.Errorf("%s %s: report.json differs from grading test_output.txt:\n%s\nvs\n%s", r.InstanceID, r.Platform, saved, rep.JSON())
			}
			if !strings.Contains(string(log), grading.StartTestOutput) {
				t.Errorf("%s %s: test_output.txt has no start marker", r.InstanceID, r.Platform)
			}
		case verify.ModeControl:
			if r.Resolved || !r.OK() || r.Failure != verify.FailureTests || r.F2P.Passed == r.F2P.Total {
				t.Errorf("control %s %s: %+v", r.InstanceID, r.Platform, r)
			}
		}
	}
	for id := range insts {
		for _, p := range []string{"linux/amd64", "linux/arm64"} {
			if id == "fixture__textutil-2" && p == "linux/arm64" {
				if seen["gold "+id+" "+p] {
					t.Errorf("x86-only %s verified on arm64", id)
				}
				continue
			}
			for _, mode := range []string{"gold", "control"} {
				if !seen[mode+" "+id+" "+p] {
					t.Errorf("no %s result for %s on %s", mode, id, p)
				}
			}
		}
	}

	// 1b. --repeat really reruns (nothing cached): two runs with their own
	// clock readings, not flaky.
	stdout.Reset()
	stderr.Reset()
	rep := filepath.Join(tmp, "repeat.json")
	err = runVerify(ctx, []string{"--gold", "--repeat", "2", "--dataset", f.dataset, "--specs", f.specs, "--metadata-file", md,
		"--platform", "linux/amd64", "--instance", "fixture__textutil-3", "--log-parser", "parse_log_pytest",
		"--run-dir", filepath.Join(tmp, "verify-repeat"), "--summary", rep}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("verify --repeat 2: %v\n%s", err, stderr.String())
	}
	rs, err := verify.ReadSummary(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Results) != 1 || len(rs.Results[0].Runs) != 2 || !rs.Results[0].OK() || len(rs.Results[0].FlakyTests) > 0 {
		t.Fatalf("--repeat 2: %+v", rs.Results)
	}
	o1, err1 := os.ReadFile(filepath.Join(rs.Results[0].Runs[0].Dir, "test_output.txt"))
	o2, err2 := os.ReadFile(filepath.Join(rs.Results[0].Runs[1].Dir, "test_output.txt"))
	if err1 != nil || err2 != nil || len(o1) == 0 || len(o2) == 0 {
		t.Errorf("--repeat 2: a run's test output is missing (%v, %v)", err1, err2)
	}
	// A cached exec would hand back the first run's files byte for byte,
	// including the wrapper's nanosecond clock readings around the tests; the
	// test output itself may legitimately be identical between two real runs.
	r1, r2 := rs.Results[0].Runs[0], rs.Results[0].Runs[1]
	if r1.TestSeconds == r2.TestSeconds && r1.InContainerSeconds == r2.InContainerSeconds && bytes.Equal(o1, o2) {
		t.Errorf("--repeat 2: both runs report the same clock readings (%v s, %v s) and output: a cached run?", r1.TestSeconds, r1.InContainerSeconds)
	}

	// 2. Broken gold patches against the baseline.
	broken := brokenDataset(t, f.dataset)
	stdout.Reset()
	stderr.Reset()
	err = runVerify(ctx, []string{"--gold", "--dataset", broken, "--specs", f.specs, "--metadata-file", md, "--platform", "linux/amd64",
		"--instance", "fixture__calc-1", "--instance", "fixture__calc-2", "--instance", "fixture__textutil-1",
		"--log-parser", "parse_log_pytest", "--run-dir", filepath.Join(tmp, "verify-broken"), "--baseline", base}, &stdout, &stderr)
	t.Logf("verify --baseline (broken):\n%s\n%s", stdout.String(), tail(stderr.String(), 3000))
	if err == nil || !strings.Contains(err.Error(), "2 regression(s)") {
		t.Errorf("broken gold patches: error %v, want 2 regressions", err)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "REGRESSION fixture__calc-1 linux/amd64 gold") ||
		!strings.Contains(out, "REGRESSION fixture__textutil-1 linux/amd64 gold: resolved in the baseline, now: "+verify.FailurePatch) {
		t.Errorf("regressions not listed first, or without their class:\n%s", out)
	}
	if strings.Contains(out, "REGRESSION fixture__calc-2") {
		t.Errorf("calc-2 is not broken but listed as a regression")
	}

	// 3. build --verify --push --publish does not push (or publish) the
	// broken instances.
	md2 := filepath.Join(tmp, "metadata-verify.jsonl")
	pubRepo := f.reg + "/swebuild-test/verify-gate-pub"
	bout, err := f.build(t, ctx, broken, f.reg+"/swebuild-test/verify-gate", md2, "--verify", "--platform", "linux/amd64",
		"--publish", pubRepo, "--unsigned", "--ledger", filepath.Join(tmp, "ledger.jsonl"))
	if err == nil {
		t.Fatal("build --verify with broken gold patches succeeded")
	}
	if !strings.Contains(bout, "gold patch verification:") || !strings.Contains(bout, "fixture__calc-1") {
		t.Errorf("build --verify output lacks the verification summary:\n%s", bout)
	}
	m, err := core.ReadFile(md2)
	if err != nil {
		t.Fatal(err)
	}
	pushed := map[string]bool{}
	for _, im := range m {
		if im.Kind != core.KindInstance || im.Status != core.StatusBuilt {
			continue
		}
		pushed[im.InstanceID] = true
		if !im.IsVerified() {
			t.Errorf("%s pushed without verified=true", im.InstanceID)
		}
		if im.Ref == "" {
			t.Errorf("%s: no pushed ref", im.InstanceID)
		}
	}
	for _, id := range []string{"fixture__calc-1", "fixture__textutil-1"} {
		if pushed[id] {
			t.Errorf("%s has a broken gold patch but was pushed", id)
		}
	}
	for _, id := range []string{"fixture__calc-2", "fixture__textutil-2", "fixture__textutil-3", "fixture__semver-1", "fixture__semver-2"} {
		if !pushed[id] {
			t.Errorf("%s passed verification but was not pushed", id)
		}
	}
	// --publish: per-arch image and multi-arch index for each verified
	// instance, nothing for the broken ones.
	namer := manifests.Namer{Repo: pubRepo}
	for id, want := range map[string]bool{"fixture__calc-1": false, "fixture__textutil-1": false, "fixture__calc-2": true, "fixture__textutil-2": true, "fixture__textutil-3": true,
		"fixture__semver-1": true, "fixture__semver-2": true} {
		for _, repo := range []string{namer.ArchRepo("x86_64", id), namer.IndexRepo(id)} {
			if got := manifestExists(t, repo+":latest"); got != want {
				t.Errorf("build --publish: %s:latest present = %v, want %v", repo, got, want)
			}
		}
	}
}

// manifestExists HEADs ref (HOST/REPO:TAG) on a plain-HTTP registry.
func manifestExists(t *testing.T, ref string) bool {
	t.Helper()
	host, rest, _ := strings.Cut(ref, "/")
	repo, tag, _ := strings.Cut(rest, ":")
	req, err := http.NewRequest(http.MethodHead, "http://"+host+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("HEAD %s: %s", ref, resp.Status)
	return false
}

// TestVerifyDefaultRunDirs: verify runs started at the same moment without
// --run-dir each get a run directory of their own, and each keeps its
// summary. (fixture__textutil-2 is x86-only, so asking for linux/arm64 gives
// no run at all: nothing here needs a daemon, and the address is never
// dialled.)
func TestVerifyDefaultRunDirs(t *testing.T) {
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fx := filepath.Join(root, "testdata", "fixture")
	t.Chdir(t.TempDir())
	const n = 4
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			var stdout, stderr bytes.Buffer
			err := runVerify(context.Background(), []string{"--gold", "--dataset", filepath.Join(fx, "dataset.jsonl"), "--specs", filepath.Join(fx, "specs.json"),
				"--instance", "fixture__textutil-2", "--platform", "linux/arm64", "--images", "127.0.0.1:1/none", "--builder", "unix:///nonexistent/buildkitd.sock"}, &stdout, &stderr)
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, stderr.String())
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := filepath.Glob(filepath.Join("runs", "verify-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != n {
		t.Errorf("%d run directories for %d runs: %v", len(dirs), n, dirs)
	}
	for _, d := range dirs {
		if _, err := verify.ReadSummary(filepath.Join(d, "summary.json")); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// TestVerifyRunDirInUse (issue 20 row 13): a verify given a --run-dir that
// another verify is using (here one holding it in this process) is refused
// with an error naming the directory, and the other's summary is left as it
// was; once released, the same command runs and writes its summary.
func TestVerifyRunDirInUse(t *testing.T) {
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fx := filepath.Join(root, "testdata", "fixture")
	runDir := filepath.Join(t.TempDir(), "run")
	unlock, err := verify.LockRunDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(runDir, "summary.json")
	const theirs = "the other verify's summary\n"
	if err := os.WriteFile(summary, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--gold", "--dataset", filepath.Join(fx, "dataset.jsonl"), "--specs", filepath.Join(fx, "specs.json"),
		"--instance", "fixture__textutil-2", "--platform", "linux/arm64", "--images", "127.0.0.1:1/none",
		"--builder", "unix:///nonexistent/buildkitd.sock", "--run-dir", runDir}
	var stdout, stderr bytes.Buffer
	err = runVerify(context.Background(), args, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), runDir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("verify with a run directory in use: err = %v, want one naming %s as in use\n%s", err, runDir, stderr.String())
	}
	if b, _ := os.ReadFile(summary); string(b) != theirs {
		t.Errorf("the other verify's summary was overwritten: %q", b)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if err := runVerify(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("verify after the run directory was released: %v\n%s", err, stderr.String())
	}
	if _, err := verify.ReadSummary(summary); err != nil {
		t.Error(err)
	}
}
