package stacktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
)

// SharedBuildTimeout bounds the one build of a SharedBuild.
const SharedBuildTimeout = 40 * time.Minute

// SharedBuild is the offline fixture built on the stack once per test
// binary, for every test of the package that needs the fixture's images and
// does not test the build itself: the first test that asks builds it, the
// others get the same records. Declare one per package and close it after
// the tests (Main):
//
//	var fixture stacktest.SharedBuild
//	func TestMain(m *testing.M) { stacktest.Main(m, &fixture) }
//	...
//	built := fixture.Get(t, buildWithTheCLI)
type SharedBuild struct {
	mu    sync.Mutex
	done  bool
	dir   string
	built Built
	err   error
}

// Built is what a SharedBuild hands out.
type Built struct {
	// BuildFixture is what the build started from (dataset, specs,
	// context directories).
	BuildFixture
	// Stack is the stack it was built on.
	Stack Stack
	// Repo is the repository every image was pushed to by digest.
	Repo string
	// MetadataFile holds the build's records; Records is its content.
	MetadataFile string
	Records      []core.Image
}

// BuildFunc builds fx on st for linux/amd64 and linux/arm64 in the package's
// own way (the CLI, the pipeline), pushes every image by digest to repo and
// writes the records to metadataFile. Output worth keeping goes to t.Logf.
type BuildFunc func(ctx context.Context, t testing.TB, fx BuildFixture, st Stack, repo, metadataFile string) error

// Get returns the fixture built once per test binary with build (the
// function of the first caller), after the stack's doors (Require, Rootfs:
// skip, or fail under CI). A failed build fails every test that asks. Each
// caller gets its own copy of the records.
func (s *SharedBuild) Get(t testing.TB, build BuildFunc) Built {
	t.Helper()
	st := Require(t)
	rootfs := Rootfs(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		start := time.Now()
		s.built, s.err = s.build(t, build, st, rootfs)
		t.Logf("the shared fixture build (once per test binary) took %s: %v", time.Since(start).Round(time.Second), s.err)
	}
	if s.err != nil {
		t.Fatalf("the shared fixture build: %v", s.err)
	}
	b := s.built
	b.Records = slices.Clone(b.Records) // a test may change its copy
	return b
}

func (s *SharedBuild) build(t testing.TB, build BuildFunc, st Stack, rootfs string) (Built, error) {
	dir, err := os.MkdirTemp("", "swebuild-shared-fixture-")
	if err != nil {
		return Built{}, fmt.Errorf("making the shared fixture's directory: %w", err)
	}
	s.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), SharedBuildTimeout)
	defer cancel()
	contextDir, err := FixtureContext(ctx)
	if err != nil {
		return Built{}, err
	}
	fixture := FixtureDir(t)
	b := Built{
		BuildFixture: BuildFixture{
			Dataset:     filepath.Join(fixture, "dataset.jsonl"),
			Specs:       filepath.Join(fixture, "specs.json"),
			ContextDirs: []string{rootfs, contextDir},
		},
		Stack:        st,
		Repo:         st.Registry + "/swebuild-test/shared-fixture",
		MetadataFile: filepath.Join(dir, "metadata.jsonl"),
	}
	if err := build(ctx, t, b.BuildFixture, st, b.Repo, b.MetadataFile); err != nil {
		return Built{}, fmt.Errorf("building the fixture: %w", err)
	}
	recs, err := core.ReadFile(b.MetadataFile)
	if err != nil {
		return Built{}, err
	}
	if len(recs) == 0 {
		return Built{}, fmt.Errorf("building the fixture: no records in %s", b.MetadataFile)
	}
	b.Records = recs
	return b, nil
}

// Close removes what the build left on disk (the metadata file, the run
// directory); the images stay in the registry, the mirrors in the cache.
func (s *SharedBuild) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Main is a TestMain for a package with shared builds: it runs the tests,
// closes the builds and exits with the tests' status.
func Main(m *testing.M, shared ...*SharedBuild) {
	code := m.Run()
	for _, s := range shared {
		s.Close()
	}
	os.Exit(code)
}
