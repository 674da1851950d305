package render

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/envfile"
)

type fakeSource map[string]string

func (f fakeSource) Fetch(_ context.Context, url string) (string, bool, error) {
	if url == "boom" {
		return "", false, errors.New("boom")
	}
	b, ok := f[url]
	return b, ok, nil
}

// resolve does what package pipeline does before rendering: every file
// Needs lists, through envfile with the tables' REPLACE_REQ_PACKAGES.
func resolve(r *Renderer, src envfile.Source, insts ...*core.Instance) RepoFiles {
	var all []core.Instance
	for _, in := range insts {
		all = append(all, *in)
	}
	files := RepoFiles{}
	repl := envfile.Replacements(r.Tables.ReplaceReqPackages)
	for _, n := range r.Needs(all, []core.Platform{core.AMD64}) {
		var res Resolved
		if n.Name == FileRequirements {
			res.Text, res.Err = envfile.GetRequirements(context.Background(), src, n.Repo, n.Commit, n.Paths, repl)
		} else {
			res.Text, res.Err = envfile.GetEnvironmentYML(context.Background(), src, n.Repo, n.Commit, n.Paths, EnvName, repl)
		}
		files[n.RepoFile] = res
	}
	return files
}

// TestNetworkSpecs follows make_env_script_list_py for the requirements.txt
// and environment.yml branches, with the files resolved beforehand from a
// fake source.
func TestNetworkSpecs(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	const commit = "419a78300f7cd27611196e1e464d50fd0385ff27"
	raw := "https://raw.githubusercontent.com/"
	f := fakeSource{
		// django: the only candidate path; "-r" is resolved next to it. Every
		// split keeps its trailing empty line, as upstream does.
		raw + "django/django/" + commit + "/tests/requirements/py3.txt":  "-r base.txt\n# comment\n-e .\nasgiref >= 3.2\ntypes-pkg_resources==1.0\n",
		raw + "django/django/" + commit + "/tests/requirements/base.txt": "sqlparse\n.[test]\n",
		// xarray: first candidate missing, second found.
		raw + "pydata/xarray/" + commit + "/environment.yml": "name: xarray-tests\nchannels:\n  - conda-forge\ndependencies:\n  - numpy\n  - pip:\n    - types-pkg_resources>=1\n    - six\n",
	}
	r := &Renderer{Tables: tables}
	dj := &core.Instance{Repo: "django/django", InstanceID: "django__django-1", Version: "3.0", BaseCommit: "b", EnvironmentSetupCommit: commit,
		TestPatch: "diff --git a/tests/x/tests.py b/tests/x/tests.py\n--- a/tests/x/tests.py\n+++ b/tests/x/tests.py\n@@ -1 +1 @@\n-a\n+b\n"}
	xr := &core.Instance{Repo: "pydata/xarray", InstanceID: "pydata__xarray-1", Version: "0.12", BaseCommit: "b", EnvironmentSetupCommit: commit, TestPatch: dj.TestPatch}
	// A second django instance at the same commit needs no second file; an
	// instance of a spec that embeds nothing needs none.
	dj2 := *dj
	dj2.InstanceID = "django__django-2"
	sympy := &core.Instance{Repo: "sympy/sympy", InstanceID: "sympy__sympy-1", Version: "0.7", BaseCommit: "b", TestPatch: dj.TestPatch}
	needs := r.Needs([]core.Instance{*dj, dj2, *xr, *sympy}, []core.Platform{core.AMD64, core.ARM64})
	wantNeeds := []Need{
		{RepoFile{FileRequirements, "django/django", commit}, tables.ReqsPaths["django/django"]},
		{RepoFile{FileEnvironmentYML, "pydata/xarray", commit}, tables.EnvYMLPaths["pydata/xarray"]},
	}
	if !reflect.DeepEqual(needs, wantNeeds) {
		t.Errorf("Needs = %+v, want %+v", needs, wantNeeds)
	}

	r.RepoFiles = resolve(r, f, dj, xr)
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

	// Nothing found anywhere: the resolution's error, listing the
	// candidates, is the render's.
	r.RepoFiles = resolve(r, fakeSource{}, xr)
	if _, err := r.Render(context.Background(), xr, core.AMD64); err == nil || !strings.Contains(err.Error(), "ci/requirements/environment.yml") || !errors.Is(err, envfile.ErrNotFound) {
		t.Errorf("missing env file: %v", err)
	}
	// Not resolved: needs network, naming the first URL.
	r.RepoFiles = nil
	if _, err := r.Render(context.Background(), dj, core.AMD64); !errors.Is(err, ErrNeedsNetwork) || !strings.Contains(err.Error(), "/tests/requirements/py3.txt") {
		t.Errorf("not resolved: %v", err)
	}
}
