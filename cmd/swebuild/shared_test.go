package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// fixture is the offline fixture built with `swebuild build --push` for
// linux/amd64 and linux/arm64 once per test binary, for the tests that need
// its images and do not test the build itself.
var fixture stacktest.SharedBuild

func TestMain(m *testing.M) { stacktest.Main(m, &fixture) }

// sharedFixture returns the fixture's inputs as a fixtureStack and its
// shared build (stacktest.SharedBuild: skips, or fails under CI, without the
// stack).
func sharedFixture(t *testing.T) (fixtureStack, stacktest.Built) {
	t.Helper()
	built := fixture.Get(t, func(ctx context.Context, tb testing.TB, fx stacktest.BuildFixture, st stacktest.Stack, repo, md string) error {
		args := []string{"--dataset", fx.Dataset, "--specs", fx.Specs, "--platform", "linux/amd64,linux/arm64", "--push", repo,
			"--metadata-file", md, "--run-dir", filepath.Join(filepath.Dir(md), "build"), "--progress", "quiet"}
		for _, d := range fx.ContextDirs {
			args = append(args, "--context-dir", d)
		}
		var stdout, stderr bytes.Buffer
		err := runBuild(ctx, args, &stdout, &stderr)
		tb.Logf("swebuild build %s:\n%s\n%s", strings.Join(args, " "), stdout.String(), tail(stderr.String(), 3000))
		return err
	})
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return fixtureStack{root: root, dataset: built.Dataset, specs: built.Specs, rootfs: built.ContextDirs[0], ctxDir: built.ContextDirs[1],
		reg: built.Stack.Registry}, built
}

// TestBuildFixtureBothPlatforms is make test's build stage: the fixture's
// plan built once for linux/amd64 and linux/arm64 (the shared build, through
// `swebuild build --push`) gives a record per image, every one built and
// pushed by digest: the py and js bases and the two envs (the Python projects
// share one) per platform, the 7 instances on linux/amd64 and 6 on
// linux/arm64 (fixture__textutil-2 is x86-only), each on its key's arch.
func TestBuildFixtureBothPlatforms(t *testing.T) {
	_, built := sharedFixture(t)
	count := map[string]int{}
	for _, r := range built.Records {
		count[string(r.Kind)+" "+r.Platform.String()]++
		if r.Status != core.StatusBuilt || !strings.HasPrefix(r.Ref, built.Repo+"@sha256:") || r.Ref != built.Repo+"@"+r.Digest.String() {
			t.Errorf("%s %s: status %s, digest %s, ref %q; want built and pushed by digest to %s", r.Key, r.Platform, r.Status, r.Digest, r.Ref, built.Repo)
		}
		if arch := map[core.Platform]string{core.AMD64: ".x86_64", core.ARM64: ".arm64"}[r.Platform]; !strings.Contains(r.Key, arch+".") && !strings.Contains(r.Key, arch+":") {
			t.Errorf("%s built for %s", r.Key, r.Platform)
		}
		if r.InstanceID == "fixture__textutil-2" && r.Platform == core.ARM64 {
			t.Errorf("x86-only fixture__textutil-2 built for linux/arm64")
		}
	}
	want := map[string]int{
		"base linux/amd64": 2, "base linux/arm64": 2, "env linux/amd64": 2, "env linux/arm64": 2,
		"instance linux/amd64": 7, "instance linux/arm64": 6,
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("records by kind and platform %v, want %v", count, want)
	}
}

// TestPublishCheckFixture is make test's publish stage: the shared build's
// instance images published under a repository of this run, then `swebuild
// check` finds every name the plan calls for (7 indexes, 7 linux/amd64 and 6
// linux/arm64 per-arch names, fixture__textutil-2 being x86-only), and the
// digests it reads back are the ones the build pushed.
func TestPublishCheckFixture(t *testing.T) {
	f, built := sharedFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	repo := f.reg + "/swebuild-test/publish-check-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var stdout, stderr bytes.Buffer
	if err := runPublish(ctx, []string{"--metadata-file", built.MetadataFile, "--repo", repo, "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	}
	t.Logf("publish:\n%s", stdout.String())
	stdout.Reset()
	stderr.Reset()
	digests := filepath.Join(tmp, "digests.jsonl")
	if err := runCheck(ctx, []string{"--dataset", f.dataset, "--specs", f.specs, "--repo", repo, "--digests", digests}, &stdout, &stderr); err != nil {
		t.Fatalf("check: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "20/20 images present (7 instances)") {
		t.Errorf("check:\n%s", stdout.String())
	}
	b, err := os.ReadFile(digests)
	if err != nil {
		t.Fatal(err)
	}
	pushed := map[string]digest.Digest{} // instance@platform -> digest
	for _, r := range built.Records {
		if r.Kind == core.KindInstance {
			pushed[r.InstanceID+"@"+r.Platform.String()] = r.Digest
		}
	}
	found := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d struct {
			InstanceID string            `json:"instance_id"`
			Index      string            `json:"index"`
			Platforms  map[string]string `json:"platforms"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("%s: %v", digests, err)
		}
		if d.Index == "" {
			t.Errorf("%s: no index digest", d.InstanceID)
		}
		for p, dg := range d.Platforms {
			found++
			if want := pushed[d.InstanceID+"@"+p]; dg != want.String() {
				t.Errorf("%s %s: published %s, built %s", d.InstanceID, p, dg, want)
			}
		}
	}
	if found != len(pushed) {
		t.Errorf("%d per-arch digests read back, %d built", found, len(pushed))
	}
}
