package stacktest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
func (r *recorder) Logf(string, ...any)               {}

// fakeBuildKit serves gRPC health (SERVING, as buildkitd does) on a unix
// socket and returns its address, unix:///PATH.
func fakeBuildKit(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "stacktest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "buildkitd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

// fakeRegistry answers /v2/ with 200, or, given a user and password, with 401
// unless the request carries them (Basic), as the stack's login registry.
func fakeRegistry(t *testing.T, user, password string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/" {
			http.NotFound(w, r)
			return
		}
		if u, p, ok := r.BasicAuth(); user != "" && (!ok || u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRequire(t *testing.T) {
	buildkit, registry := fakeBuildKit(t), fakeRegistry(t, "", "")
	notRegistry := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notRegistry.Close)
	tests := []struct {
		name                   string
		buildkit, registry, ci string
		wantSkip, wantFail     bool
	}{
		{name: "both answer", buildkit: buildkit, registry: registry},
		{name: "both answer under CI", buildkit: buildkit, registry: registry, ci: "true"},
		{name: "unset skips", wantSkip: true},
		{name: "registry unset skips", buildkit: buildkit, wantSkip: true},
		{name: "unset under CI fails", ci: "1", wantFail: true},
		{name: "buildkit unset under CI fails", registry: registry, ci: "true", wantFail: true},
		{name: "no daemon on the socket skips", buildkit: "unix://" + filepath.Join(t.TempDir(), "none.sock"), registry: registry, wantSkip: true},
		{name: "no daemon on the socket under CI fails", buildkit: "unix://" + filepath.Join(t.TempDir(), "none.sock"), registry: registry, ci: "true", wantFail: true},
		{name: "not a registry skips", buildkit: buildkit, registry: strings.TrimPrefix(notRegistry.URL, "http://"), wantSkip: true},
		{name: "unprobed scheme skips", buildkit: "docker-container://buildkitd", registry: registry, wantSkip: true},
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

// TestThorough: under -short the test is skipped (the thorough tier); the
// flag is the test binary's, so only the branch this run takes is checked.
func TestThorough(t *testing.T) {
	r := &recorder{}
	Thorough(skipRecorder{r})
	if testing.Short() != (r.skipped != "") {
		t.Errorf("-short %v, skipped %q", testing.Short(), r.skipped)
	}
}

// skipRecorder records Skip as the recorder records Skipf.
type skipRecorder struct{ *recorder }

func (s skipRecorder) Skip(args ...any) { s.skipped = fmt.Sprint(args...) }

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
	buildkit, registry := fakeBuildKit(t), fakeRegistry(t, "", "")
	login := fakeRegistry(t, "swebuild", "s3cret")
	config := func(host, user, password string) string {
		dir := t.TempDir()
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		b := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, reg, cfg, ci string
		wantSkip, wantFail bool
	}{
		{name: "login accepted", reg: login, cfg: config(login, "swebuild", "s3cret")},
		{name: "config unset skips", reg: login, wantSkip: true},
		{name: "registry unset under CI fails", cfg: "/d", ci: "true", wantFail: true},
		{name: "wrong password skips", reg: login, cfg: config(login, "swebuild", "nope"), wantSkip: true},
		{name: "login for another host under CI fails", reg: login, cfg: config("127.0.0.1:1", "swebuild", "s3cret"), ci: "true", wantFail: true},
		{name: "a registry without a login skips", reg: registry, cfg: config(registry, "swebuild", "s3cret"), wantSkip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvBuildkitHost, buildkit)
			t.Setenv(EnvRegistry, registry)
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

// TestRequireDocker: a daemon answering /_ping on its socket is handed out;
// none there skips (fails under CI).
func TestRequireDocker(t *testing.T) {
	dir, err := os.MkdirTemp("", "stacktest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_ping" {
			_, _ = w.Write([]byte("OK"))
			return
		}
		http.NotFound(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for _, tc := range []struct {
		name, host, ci     string
		wantSkip, wantFail bool
	}{
		{name: "answers", host: "unix://" + sock},
		{name: "unset skips", wantSkip: true},
		{name: "nothing there under CI fails", host: "unix://" + filepath.Join(dir, "none.sock"), ci: "true", wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDockerHost, tc.host)
			t.Setenv(EnvCI, tc.ci)
			r := &recorder{}
			got := RequireDocker(r)
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			if !tc.wantSkip && !tc.wantFail && got != tc.host {
				t.Errorf("got %q, want %q", got, tc.host)
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

// TestSharedBuild: the build function runs once for every Get of one
// SharedBuild, on the fixture's inputs, and each Get returns the records it
// wrote; Close removes its directory; a failed build fails every later Get.
func TestSharedBuild(t *testing.T) {
	// The machine's fixture mirrors, seen from a cache of fake rootfs
	// tarballs.
	mirrors, err := FixtureContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := os.Symlink(filepath.Dir(mirrors), filepath.Join(cache, "fixture-context")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"rootfs-amd64.tar", "rootfs-arm64.tar", "rootfs-js-amd64.tar", "rootfs-js-arm64.tar"} {
		if err := os.WriteFile(filepath.Join(cache, "rootfs", f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvCache, cache)
	t.Setenv(EnvBuildkitHost, fakeBuildKit(t))
	t.Setenv(EnvRegistry, fakeRegistry(t, "", ""))
	t.Setenv(EnvCI, "")

	var s SharedBuild
	calls := 0
	build := func(ctx context.Context, tb testing.TB, fx BuildFixture, st Stack, repo, md string) error {
		calls++
		if _, err := os.Stat(filepath.Join(fx.ContextDirs[1], "mirror", "calc.git", "HEAD")); err != nil {
			return err
		}
		if fx.ContextDirs[0] != filepath.Join(cache, "rootfs") || repo != st.Registry+"/swebuild-test/shared-fixture" {
			return fmt.Errorf("context dirs %q, repo %q", fx.ContextDirs, repo)
		}
		return os.WriteFile(md, []byte(`{"kind":"base","key":"sweb.base.fixture.x86_64","platform":"linux/amd64","digest":"sha256:`+strings.Repeat("a", 64)+`","ref":"`+repo+`@sha256:`+strings.Repeat("a", 64)+`","status":"built"}`+"\n"), 0o644)
	}
	a := s.Get(t, build)
	b := s.Get(t, func(context.Context, testing.TB, BuildFixture, Stack, string, string) error {
		return fmt.Errorf("a second build ran")
	})
	if calls != 1 || len(a.Records) != 1 || len(b.Records) != 1 || a.MetadataFile != b.MetadataFile {
		t.Fatalf("%d builds; records %v and %v", calls, a.Records, b.Records)
	}
	dir := filepath.Dir(a.MetadataFile)
	s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Close, %s: %v", dir, err)
	}

	var failed SharedBuild
	for i := 0; i < 2; i++ {
		r := &recorder{}
		failed.Get(r, func(context.Context, testing.TB, BuildFixture, Stack, string, string) error {
			return fmt.Errorf("no daemon today")
		})
		if !strings.Contains(r.failed, "no daemon today") {
			t.Errorf("Get %d: failed %q, want the build's error", i, r.failed)
		}
	}
	failed.Close()
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
