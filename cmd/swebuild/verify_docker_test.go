package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/verify"
)

// TestVerifyEngineDockerStack: fixture images built and published here (a
// Python and a JavaScript instance, linux/amd64 and linux/arm64 under QEMU)
// are verified with --gold --control by both engines, BuildKit and the
// stack's Docker daemon: gold resolves and control does not on every
// platform, and every run's report.json is byte-identical between the two
// engines. The docker command pulls each published index for both platforms
// and gets the image of that platform.
func TestVerifyEngineDockerStack(t *testing.T) {
	stacktest.Thorough(t)
	f := newFixtureStack(t)
	dockerHost := stacktest.RequireDocker(t)
	docker := stacktest.DockerCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	ids := []string{"fixture__calc-1", "fixture__semver-1"}
	platforms := []string{"linux/amd64", "linux/arm64"}
	pub := f.reg + "/swebuild-test/verify-docker"
	var only []string
	for _, id := range ids {
		only = append(only, "--instance", id)
	}
	buildArgs := append([]string{"--platform", strings.Join(platforms, ","), "--publish", pub, "--unsigned", "--ledger", filepath.Join(tmp, "ledger.jsonl")}, only...)
	if _, err := f.build(t, ctx, f.dataset, f.reg+"/swebuild-test/verify-docker-staging", filepath.Join(tmp, "metadata.jsonl"), buildArgs...); err != nil {
		t.Fatalf("building and publishing the fixture: %v", err)
	}

	type key struct{ mode, id, platform string }
	results := map[string]map[key]verify.Result{}
	for _, engine := range []string{"buildkit", "docker"} {
		args := append([]string{"--gold", "--control", "--engine", engine, "--dataset", f.dataset, "--specs", f.specs, "--images", pub,
			"--platform", strings.Join(platforms, ","), "--run-dir", filepath.Join(tmp, engine), "--timeout", "10m"}, only...)
		if engine == "docker" {
			args = append(args, "--docker-host", dockerHost)
		}
		var stdout, stderr bytes.Buffer
		start := time.Now()
		err := runVerify(ctx, args, &stdout, &stderr)
		t.Logf("verify --engine %s (%.0fs):\n%s\n%s", engine, time.Since(start).Seconds(), stdout.String(), tail(stderr.String(), 3000))
		if err != nil {
			t.Fatalf("verify --engine %s: %v", engine, err)
		}
		sum, err := verify.ReadSummary(filepath.Join(tmp, engine, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		results[engine] = map[key]verify.Result{}
		for _, r := range sum.Results {
			results[engine][key{r.Mode, r.InstanceID, r.Platform.String()}] = r
		}
	}

	compared := 0
	for _, id := range ids {
		for _, p := range platforms {
			for _, mode := range []string{verify.ModeGold, verify.ModeControl} {
				k := key{mode, id, p}
				var reports [2][]byte
				for i, engine := range []string{"buildkit", "docker"} {
					r, ok := results[engine][k]
					if !ok {
						t.Errorf("%s: no %s result for %s on %s", engine, mode, id, p)
						continue
					}
					wantResolved := mode == verify.ModeGold
					if !r.OK() || r.Resolved != wantResolved || r.Leak.Leaked() {
						t.Errorf("%s %s %s %s: resolved %v ok %v (%s), want resolved %v", engine, mode, id, p, r.Resolved, r.OK(), r.Why(), wantResolved)
					}
					b, err := os.ReadFile(filepath.Join(r.Dir, "report.json"))
					if err != nil {
						t.Errorf("%s %s %s %s: %v", engine, mode, id, p, err)
						continue
					}
					reports[i] = b
				}
				if reports[0] == nil || reports[1] == nil {
					continue
				}
				if !bytes.Equal(reports[0], reports[1]) {
					t.Errorf("%s %s %s: report.json differs between the engines:\nbuildkit: %s\ndocker:   %s", mode, id, p, reports[0], reports[1])
					continue
				}
				compared++
			}
		}
	}
	t.Logf("report.json byte-identical between BuildKit and Docker for %d of %d runs", compared, len(ids)*len(platforms)*2)

	// The docker command pulls each published index for each platform.
	namer := manifests.Namer{Repo: pub}
	for _, id := range ids {
		ref := namer.IndexRepo(id) + ":latest"
		for _, p := range platforms {
			out, err := exec.CommandContext(ctx, docker, "--host", dockerHost, "pull", "--quiet", "--platform", p, ref).CombinedOutput()
			if err != nil {
				t.Errorf("docker pull --platform %s %s: %v\n%s", p, ref, err, out)
				continue
			}
			out, err = exec.CommandContext(ctx, docker, "--host", dockerHost, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", ref).CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != p {
				t.Errorf("docker pull --platform %s %s gave an image of %q (%v)", p, ref, got, err)
			}
		}
	}
}
