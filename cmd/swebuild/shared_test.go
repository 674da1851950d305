package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

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
