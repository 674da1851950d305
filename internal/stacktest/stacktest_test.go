package stacktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder stands in for *testing.T to observe Skipf/Fatalf; other methods
// of the embedded nil testing.TB must not be called.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestRequire(t *testing.T) {
	tests := []struct {
		name                   string
		buildkit, registry, ci string
		wantSkip, wantFail     bool
	}{
		{name: "both set", buildkit: "unix:///run/swebuild/buildkitd.sock", registry: "127.0.0.1:5000"},
		{name: "both set under CI", buildkit: "tcp://127.0.0.1:1234", registry: "localhost:5000", ci: "true"},
		{name: "unset skips", wantSkip: true},
		{name: "registry unset skips", buildkit: "unix:///x.sock", wantSkip: true},
		{name: "unset under CI fails", ci: "1", wantFail: true},
		{name: "buildkit unset under CI fails", registry: "127.0.0.1:5000", ci: "true", wantFail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvBuildkitHost, tc.buildkit)
			t.Setenv(EnvRegistry, tc.registry)
			t.Setenv(EnvCI, tc.ci)
			r := &recorder{}
			got := Require(r)
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			if !tc.wantSkip && !tc.wantFail && (got.BuildkitHost != tc.buildkit || got.Registry != tc.registry) {
				t.Errorf("got %+v, want %q and %q", got, tc.buildkit, tc.registry)
			}
		})
	}
}

func TestRootfsMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv(EnvCache, t.TempDir())
			t.Setenv(EnvCI, ci)
			r := &recorder{}
			Rootfs(r)
			if ci == "" && (r.skipped == "" || r.failed != "") {
				t.Errorf("want a skip, got skipped %q failed %q", r.skipped, r.failed)
			}
			if ci != "" && r.failed == "" {
				t.Errorf("want a failure under CI, got skipped %q", r.skipped)
			}
		})
	}
}

// TestRootfsBase: with every tarball in the cache, the base Dockerfile adds
// the arch's Python rootfs to scratch and its context file is that tarball;
// with none there, the test is skipped as Rootfs skips it.
func TestRootfsBase(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(EnvCache, cache)
	t.Setenv(EnvCI, "")
	r := &recorder{}
	RootfsBase(r, "amd64")
	if r.skipped == "" || r.failed != "" {
		t.Errorf("no tarballs: want a skip, got skipped %q failed %q", r.skipped, r.failed)
	}
	dir := filepath.Join(cache, "rootfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"rootfs-amd64.tar", "rootfs-arm64.tar", "rootfs-js-amd64.tar", "rootfs-js-arm64.tar"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		df, files := RootfsBase(t, arch)
		want := "rootfs-" + arch + ".tar"
		if string(df) != "FROM scratch\nADD "+want+" /\n" || len(files) != 1 || files[want] != filepath.Join(dir, want) {
			t.Errorf("%s: Dockerfile %q, context files %v; want ADD %s from %s", arch, df, files, want, dir)
		}
	}
}

func TestRequireAuth(t *testing.T) {
	for _, tc := range []struct {
		name, reg, cfg, ci string
		wantSkip, wantFail bool
	}{
		{name: "both set", reg: "127.0.0.1:5001", cfg: "/var/lib/swebuild/docker-config"},
		{name: "config unset skips", reg: "127.0.0.1:5001", wantSkip: true},
		{name: "registry unset under CI fails", cfg: "/d", ci: "true", wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvBuildkitHost, "unix:///x.sock")
			t.Setenv(EnvRegistry, "127.0.0.1:5000")
			t.Setenv(EnvAuthRegistry, tc.reg)
			t.Setenv(EnvDockerConfig, tc.cfg)
			t.Setenv(EnvCI, tc.ci)
			r := &recorder{}
			got := RequireAuth(r)
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			if !tc.wantSkip && !tc.wantFail && (got.AuthRegistry != tc.reg || got.DockerConfig != tc.cfg) {
				t.Errorf("got %+v", got)
			}
		})
	}
}

// TestRequireBuildFixture: the dataset and specs files exist, the context
// directories are the rootfs tarballs' and one holding the fixture's bare
// mirrors under mirror/. Skips without the rootfs tarballs (fails under CI).
func TestRequireBuildFixture(t *testing.T) {
	fx := RequireBuildFixture(context.Background(), t)
	for _, f := range []string{fx.Dataset, fx.Specs} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if len(fx.ContextDirs) != 2 {
		t.Fatalf("context directories %q, want the rootfs one and the mirrors' one", fx.ContextDirs)
	}
	if _, err := os.Stat(filepath.Join(fx.ContextDirs[0], RootfsTarName("amd64"))); err != nil {
		t.Error(err)
	}
	for _, project := range []string{"calc", "textutil"} {
		if _, err := os.Stat(filepath.Join(fx.ContextDirs[1], "mirror", project+".git", "HEAD")); err != nil {
			t.Error(err)
		}
	}
}

// TestCachedTool: an executable in the cache's bin directory is found
// before PATH; a non-executable file there is not a tool; with neither, the
// test is skipped, or fails under CI, naming the install script.
func TestCachedTool(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	onPath := t.TempDir()
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(bin, "cached"), 0o755},
		{filepath.Join(bin, "plain"), 0o644},
		{filepath.Join(onPath, "plain"), 0o755},
		{filepath.Join(onPath, "cached"), 0o755},
	} {
		if err := os.WriteFile(f.path, []byte("#!/bin/sh\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvCache, cache)
	t.Setenv("PATH", onPath)
	for _, tc := range []struct {
		name, tool, ci, want string
		skip, fail           bool
	}{
		{name: "cached", tool: "cached", want: filepath.Join(bin, "cached")},
		{name: "not executable in the cache", tool: "plain", want: filepath.Join(onPath, "plain")},
		{name: "missing", tool: "none", skip: true},
		{name: "missing under CI", tool: "none", ci: "true", fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvCI, tc.ci)
			r := &recorder{}
			got := CachedTool(r, tc.tool, "scripts/install-none.sh")
			if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.skip, tc.fail)
			}
			if msg := r.skipped + r.failed; (tc.skip || tc.fail) && !strings.Contains(msg, "scripts/install-none.sh") {
				t.Errorf("%q does not name the install script", msg)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
