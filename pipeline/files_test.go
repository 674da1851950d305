package pipeline

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/fetch"
	"github.com/swebuild/swebuild/retry"
)

// TestResolveFiles: what render needs is downloaded before rendering, once
// per file, and a file that cannot be had fails the instances that need it
// (with the download's error), not the load.
func TestResolveFiles(t *testing.T) {
	const commit = "419a78300f7cd27611196e1e464d50fd0385ff27"
	var (
		mu    sync.Mutex // resolveFiles downloads concurrently
		asked []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/django/django/" + commit + "/tests/requirements/py3.txt":
			w.Write([]byte("-r base.txt\nasgiref >= 3.2\n"))
		case "/django/django/" + commit + "/tests/requirements/base.txt":
			w.Write([]byte("sqlparse\n"))
		case "/pydata/xarray/" + commit + "/ci/requirements/environment.yml":
			// Any final answer other than 200 sends upstream to the next
			// candidate path.
			http.Error(w, "down", http.StatusInternalServerError)
		case "/pydata/xarray/" + commit + "/environment.yml":
			w.Write([]byte("name: xarray-tests\ndependencies:\n  - numpy\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	patch := "diff --git a/tests/x/tests.py b/tests/x/tests.py\n--- a/tests/x/tests.py\n+++ b/tests/x/tests.py\n@@ -1 +1 @@\n-a\n+b\n"
	insts := []core.Instance{
		{Repo: "django/django", InstanceID: "django__django-1", Version: "3.0", BaseCommit: "b", EnvironmentSetupCommit: commit, TestPatch: patch},
		{Repo: "django/django", InstanceID: "django__django-2", Version: "3.0", BaseCommit: "b", EnvironmentSetupCommit: commit, TestPatch: patch},
		{Repo: "pydata/xarray", InstanceID: "pydata__xarray-1", Version: "0.12", BaseCommit: "b", EnvironmentSetupCommit: commit, TestPatch: patch},
	}
	cache := t.TempDir()
	client, err := fetch.New(fetch.Options{CacheDir: cache, BaseURL: srv.URL, Budget: retry.Budget{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables}
	if err := resolveFiles(context.Background(), client, r, insts); err != nil {
		t.Fatal(err)
	}
	if len(r.RepoFiles) != 2 {
		t.Fatalf("%d files resolved, want 2: %+v", len(r.RepoFiles), r.RepoFiles)
	}
	mu.Lock()
	got := append([]string(nil), asked...)
	mu.Unlock()
	if len(got) != 4 {
		t.Errorf("%d requests, want 4 (each URL once): %q", len(got), got)
	}
	res, err := r.Render(context.Background(), &insts[0], core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	// Each split keeps its trailing empty line, as upstream does.
	if !strings.Contains(res.SetupEnv, "sqlparse\n\nasgiref >= 3.2\n") {
		t.Errorf("django env script does not embed the requirements:\n%s", res.SetupEnv)
	}
	res, err = r.Render(context.Background(), &insts[2], core.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.SetupEnv, "name: testbed\ndependencies:\n  - numpy\n") {
		t.Errorf("xarray env script does not embed the environment:\n%s", res.SetupEnv)
	}

	// Offline with nothing cached: the load goes on, each instance that
	// needs a file fails naming it.
	off, err := fetch.New(fetch.Options{CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	r = &render.Renderer{Tables: tables}
	if err := resolveFiles(context.Background(), off, r, insts); err != nil {
		t.Fatal(err)
	}
	_, err = r.Render(context.Background(), &insts[1], core.AMD64)
	if !errors.Is(err, fetch.ErrOffline) || !strings.Contains(err.Error(), "https://raw.githubusercontent.com/django/django/"+commit+"/tests/requirements/py3.txt") {
		t.Errorf("offline render: %v", err)
	}

	// A cancelled context is the one error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := resolveFiles(ctx, client, &render.Renderer{Tables: tables}, insts); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
