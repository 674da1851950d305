package render

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/fetch"
)

type fakeFetcher map[string]string

func (f fakeFetcher) Fetch(_ context.Context, url string) (string, bool, error) {
	if url == "boom" {
		return "", false, errors.New("boom")
	}
	b, ok := f[url]
	return b, ok, nil
}

// TestNetworkSpecs follows make_env_script_list_py for the requirements.txt
// and environment.yml branches with a fake downloader.
func TestNetworkSpecs(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	const commit = "419a78300f7cd27611196e1e464d50fd0385ff27"
	raw := "https://raw.githubusercontent.com/"
	f := fakeFetcher{
		// django: the only candidate path; "-r" is resolved next to it. Every
		// split keeps its trailing empty line, as upstream does.
		raw + "django/django/" + commit + "/tests/requirements/py3.txt":  "-r base.txt\n# comment\n-e .\nasgiref >= 3.2\ntypes-pkg_resources==1.0\n",
		raw + "django/django/" + commit + "/tests/requirements/base.txt": "sqlparse\n.[test]\n",
		// xarray: first candidate missing, second found.
		raw + "pydata/xarray/" + commit + "/environment.yml": "name: xarray-tests\nchannels:\n  - conda-forge\ndependencies:\n  - numpy\n  - pip:\n    - types-pkg_resources>=1\n    - six\n",
	}
	r := &Renderer{Tables: tables, Fetcher: f}
	dj := &core.Instance{Repo: "django/django", InstanceID: "django__django-1", Version: "3.0", BaseCommit: "b", EnvironmentSetupCommit: commit,
		TestPatch: "diff --git a/tests/x/tests.py b/tests/x/tests.py\n--- a/tests/x/tests.py\n+++ b/tests/x/tests.py\n@@ -1 +1 @@\n-a\n+b\n"}
	res, err := r.Render(context.Background(), dj, core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"source /opt/miniconda3/bin/activate",
		"conda create -n testbed python=3.6 -y",
		"cat <<'EOF_59812759871' > $HOME/requirements.txt\nsqlparse\n\nasgiref >= 3.2\ntypes-setuptools\n\nEOF_59812759871",
		"conda activate testbed && python -m pip install -r $HOME/requirements.txt",
		"rm $HOME/requirements.txt",
		"conda activate testbed",
	}
	s, _ := tables.Lookup("django/django", "3.0")
	want[1] = "conda create -n testbed python=" + s.Python + " -y"
	if s.PipPackages != nil {
		want = append(want, "python -m pip install "+strings.Join(s.PipPackages, " "))
	}
	if strings.Join(res.EnvScriptList, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("django env script:\n%s\nwant:\n%s", strings.Join(res.EnvScriptList, "\n---\n"), strings.Join(want, "\n---\n"))
	}
	if !strings.Contains(res.Eval, "\n./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 x.tests\n") {
		t.Errorf("django test directive: %s", res.Eval)
	}

	xr := &core.Instance{Repo: "pydata/xarray", InstanceID: "pydata__xarray-1", Version: "0.12", BaseCommit: "b", EnvironmentSetupCommit: commit, TestPatch: dj.TestPatch}
	res, err = r.Render(context.Background(), xr, core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	xs, _ := tables.Lookup("pydata/xarray", "0.12")
	yml := "name: testbed\nchannels:\n  - conda-forge\ndependencies:\n  - numpy\n  - pip:\n    - types-setuptools\n    - six\n"
	if res.EnvScriptList[1] != "cat <<'EOF_59812759871' > environment.yml\n"+yml+"\nEOF_59812759871" {
		t.Errorf("xarray yml item: %q", res.EnvScriptList[1])
	}
	wantCreate := []string{"conda env create --file environment.yml", "conda activate testbed && conda install python=" + xs.Python + " -y"}
	if xs.NoUseEnv {
		wantCreate = []string{"conda create -c conda-forge -n testbed python=" + xs.Python + " -y", "conda env update -f environment.yml"}
	}
	if res.EnvScriptList[2] != wantCreate[0] || res.EnvScriptList[3] != wantCreate[1] || res.EnvScriptList[4] != "rm environment.yml" {
		t.Errorf("xarray env create lines: %q", res.EnvScriptList[2:5])
	}

	// Nothing found anywhere: the error lists the candidates.
	r.Fetcher = fakeFetcher{}
	if _, err := r.Render(context.Background(), xr, core.AMD64); err == nil || !strings.Contains(err.Error(), "ci/requirements/environment.yml") {
		t.Errorf("missing env file: %v", err)
	}
	// No fetcher: needs network, naming the first URL.
	r.Fetcher = nil
	if _, err := r.Render(context.Background(), dj, core.AMD64); !errors.Is(err, ErrNeedsNetwork) || !strings.Contains(err.Error(), "/tests/requirements/py3.txt") {
		t.Errorf("no fetcher: %v", err)
	}
}

// TestRawRootIsTables: fetch builds the candidate URLs from upstream's
// SWE_BENCH_URL_RAW; it must be the one in the spec tables.
func TestRawRootIsTables(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fetch.RawURL("o/r", "c", "p.txt"), tables.URLRaw+"o/r/c/p.txt"; got != want {
		t.Errorf("fetch.RawURL = %q, tables give %q", got, want)
	}
}

// fetch's default replacements (used by a fetch.Client given none) must be
// the tables' REPLACE_REQ_PACKAGES, which render passes explicitly.
func TestFetchDefaultReplacementsAreTables(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := &Renderer{Tables: tables}
	if got, want := fetch.ReplaceReqPackages(), r.replacements(); !reflect.DeepEqual(got, want) {
		t.Errorf("fetch.ReplaceReqPackages() = %+v, tables give %+v", got, want)
	}
}
