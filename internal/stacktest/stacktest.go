// Package stacktest is the one door of the tests that need the local build
// stack started by scripts/stack.sh (BuildKit, the registries, the Docker
// daemon, QEMU), the cached fixture rootfs tarballs, the offline fixture's git
// repositories or a program the stack installs; and the rule of the two test
// tiers.
//
// The tiers: `make test` runs `go test -short` (vet, unit and golden tests,
// and one end-to-end test per stage on the real stack); `make test-all` runs
// every test. A test that belongs to the thorough tier only (pools,
// reproducibility, faults, attacks, the second and later end-to-end tests of a
// stage) calls Thorough first, which skips it under -short. Every other test
// runs in both tiers.
//
// The stack rule: a door (Require, RequireAuth, RequireDocker, Rootfs,
// RequireBuildFixture, LookPath, ...) probes the part it hands out (BuildKit
// answers its gRPC health check, a registry answers /v2/, the Docker daemon
// /_ping; once per test binary) instead of trusting that a variable is set.
// When something a test needs is missing or does not answer, the test is
// skipped, unless the environment variable CI is set, in which case it fails.
package stacktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables read by this package.
const (
	EnvBuildkitHost = "BUILDKIT_HOST"     // e.g. unix:///run/swebuild/buildkitd.sock
	EnvRegistry     = "SWEBUILD_REGISTRY" // e.g. 127.0.0.1:5000
	EnvCache        = "SWEBUILD_CACHE"    // default $HOME/.cache/swebuild
	EnvPython       = "SWEBUILD_PYTHON"   // default /usr/bin/python3 (Debian's, with python3-pytest)
	EnvNode         = "SWEBUILD_NODE"     // default node on PATH (Debian's nodejs, 18 or later)
	EnvCI           = "CI"
	// EnvAuthRegistry is the stack's registry that requires a login
	// (host:port, plain HTTP); EnvDockerConfig the directory of the
	// config.json holding that login (scripts/stack.sh env prints both).
	EnvAuthRegistry = "SWEBUILD_AUTH_REGISTRY"
	EnvDockerConfig = "DOCKER_CONFIG"
)

// Stack holds the addresses of the running local stack.
type Stack struct {
	// BuildkitHost is the BuildKit daemon address (BUILDKIT_HOST).
	BuildkitHost string
	// Registry is the registry host:port (SWEBUILD_REGISTRY), plain HTTP.
	Registry string
}

// missing skips t, or fails it when CI is set.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(EnvCI) != "" {
		t.Fatalf("%s (CI is set, so this is a failure; start it with: scripts/stack.sh up && eval \"$(scripts/stack.sh env)\")", msg)
		return
	}
	t.Skipf("%s (run scripts/stack.sh up && eval \"$(scripts/stack.sh env)\")", msg)
}

// LookPath returns the path of the program name, which the stack's scripts
// install (scripts/stack.sh: skopeo, ...); when it is not found the test is
// skipped, or fails if CI is set.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s not installed", name)
	}
	return p
}

// CachedTool returns the path of a program a project script installs into
// the swebuild cache's bin directory (scripts/install-cosign.sh:
// $SWEBUILD_CACHE/bin/cosign), else the one on PATH; when neither exists
// the test is skipped, or fails if CI is set, naming the script.
func CachedTool(t testing.TB, name, script string) string {
	t.Helper()
	if cache, err := CacheDir(); err == nil {
		p := filepath.Join(cache, "bin", name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s not installed (install it with %s)", name, script)
	}
	return p
}

// Thorough marks a test of the thorough tier (make test-all): under -short
// (make test) it is skipped. Call it first in the test.
func Thorough(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("thorough tier: runs in make test-all, not under -short (make test)")
	}
}

// Require returns the stack addresses from BUILDKIT_HOST and SWEBUILD_REGISTRY
// once BuildKit answers its health check there and the registry /v2/. When
// either is unset or does not answer, the test is skipped, or fails if CI is
// set.
func Require(t testing.TB) Stack {
	t.Helper()
	s := Stack{BuildkitHost: os.Getenv(EnvBuildkitHost), Registry: os.Getenv(EnvRegistry)}
	if u := unset([2]string{EnvBuildkitHost, s.BuildkitHost}, [2]string{EnvRegistry, s.Registry}); u != "" {
		missing(t, "local stack not configured: %s unset", u)
		return s
	}
	if err := probeOnce("buildkit "+s.BuildkitHost, func(ctx context.Context) error { return probeBuildKit(ctx, s.BuildkitHost) }); err != nil {
		missing(t, "the stack's BuildKit (%s) does not answer: %v", EnvBuildkitHost, err)
		return s
	}
	if err := probeOnce("registry "+s.Registry, func(ctx context.Context) error { return probeRegistry(ctx, s.Registry, http.StatusOK) }); err != nil {
		missing(t, "the stack's registry (%s) does not answer: %v", EnvRegistry, err)
	}
	return s
}

// AuthStack is the stack's login registry and where its login is kept.
type AuthStack struct {
	Stack
	// AuthRegistry is the host:port of the registry that requires a
	// login; DockerConfig the directory whose config.json holds it.
	AuthRegistry, DockerConfig string
}

// RequireAuth is Require plus SWEBUILD_AUTH_REGISTRY and DOCKER_CONFIG: the
// login registry refuses /v2/ without credentials and answers it with the
// login DOCKER_CONFIG's config.json holds for it. The same rule when one is
// unset or does not answer (skip, or fail under CI).
func RequireAuth(t testing.TB) AuthStack {
	t.Helper()
	s := AuthStack{Stack: Require(t), AuthRegistry: os.Getenv(EnvAuthRegistry), DockerConfig: os.Getenv(EnvDockerConfig)}
	if u := unset([2]string{EnvAuthRegistry, s.AuthRegistry}, [2]string{EnvDockerConfig, s.DockerConfig}); u != "" {
		missing(t, "the stack's login registry is not configured: %s unset", u)
		return s
	}
	if err := probeOnce("login "+s.AuthRegistry+" "+s.DockerConfig, func(ctx context.Context) error { return probeLogin(ctx, s.AuthRegistry, s.DockerConfig) }); err != nil {
		missing(t, "the stack's login registry (%s, %s) does not answer as it should: %v", EnvAuthRegistry, EnvDockerConfig, err)
	}
	return s
}

// CacheDir returns ${SWEBUILD_CACHE:-$HOME/.cache/swebuild}.
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locating the swebuild cache: %w", err)
	}
	return filepath.Join(home, ".cache", "swebuild"), nil
}

// rootfsArches are the architectures scripts/fixture.sh rootfs builds, as
// Docker TARGETARCH names, and rootfsFlavours its flavours (one per fixture
// profile language).
var (
	rootfsArches   = []string{"amd64", "arm64"}
	rootfsFlavours = []string{"py", "js"}
)

// RootfsTarName is the file name of the Python flavour's rootfs tarball (bash,
// git, python3 with pytest) for a TARGETARCH.
func RootfsTarName(arch string) string { return RootfsFlavourTarName("py", arch) }

// RootfsFlavourTarName is the file name of the rootfs tarball of a flavour
// ("py", "js") for a TARGETARCH, as scripts/fixture.sh names it.
func RootfsFlavourTarName(flavour, arch string) string {
	if flavour == "py" {
		return "rootfs-" + arch + ".tar"
	}
	return "rootfs-" + flavour + "-" + arch + ".tar"
}

// Rootfs returns the directory holding the rootfs tarballs of every flavour
// and arch (made by scripts/fixture.sh rootfs). When a tarball is missing the
// test is skipped, or fails if CI is set.
func Rootfs(t testing.TB) string {
	t.Helper()
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "rootfs")
	for _, flavour := range rootfsFlavours {
		for _, arch := range rootfsArches {
			p := filepath.Join(dir, RootfsFlavourTarName(flavour, arch))
			if _, err := os.Stat(p); err != nil {
				missing(t, "fixture rootfs %s: %v (build it with scripts/fixture.sh rootfs)", p, err)
				return dir
			}
		}
	}
	return dir
}

// RootfsBase returns what a base image made of the Python flavour's rootfs
// for arch needs (Rootfs's rules when the tarball is missing): a Dockerfile
// that adds the tarball to scratch, and the context file it adds, by its
// name in the context.
func RootfsBase(t testing.TB, arch string) (dockerfile []byte, contextFiles map[string]string) {
	t.Helper()
	tar := RootfsTarName(arch)
	return []byte("FROM scratch\nADD " + tar + " /\n"), map[string]string{tar: filepath.Join(Rootfs(t), tar)}
}

// ModuleRoot returns the directory holding the swebuild go.mod, searching
// upwards from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// FixtureDir returns testdata/fixture of the module.
func FixtureDir(t testing.TB) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "fixture")
}

// BuildFixture is what a test that builds the offline fixture on the stack
// starts from: the fixture's dataset and specs files and the directories its
// build contexts come from.
type BuildFixture struct {
	Dataset, Specs string
	// ContextDirs are the rootfs tarballs' directory (Rootfs) and the
	// directory holding the fixture's git mirrors under mirror/
	// (FixtureContext), in that order.
	ContextDirs []string
}

// RequireBuildFixture returns the BuildFixture. A missing rootfs tarball
// skips the test (fails it under CI) as Rootfs does; mirrors that cannot be
// made fail it.
func RequireBuildFixture(ctx context.Context, t testing.TB) BuildFixture {
	t.Helper()
	rootfs := Rootfs(t)
	fixture := FixtureDir(t)
	ctxDir, err := FixtureContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return BuildFixture{
		Dataset:     filepath.Join(fixture, "dataset.jsonl"),
		Specs:       filepath.Join(fixture, "specs.json"),
		ContextDirs: []string{rootfs, ctxDir},
	}
}

// FixtureContext returns the build context directory holding the fixture's
// git mirrors under mirror/, made once per machine and version of the
// fixture in the cache and shared by every test, test binary and the demo
// after that (scripts/fixture.sh context). BuildKit keys a build's local
// context by its directory: mirrors made afresh in each test's temporary
// directory, identical byte for byte, still missed the daemon's cache, so
// every test built the fixture's instance images again (textutil-3 on amd64
// from two fresh mirror directories: not cached either time, 37 s and 50 s).
// Builds only read the mirrors (bind mounts); tests that change a
// repository use FixtureRepos.
func FixtureContext(ctx context.Context) (string, error) {
	out, err := RunFixtureScript(ctx, "context")
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if _, err := os.Stat(filepath.Join(dir, "mirror")); err != nil {
		return "", fmt.Errorf("scripts/fixture.sh context: %w", err)
	}
	return dir, nil
}

// Repos locates the fixture repositories made by scripts/fixture.sh repos.
type Repos struct {
	// Dir holds, per project, <name>/ (work tree at the last commit),
	// <name>.git (bare mirror, mounted by builds at /mirror/<name>.git) and
	// <name>.commits.
	Dir string
}

// Mirror returns the bare mirror path of a project ("calc", "textutil").
func (r Repos) Mirror(project string) string { return filepath.Join(r.Dir, project+".git") }

// WorkTree returns the non-bare repository of a project.
func (r Repos) WorkTree(project string) string { return filepath.Join(r.Dir, project) }

// Project returns the project name of a fixture repo field ("fixture/calc" -> "calc").
func Project(repo string) string { return strings.TrimPrefix(repo, "fixture/") }

// FixtureRepos creates the fixture git repositories and bare mirrors in a
// temporary directory with scripts/fixture.sh repos and returns it. Needs bash
// and git; without them the test is skipped (fails when CI is set).
func FixtureRepos(t testing.TB) Repos {
	t.Helper()
	dir := t.TempDir()
	if err := MakeRepos(context.Background(), dir); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			missing(t, "making fixture repos: %v", err)
		}
		t.Fatal(err)
	}
	return Repos{Dir: dir}
}

// SharedRepos returns the fixture repositories of FixtureContext (one
// directory per machine and fixture version), for tests that only read them
// (clone, log, cat-file); a test that changes a repository uses
// FixtureRepos. Needs bash and git; without them the test is skipped (fails
// when CI is set).
func SharedRepos(t testing.TB) Repos {
	t.Helper()
	dir, err := FixtureContext(context.Background())
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			missing(t, "making fixture repos: %v", err)
		}
		t.Fatal(err)
	}
	return Repos{Dir: filepath.Join(dir, "mirror")}
}

// MakeRepos runs scripts/fixture.sh repos dir.
func MakeRepos(ctx context.Context, dir string) error {
	_, err := RunFixtureScript(ctx, "repos", dir)
	return err
}

// RunFixtureScript runs scripts/fixture.sh with args and returns its stdout.
func RunFixtureScript(ctx context.Context, args ...string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	for _, tool := range []string{"bash", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("running scripts/fixture.sh %s: %w", strings.Join(args, " "), err)
		}
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "scripts", "fixture.sh")}, args...)...)
	cmd.Dir = root
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running scripts/fixture.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Python returns the Python interpreter with pytest used for host-side
// fixture checks: $SWEBUILD_PYTHON or /usr/bin/python3 (Debian's, so that
// python3-pytest is importable; a pyenv python3 on PATH would not have it).
// Skips (fails under CI) when it cannot import pytest.
func Python(t testing.TB) string {
	t.Helper()
	py := os.Getenv(EnvPython)
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import pytest").CombinedOutput()
	if err != nil {
		missing(t, "%s cannot import pytest (apt-get install python3-pytest): %v: %s", py, err, out)
	}
	return py
}

// Node returns the Node.js interpreter for host-side checks of the fixture's
// JavaScript project: $SWEBUILD_NODE or node on PATH. It must run node:test
// with the TAP reporter (Node 18.15 or later; Debian 12 has 18.20). Skips
// (fails under CI) when there is none.
func Node(t testing.TB) string {
	t.Helper()
	node := os.Getenv(EnvNode)
	if node == "" {
		p, err := exec.LookPath("node")
		if err != nil {
			missing(t, "node not found (apt-get install nodejs, or set %s): %v", EnvNode, err)
			return ""
		}
		node = p
	}
	out, err := exec.Command(node, "--test-reporter=tap", "-e", "require('node:test')").CombinedOutput()
	if err != nil {
		missing(t, "%s cannot run node:test with the TAP reporter (want Node.js 18.15 or later): %v: %s", node, err, out)
	}
	return node
}
