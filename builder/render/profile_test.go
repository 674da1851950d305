package render

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

func fixtureRenderer(t *testing.T) *Renderer {
	t.Helper()
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(filepath.Join("..", "..", "testdata", "fixture", "specs.json")); err != nil {
		t.Fatal(err)
	}
	return &Renderer{Tables: tables}
}

func fixtureInstance() *core.Instance {
	return &core.Instance{
		Repo: "fixture/calc", InstanceID: "fixture__calc-1", Version: "1.0",
		BaseCommit: "46e1a4dc54738ea141374dfaa7b86e4a5872974d",
		TestPatch:  "diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n@@ -1,1 +1,2 @@\n x = 1\n+y = 2\n",
	}
}

func TestFixtureProfile(t *testing.T) {
	r := fixtureRenderer(t)
	inst := fixtureInstance()
	results, err := r.RenderArches(context.Background(), inst, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		if res.BaseKey != "sweb.base.fixture."+res.Arch()+":latest" || !strings.HasPrefix(res.EnvKey, "sweb.env.fixture."+res.Arch()+".") ||
			res.InstanceKey != "sweb.eval."+res.Arch()+".fixture__calc-1:latest" {
			t.Errorf("keys %s %s %s", res.BaseKey, res.EnvKey, res.InstanceKey)
		}
		if !strings.HasPrefix(res.BaseDockerfile, "FROM scratch\nARG TARGETARCH\nADD rootfs-${TARGETARCH}.tar /\n") {
			t.Errorf("base Dockerfile:\n%s", res.BaseDockerfile)
		}
		for name, text := range map[string]string{"setup_env.sh": res.SetupEnv, "setup_repo.sh": res.SetupRepo, "eval.sh": res.Eval} {
			if strings.Contains(text, "conda") || strings.Contains(text, "miniconda") {
				t.Errorf("%s mentions conda:\n%s", name, text)
			}
			if !strings.Contains(text, "source /opt/testbed/bin/activate\n") {
				t.Errorf("%s does not activate the venv", name)
			}
		}
		if res.SetupEnv != "#!/bin/bash\nset -euxo pipefail\npython3 -m venv --system-site-packages /opt/testbed\nsource /opt/testbed/bin/activate\n" {
			t.Errorf("setup_env.sh:\n%s", res.SetupEnv)
		}
		if !strings.Contains(res.SetupRepo, "git clone -o origin  --single-branch /mirror/calc.git /testbed\n") {
			t.Errorf("setup_repo.sh clone line:\n%s", res.SetupRepo)
		}
		if !strings.Contains(res.Eval, "\npython -m pytest -rA tests/test_ops.py\n") {
			t.Errorf("eval.sh test command:\n%s", res.Eval)
		}
		nodes := res.Nodes()
		oci := res.Platform.GOARCH()
		if !reflect.DeepEqual(nodes[0].External, []string{"rootfs-" + oci + ".tar"}) || nodes[1].External != nil ||
			!reflect.DeepEqual(nodes[2].External, []string{"mirror"}) {
			t.Errorf("external context: %v %v %v", nodes[0].External, nodes[1].External, nodes[2].External)
		}
		if !strings.Contains(string(nodes[2].Dockerfile), "RUN --mount=type=bind,source=mirror,target=/mirror /bin/bash /root/setup_repo.sh") ||
			nodes[2].Parent() != res.EnvKey || nodes[1].Parent() != res.BaseKey {
			t.Errorf("instance node: parent %s\n%s", nodes[2].Parent(), nodes[2].Dockerfile)
		}
	}
	// Deterministic: a second, fresh render gives the same bytes.
	again, err := fixtureRenderer(t).RenderArches(context.Background(), inst, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(results, again) {
		t.Error("rendering is not deterministic")
	}
}

// TestFixtureDataset renders the fixture dataset, if the fixture engineer's
// file is present, and checks every instance renders.
func TestFixtureDataset(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "fixture", "dataset.jsonl")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no fixture dataset yet: %v", err)
	}
	insts, err := spectest.ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	r := fixtureRenderer(t)
	for i := range insts {
		if _, err := r.RenderArches(context.Background(), &insts[i], core.AllPlatforms()); err != nil {
			t.Errorf("%s: %v", insts[i].InstanceID, err)
		}
	}
}

func TestLoadExtraErrors(t *testing.T) {
	dir := t.TempDir()
	good := `"profile": {"name": "p", "base_dockerfile": "FROM scratch", "env_dockerfile": "FROM {base_image_key}", "instance_dockerfile": "FROM {env_image_name}", "activate": ["true"], "clone_url": "/m/{name}.git"}`
	for _, tc := range []struct{ name, body, want string }{
		{"shadow", `{` + good + `, "specs": {"django/django": {"3.0": {"test_cmd": "x"}}}}`, "specs.django/django: repo is already in the upstream table"},
		{"no test_cmd", `{` + good + `, "specs": {"a/b": {"1": {}}}}`, "specs.a/b.1.test_cmd: missing"},
		{"unknown field", `{` + good + `, "specs": {}, "extra": 1}`, "unknown field"},
		{"unsafe x86_only id", `{` + good + `, "specs": {}, "x86_only": ["ok-1", "../etc"]}`, "x86_only[1]: instance id"},
		{"no clone", `{"profile": {"name": "p", "base_dockerfile": "x", "env_dockerfile": "x", "instance_dockerfile": "x", "activate": ["x"]}, "specs": {}}`, "profile.clone_url: missing"},
		{"no activate", `{"profile": {"name": "p", "base_dockerfile": "x", "env_dockerfile": "x", "instance_dockerfile": "x", "clone_url": "x"}, "specs": {}}`, "profile.activate: missing"},
		{"no clone in a listed profile", `{` + good + `, "specs": {}, "profiles": [{` + good + `, "specs": {}}, {"profile": {"name": "q", "base_dockerfile": "x", "env_dockerfile": "x", "instance_dockerfile": "x", "activate": []}, "specs": {}}]}`, "profiles[1].profile.clone_url: missing"},
		{"repo in two profiles", `{` + good + `, "specs": {"a/b": {"1": {"test_cmd": "x"}}}, "profiles": [{` + good + `, "specs": {"a/b": {"1": {"test_cmd": "y"}}}}]}`, `profiles[0].specs.a/b: repo is already in profile "p"`},
		{"neither profile nor profiles", `{"x86_only": []}`, "profile.name: missing"},
	} {
		p := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		tables, _ := spec.Load()
		err := tables.LoadExtra(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want %q and the file name", tc.name, err, tc.want)
		}
	}
}

// The fixture's specs file marks one instance x86-only and names its log
// parser; both must reach the tables the plan and verify read.
func TestLoadExtraX86OnlyAndParser(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(filepath.Join("..", "..", "testdata", "fixture", "specs.json")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"fixture__textutil-2": true, "fixture__textutil-1": false, "fixture__calc-1": false} {
		if got := tables.X86Only(&core.Instance{InstanceID: id, Repo: spec.RepoFromID(id), Version: "1.0"}); got != want {
			t.Errorf("X86Only(%s) = %v, want %v", id, got, want)
		}
	}
	if got := tables.LogParser("fixture/calc"); got != "parse_log_pytest" {
		t.Errorf("LogParser(fixture/calc) = %q, want parse_log_pytest", got)
	}
	if got := tables.LogParser("django/django"); got != "" {
		t.Errorf("LogParser(django/django) = %q, want none (upstream's map decides)", got)
	}
}

// A specs file may hold several profiles (one per language): each repo gets
// its own profile's templates, key language and log parser.
func TestLoadExtraProfiles(t *testing.T) {
	dir := t.TempDir()
	body := `{
  "profile": {"name": "py", "language": "fixture", "log_parser": "parse_log_pytest", "base_dockerfile": "FROM scratch", "env_dockerfile": "FROM {base_image_key}", "instance_dockerfile": "FROM {env_image_name}", "activate": ["source /opt/testbed/bin/activate"], "env_create": ["python3 -m venv /opt/testbed"], "clone_url": "/m/{name}.git"},
  "specs": {"a/py": {"1.0": {"test_cmd": "pytest"}}},
  "profiles": [{
    "profile": {"name": "js", "language": "js", "log_parser": "parse_log_tap", "base_dockerfile": "FROM scratch", "env_dockerfile": "FROM {base_image_key}", "instance_dockerfile": "FROM {env_image_name}", "activate": [], "clone_url": "/m/{name}.git"},
    "specs": {"a/js": {"1.0": {"test_cmd": "node --test --test-reporter=tap"}}}
  }]
}`
	p := filepath.Join(dir, "specs.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(p); err != nil {
		t.Fatal(err)
	}
	r := &Renderer{Tables: tables}
	for _, tc := range []struct{ repo, parser, lang, env, evalTest string }{
		{"a/py", "parse_log_pytest", "fixture", "#!/bin/bash\nset -euxo pipefail\npython3 -m venv /opt/testbed\nsource /opt/testbed/bin/activate\n", "\npytest t/test_x.js\n"},
		{"a/js", "parse_log_tap", "js", "#!/bin/bash\nset -euxo pipefail\n", "\nnode --test --test-reporter=tap t/test_x.js\n"},
	} {
		if got := tables.LogParser(tc.repo); got != tc.parser {
			t.Errorf("LogParser(%s) = %q, want %q", tc.repo, got, tc.parser)
		}
		inst := &core.Instance{Repo: tc.repo, InstanceID: "x__y-1", Version: "1.0", BaseCommit: "0123456789abcdef0123456789abcdef01234567",
			TestPatch: "diff --git a/t/test_x.js b/t/test_x.js\n--- a/t/test_x.js\n+++ b/t/test_x.js\n@@ -1 +1 @@\n-a\n+b\n"}
		res, err := r.Render(context.Background(), inst, core.ARM64)
		if err != nil {
			t.Fatalf("%s: %v", tc.repo, err)
		}
		if res.BaseKey != "sweb.base."+tc.lang+".arm64:latest" || !strings.HasPrefix(res.EnvKey, "sweb.env."+tc.lang+".arm64.") {
			t.Errorf("%s: keys %s %s", tc.repo, res.BaseKey, res.EnvKey)
		}
		if res.SetupEnv != tc.env {
			t.Errorf("%s: setup_env.sh:\n%s", tc.repo, res.SetupEnv)
		}
		if !strings.Contains(res.Eval, tc.evalTest) {
			t.Errorf("%s: eval.sh lacks %q:\n%s", tc.repo, tc.evalTest, res.Eval)
		}
	}
}
