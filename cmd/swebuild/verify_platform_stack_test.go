package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/verify"
)

// TestVerifyHostPlatformAndAbsentImage: the shared fixture build published
// without fixture__calc-2's images; `verify --gold --images REPO` with no
// --platform on an amd64 host runs linux/amd64 only (nothing emulated), and
// fixture__calc-2, whose image the repository does not have, comes out
// image_absent while fixture__calc-1 still runs and resolves; the exit is
// non-zero. Asked for linux/arm64 (thorough tier), verify says the platform
// is emulated through QEMU and its result records it.
func TestVerifyHostPlatformAndAbsentImage(t *testing.T) {
	if host, err := core.HostPlatform(); err != nil || host != core.AMD64 {
		t.Skipf("this test is about an amd64 host (host: %v, %v)", host, err)
	}
	f, built := sharedFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	const present, absent = "fixture__calc-1", "fixture__calc-2"

	// Publish every record but the absent instance's.
	recs, err := core.ReadFile(built.MetadataFile)
	if err != nil {
		t.Fatal(err)
	}
	var kept []core.Image
	for _, r := range recs {
		if r.InstanceID != absent {
			kept = append(kept, r)
		}
	}
	md := filepath.Join(tmp, "metadata.jsonl")
	if err := core.WriteFile(md, kept); err != nil {
		t.Fatal(err)
	}
	repo := f.reg + "/swebuild-test/verify-host-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var stdout, stderr bytes.Buffer
	if err := runPublish(ctx, []string{"--metadata-file", md, "--repo", repo, "--unsigned", "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	}

	verifyRun := func(name string, extra ...string) (*verify.Summary, string, string, error) {
		stdout.Reset()
		stderr.Reset()
		sumFile := filepath.Join(tmp, name+".json")
		args := append([]string{"--gold", "--dataset", f.dataset, "--specs", f.specs, "--images", repo,
			"--run-dir", filepath.Join(tmp, name), "--summary", sumFile, "--timeout", "10m"}, extra...)
		err := runVerify(ctx, args, &stdout, &stderr)
		t.Logf("verify %s:\n%s\n%s", strings.Join(extra, " "), stdout.String(), tail(stderr.String(), 3000))
		sum, rerr := verify.ReadSummary(sumFile)
		if rerr != nil {
			t.Fatalf("verify %s: %v; summary: %v", name, err, rerr)
		}
		return sum, stdout.String(), stderr.String(), err
	}

	// 1. No --platform: the host's (linux/amd64) only.
	sum, out, log, err := verifyRun("default", "--instance", present, "--instance", absent)
	if err == nil {
		t.Error("verify with an absent image: exit zero")
	}
	got := map[string]verify.Result{}
	for _, r := range sum.Results {
		got[r.InstanceID+" "+r.Platform.String()] = r
		if r.Platform != core.AMD64 || r.Emulated {
			t.Errorf("%s: ran on %s (emulated %v) with no --platform on an amd64 host", r.InstanceID, r.Platform, r.Emulated)
		}
	}
	if len(sum.Results) != 2 {
		t.Errorf("%d results, want 2 (one per instance, linux/amd64)", len(sum.Results))
	}
	if r := got[present+" linux/amd64"]; !r.Resolved || !r.OK() || len(r.Runs) != 1 {
		t.Errorf("%s: resolved %v, ok %v, %d runs (%s); want resolved in its one run", present, r.Resolved, r.OK(), len(r.Runs), r.Why())
	}
	if r := got[absent+" linux/amd64"]; r.Failure != verify.FailureImageAbsent || r.OK() || len(r.Runs) != 0 || !strings.Contains(r.Error, "sweb.eval.x86_64.fixture_1776_calc-2") {
		t.Errorf("%s: failure %q, ok %v, %d runs, error %q; want %s naming its image, nothing run", absent, r.Failure, r.OK(), len(r.Runs), r.Error, verify.FailureImageAbsent)
	}
	if !strings.Contains(out, absent+" linux/amd64 gold: "+verify.FailureImageAbsent) {
		t.Errorf("the summary on stdout does not name %s as %s", absent, verify.FailureImageAbsent)
	}
	if strings.Contains(log, "QEMU") {
		t.Error("a host-platform run was said to be emulated")
	}

	// 2. linux/arm64 only when asked, said to be emulated.
	t.Run("arm64 asked", func(t *testing.T) {
		stacktest.Thorough(t)
		sum, _, log, err := verifyRun("arm64", "--instance", present, "--platform", "linux/arm64")
		if err != nil {
			t.Fatalf("verify --platform linux/arm64: %v", err)
		}
		if len(sum.Results) != 1 || sum.Results[0].Platform != core.ARM64 || !sum.Results[0].Emulated || !sum.Results[0].OK() {
			t.Errorf("results %+v, want one linux/arm64 result, ok and emulated", sum.Results)
		}
		if !strings.Contains(log, "linux/arm64 is not this host's platform (linux/amd64): its runs are emulated through QEMU") {
			t.Error("verify did not say linux/arm64 is emulated")
		}
	})
}
