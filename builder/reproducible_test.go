package builder

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/gittest"
)

// TestReproducibleExports: with Reproducible set, every image and OCI export
// of a solve carries the epoch and rewrite-timestamp=true, and the request
// the SOURCE_DATE_EPOCH build argument; without it, none of them.
func TestReproducibleExports(t *testing.T) {
	l, err := openLayout(filepath.Join(t.TempDir(), "layout"))
	if err != nil {
		t.Fatal(err)
	}
	n := &graph.Node{Key: "sweb.base.py.x86_64:latest", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch\n")}
	for _, tc := range []struct {
		name  string
		repro *Reproducible
		push  string
		want  string // the epoch every export and the request carry; "" none
	}{
		{name: "off, push", push: "127.0.0.1:5000/x"},
		{name: "on, push and layout", repro: &Reproducible{SourceDateEpoch: 946684800}, push: "127.0.0.1:5000/x", want: "946684800"},
		{name: "on, layout only, epoch 0", repro: &Reproducible{SourceDateEpoch: 0}, want: "0"},
	} {
		cb := &chainBuild{s: &bkSolver{push: tc.push, layout: l, repro: tc.repro}, job: Job{Node: n}, chain: []*graph.Node{n}, done: map[string]solvedNode{}}
		so, err := cb.prepare()
		if err != nil {
			t.Fatal(err)
		}
		if got := so.FrontendAttrs["build-arg:SOURCE_DATE_EPOCH"]; got != tc.want {
			t.Errorf("%s: request build-arg:SOURCE_DATE_EPOCH %q, want %q", tc.name, got, tc.want)
		}
		if len(so.Exports) == 0 {
			t.Fatalf("%s: no exports", tc.name)
		}
		for _, e := range so.Exports {
			wantRewrite := ""
			if tc.want != "" {
				wantRewrite = "true"
			}
			if e.Attrs["source-date-epoch"] != tc.want || e.Attrs["rewrite-timestamp"] != wantRewrite {
				t.Errorf("%s: export %s attrs %v, want source-date-epoch=%q rewrite-timestamp=%q", tc.name, e.Type, e.Attrs, tc.want, wantRewrite)
			}
		}
		attrs := map[string]string{}
		tc.repro.frontendAttrs(attrs)
		if attrs["build-arg:SOURCE_DATE_EPOCH"] != tc.want {
			t.Errorf("%s: Dockerfile solve attrs %v", tc.name, attrs)
		}
	}
}

// A config as BuildKit's Dockerfile frontend returns it for the fixture's
// base (FROM scratch, ADD, ENV LANG=C.UTF-8 TZ=Etc/UTC), trimmed.
const baseConfig = `{"architecture":"amd64","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8","TZ=Etc/UTC"],"WorkingDir":"/"},"created":"2000-01-01T00:00:00Z","history":[{"created":"2000-01-01T00:00:00Z","created_by":"ADD rootfs-amd64.tar / # buildkit","comment":"buildkit.dockerfile.v0"}],"os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:0000000000000000000000000000000000000000000000000000000000000000"]}}`

func configEnv(t *testing.T, cfg []byte) []string {
	t.Helper()
	var img struct {
		Config struct{ Env []string }
	}
	if err := json.Unmarshal(cfg, &img); err != nil {
		t.Fatal(err)
	}
	return img.Config.Env
}

// TestBuildEnvRoundTrip: the parent's config handed to a child carries the
// build-time variables after its own; the child's config, which inherits
// them, loses exactly them again, keeping every other field; a config
// without them is returned byte for byte.
func TestBuildEnvRoundTrip(t *testing.T) {
	r := &Reproducible{SourceDateEpoch: 946684800}
	with, err := r.withBuildEnv([]byte(baseConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TZ=Etc/UTC",
		"SOURCE_DATE_EPOCH=946684800", "GIT_AUTHOR_DATE=@946684800 +0000", "GIT_COMMITTER_DATE=@946684800 +0000",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=pack.threads", "GIT_CONFIG_VALUE_0=1", "PYTHONDONTWRITEBYTECODE=1"}
	// then the bash hook's two (TestBashEnvZeroesGitIndex runs them).
	got := configEnv(t, with)
	if len(got) != len(want)+2 || !slices.Equal(got[:len(want)], want) || envName(got[len(want)]) != "SWEBUILD_REPRO_BASH" || envName(got[len(want)+1]) != "BASH_ENV" {
		t.Errorf("parent config for the child: Env %q, want %q and SWEBUILD_REPRO_BASH, BASH_ENV", got, want)
	}
	// A child adds its own variable after the inherited ones.
	child, err := editEnv(with, func(env []string) []string { return append(env, "FOO=1") })
	if err != nil {
		t.Fatal(err)
	}
	without, err := r.withoutBuildEnv(child)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := configEnv(t, without), []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TZ=Etc/UTC", "FOO=1"}; !slices.Equal(got, want) {
		t.Errorf("child config: Env %q, want %q", got, want)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(baseConfig), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(without, &b); err != nil {
		t.Fatal(err)
	}
	delete(a["config"].(map[string]any), "Env")
	delete(b["config"].(map[string]any), "Env")
	if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
		t.Errorf("other fields changed:\n%s\n%s", ja, jb)
	}
	same, err := r.withoutBuildEnv([]byte(baseConfig))
	if err != nil {
		t.Fatal(err)
	}
	if string(same) != baseConfig {
		t.Errorf("a config without the variables was rewritten:\n%s", same)
	}
	// A value the parent sets itself is overridden while building and not
	// put back (it is not one of ours).
	own, err := editEnv([]byte(baseConfig), func(env []string) []string { return append(env, "SOURCE_DATE_EPOCH=1") })
	if err != nil {
		t.Fatal(err)
	}
	with, err = r.withBuildEnv(own)
	if err != nil {
		t.Fatal(err)
	}
	if env := configEnv(t, with); slices.Contains(env, "SOURCE_DATE_EPOCH=1") || !slices.Contains(env, "SOURCE_DATE_EPOCH=946684800") {
		t.Errorf("parent's own SOURCE_DATE_EPOCH: Env %q", env)
	}
	// Off: nothing changes.
	var off *Reproducible
	if got, err := off.withBuildEnv([]byte(baseConfig)); err != nil || string(got) != baseConfig {
		t.Errorf("nil Reproducible changed the config: %s, %v", got, err)
	}
	if _, err := r.withBuildEnv([]byte("{not json")); err == nil {
		t.Error("a config that is not JSON gave no error")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSourceDateEpoch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{in: "946684800", want: 946684800},
		{in: "0", want: 0},
		{in: "-1", err: true},
		{in: "2000-01-01", err: true},
		{in: "", err: true},
	} {
		got, err := ParseSourceDateEpoch(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSourceDateEpoch(%q) = %d, %v", tc.in, got, err)
		}
	}
}

// TestBindAncestors: a child starts FROM its nearest pushed ancestor, and
// nothing before it is solved; with nothing pushed, or a parent that would
// be neither solved nor bound, the whole chain is solved.
func TestBindAncestors(t *testing.T) {
	base := &graph.Node{Key: "b", Platform: core.AMD64}
	env := &graph.Node{Key: "e", Platform: core.AMD64, Parents: []string{"b"}}
	inst := &graph.Node{Key: "i", Platform: core.AMD64, Parents: []string{"e"}}
	two := &graph.Node{Key: "t", Platform: core.AMD64, Parents: []string{"e", "b"}}
	chain := []*graph.Node{base, env, inst}
	for _, tc := range []struct {
		name   string
		pushed map[string]string
		chain  []*graph.Node
		from   int
		bound  string
	}{
		{name: "nothing pushed", pushed: map[string]string{}, chain: chain},
		{name: "base pushed", pushed: map[string]string{base.ID(): "r/x@b"}, chain: chain, from: 1, bound: "b=r/x@b"},
		{name: "base and env pushed", pushed: map[string]string{base.ID(): "r/x@b", env.ID(): "r/x@e"}, chain: chain, from: 2, bound: "e=r/x@e"},
		{name: "other platform", pushed: map[string]string{(&graph.Node{Key: "e", Platform: core.ARM64}).ID(): "r/x@e"}, chain: chain},
		{name: "two parents", pushed: map[string]string{env.ID(): "r/x@e"}, chain: []*graph.Node{base, env, two}},
	} {
		p := &pushedRefs{m: tc.pushed}
		from, bound := p.bindAncestors(tc.chain)
		got := ""
		for k, v := range bound {
			got = k + "=" + v
		}
		if from != tc.from || got != tc.bound {
			t.Errorf("%s: from %d bound %q, want %d %q", tc.name, from, got, tc.from, tc.bound)
		}
	}
	var off *pushedRefs
	if from, bound := off.bindAncestors(chain); from != 0 || bound != nil {
		t.Errorf("nil: from %d bound %v", from, bound)
	}
	off.add("x", "y") // no panic
}

// TestBashEnvZeroesGitIndex runs the RUN steps' variables with a real bash
// and git (the checkout directory and the hook file moved into temporary
// directories): a script that commits, as setup_repo.sh does, leaves an
// index without stat data, byte-identical for two checkouts a second apart,
// `git status` clean, the hook file removed, and the script's exit status
// untouched; a nested bash does not run the hook early.
func TestBashEnvZeroesGitIndex(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := &Reproducible{SourceDateEpoch: DefaultSourceDateEpoch}
	run := func(script string) (string, []byte, int) {
		t.Helper()
		tmp := t.TempDir()
		testbed := filepath.Join(tmp, "testbed")
		hook := filepath.Join(tmp, "hook.sh")
		env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
		for _, e := range r.ReproducibleEnv() {
			e = strings.ReplaceAll(e, reproBashFile, hook)
			env = append(env, strings.ReplaceAll(e, "/testbed", testbed))
		}
		s := filepath.Join(tmp, "setup.sh")
		if err := os.WriteFile(s, []byte(strings.ReplaceAll(script, "/testbed", testbed)), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bash, s)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(hook); !os.IsNotExist(err) {
			t.Errorf("hook file left behind (%v)\n%s", err, out)
		}
		idx, _ := os.ReadFile(filepath.Join(testbed, ".git", "index"))
		return testbed, idx, code
	}
	const setup = `#!/bin/bash
set -euxo pipefail
mkdir -p /testbed/src && cd /testbed
git init -q -b main
echo x > setup.py; echo y > src/a.py
git add .
git commit -q -m one
echo z >> setup.py
bash -c 'cd /testbed && git ls-files --debug > /testbed/../nested.txt'
git commit -q -am SWE-bench
`
	dirA, idxA, code := run(setup)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	nested, err := os.ReadFile(filepath.Join(dirA, "..", "nested.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(nested), "ctime: 0:0") {
		t.Errorf("a nested bash ran the hook before the script ended:\n%s", nested)
	}
	if debug := gittest.Run(t, dirA, nil, "ls-files", "--debug"); strings.Count(debug, "ctime: 0:0") != 2 || strings.Count(debug, "mtime: 0:0") != 2 {
		t.Errorf("index keeps stat data:\n%s", debug)
	}
	if st := gittest.Run(t, dirA, nil, "status", "--porcelain"); st != "" {
		t.Errorf("git status after the hook: %q", st)
	}
	time.Sleep(1100 * time.Millisecond)
	_, idxB, _ := run(setup)
	if !bytes.Equal(idxA, idxB) {
		t.Error("two checkouts a second apart give different indexes")
	}
	if _, _, code := run("#!/bin/bash\nset -e\nexit 3\n"); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
}
