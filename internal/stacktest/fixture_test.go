package stacktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// record is the subset of a SWE-bench record these tests read; FAIL_TO_PASS
// and PASS_TO_PASS are JSON-array strings as in the HuggingFace datasets.
type record struct {
	Repo                   string `json:"repo"`
	InstanceID             string `json:"instance_id"`
	BaseCommit             string `json:"base_commit"`
	Patch                  string `json:"patch"`
	TestPatch              string `json:"test_patch"`
	Version                string `json:"version"`
	FailToPass             string `json:"FAIL_TO_PASS"`
	PassToPass             string `json:"PASS_TO_PASS"`
	EnvironmentSetupCommit string `json:"environment_setup_commit"`
	CreatedAt              string `json:"created_at"`
	ProblemStatement       string `json:"problem_statement"`
}

func loadDataset(t *testing.T) []record {
	t.Helper()
	path := filepath.Join(FixtureDir(t), "dataset.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return recs
}

func labels(t *testing.T, r record) (f2p, p2p []string) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.FailToPass), &f2p); err != nil {
		t.Fatalf("%s: FAIL_TO_PASS: %v", r.InstanceID, err)
	}
	if err := json.Unmarshal([]byte(r.PassToPass), &p2p); err != nil {
		t.Fatalf("%s: PASS_TO_PASS: %v", r.InstanceID, err)
	}
	return f2p, p2p
}

// TestDatasetIsUpToDate regenerates the dataset from the project histories
// (deterministic commit ids) and compares it with the committed file.
func TestDatasetIsUpToDate(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil && os.Getenv(EnvPython) == "" {
		missing(t, "scripts/fixture.sh dataset needs /usr/bin/python3: %v", err)
	}
	out := filepath.Join(t.TempDir(), "dataset.jsonl")
	if _, err := RunFixtureScript(context.Background(), "dataset", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join(FixtureDir(t), "dataset.jsonl")
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what scripts/fixture.sh dataset produces (%d vs %d bytes); run scripts/fixture.sh dataset and commit", committed, len(want), len(got))
	}
}

var instanceIDRe = regexp.MustCompile(`^fixture__([a-z]+)-([0-9]+)$`)

// TestDatasetShape checks what the fixture promises: at least 4 instances over
// at least 2 projects, SWE-bench ids and fields, and commits that exist in the
// mirrors with newer commits after every base commit.
func TestDatasetShape(t *testing.T) {
	recs := loadDataset(t)
	if len(recs) < 4 {
		t.Fatalf("dataset has %d instances, want at least 4", len(recs))
	}
	repos := SharedRepos(t)
	projects := map[string]bool{}
	seen := map[string]bool{}
	for _, r := range recs {
		m := instanceIDRe.FindStringSubmatch(r.InstanceID)
		if m == nil || "fixture/"+m[1] != r.Repo {
			t.Errorf("%s: instance_id does not match repo %q", r.InstanceID, r.Repo)
			continue
		}
		if seen[r.InstanceID] {
			t.Errorf("%s: duplicate instance_id", r.InstanceID)
		}
		seen[r.InstanceID] = true
		projects[r.Repo] = true
		if r.Version != "1.0" || r.CreatedAt == "" || r.ProblemStatement == "" {
			t.Errorf("%s: version %q, created_at %q, problem_statement empty=%v", r.InstanceID, r.Version, r.CreatedAt, r.ProblemStatement == "")
		}
		f2p, p2p := labels(t, r)
		if len(f2p) == 0 || len(p2p) == 0 {
			t.Errorf("%s: FAIL_TO_PASS has %d and PASS_TO_PASS %d tests, want both non-empty", r.InstanceID, len(f2p), len(p2p))
		}
		mirror := repos.Mirror(Project(r.Repo))
		for _, c := range []string{r.BaseCommit, r.EnvironmentSetupCommit} {
			if out, err := exec.Command("git", "-C", mirror, "cat-file", "-e", c+"^{commit}").CombinedOutput(); err != nil {
				t.Errorf("%s: commit %s not in %s: %v %s", r.InstanceID, c, mirror, err, out)
			}
		}
		newer := gitOut(t, mirror, "rev-list", "--count", r.BaseCommit+"..main")
		if newer == "0" {
			t.Errorf("%s: no commits after base %s in the mirror; the leak check would not be exercised", r.InstanceID, r.BaseCommit)
		}
	}
	if len(projects) < 2 {
		t.Errorf("dataset covers %d projects, want at least 2", len(projects))
	}
	// One project is not Python: its labels come from another runner's log
	// (labels_from), with at least two instances.
	other := map[string]int{}
	for _, r := range recs {
		if projectLabelsFrom(t, r.Repo) != nil {
			other[r.Repo]++
		}
	}
	if len(other) == 0 {
		t.Errorf("no project with labels from a non-pytest runner (labels_from)")
	}
	for repo, n := range other {
		if n < 2 {
			t.Errorf("%s has %d instances, want at least 2", repo, n)
		}
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out))
}

// pytestStatuses reads `pytest -rA` output the way SWE-bench's pytest log
// parser does: lines starting with a status word, the test name second.
func pytestStatuses(log string) map[string]string {
	st := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		for _, s := range []string{"PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"} {
			if !strings.HasPrefix(line, s+" ") {
				continue
			}
			if s == "FAILED" {
				line = strings.Replace(line, " - ", " ", -1)
			}
			if f := strings.Fields(line); len(f) > 1 {
				st[f[1]] = f[0]
			}
		}
	}
	return st
}

func TestPytestStatuses(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want map[string]string
	}{
		{"passed", "PASSED tests/test_ops.py::test_add", map[string]string{"tests/test_ops.py::test_add": "PASSED"}},
		{"failed with message", "FAILED tests/test_ops.py::test_div_values[-3-2--1.5] - assert -2 == -1.5",
			map[string]string{"tests/test_ops.py::test_div_values[-3-2--1.5]": "FAILED"}},
		{"progress lines ignored", "tests/test_ops.py ..F.   [100%]\n=== short test summary info ===", map[string]string{}},
		{"error", "ERROR tests/test_x.py::test_y", map[string]string{"tests/test_x.py::test_y": "ERROR"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pytestStatuses(tc.log)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// testFiles lists the files a test patch touches (the eval test directives).
func testFiles(patch string) []string {
	var files []string
	for _, line := range strings.Split(patch, "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git a/"); ok {
			if i := strings.Index(rest, " b/"); i >= 0 {
				files = append(files, rest[:i])
			}
		}
	}
	return files
}

func runGit(t *testing.T, dir, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func runPytest(t *testing.T, py, dir string, files []string) map[string]string {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-m", "pytest", "-rA", "-p", "no:cacheprovider"}, files...)...)
	cmd.Dir = dir // python -m puts the checkout on sys.path, like an editable install
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=")
	out, _ := cmd.CombinedOutput() // pytest exits 1 when tests fail; the statuses say what happened
	st := pytestStatuses(string(out))
	if len(st) == 0 {
		t.Fatalf("pytest in %s reported no tests:\n%s", dir, out)
	}
	return st
}

// tapLine is upstream parse_log_tap's rule, applied to a stripped line.
var tapLine = regexp.MustCompile(`^(ok|not ok) (\d+) (.+)$`)

// tapStatuses reads a TAP log the way upstream's parse_log_tap does: on each
// stripped line "ok N NAME" is PASSED, "not ok N NAME" FAILED, the name being
// everything after the number (for node:test that includes its "- ").
func tapStatuses(log string) map[string]string {
	st := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if m := tapLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			st[m[3]] = map[string]string{"ok": "PASSED", "not ok": "FAILED"}[m[1]]
		}
	}
	return st
}

func TestTapStatuses(t *testing.T) {
	tests := []struct {
		name, log string
		want      map[string]string
	}{
		{"node:test", "TAP version 13\n# Subtest: compare returns 0\nok 1 - compare returns 0\n  ---\n  duration_ms: 0.5\n  ...\n1..1",
			map[string]string{"- compare returns 0": "PASSED"}},
		{"nested and failed", "    not ok 2 - sort orders numerically\n      ---\n      failureType: 'testCodeFailure'",
			map[string]string{"- sort orders numerically": "FAILED"}},
		{"mocha style, no dash", "ok 1 supports gzip\nnot ok 2 supports deflate",
			map[string]string{"supports gzip": "PASSED", "supports deflate": "FAILED"}},
		{"plan and comments ignored", "1..3\n# pass 2\n# fail 1\nok\nnot ok", map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tapStatuses(tc.log); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// labelsFrom is a project's instances.json "labels_from": the test command
// whose TAP log scripts/fixture.sh dataset made the labels from (nil for
// projects whose labels are listed and run with pytest).
type labelsFrom struct {
	Command []string `json:"command"`
	Log     string   `json:"log"`
}

func projectLabelsFrom(t *testing.T, repo string) *labelsFrom {
	t.Helper()
	path := filepath.Join(FixtureDir(t), "projects", Project(repo), "instances.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		LabelsFrom *labelsFrom `json:"labels_from"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return spec.LabelsFrom
}

// runTap runs the project's TAP test command on each test file of the patch
// with the host's node. The runner's entry for a whole file (named by the
// file's path) is not a test.
func runTap(t *testing.T, node string, lf *labelsFrom, dir string, files []string) map[string]string {
	t.Helper()
	if lf.Log != "tap" || len(lf.Command) == 0 || lf.Command[0] != "node" {
		t.Fatalf("labels_from %+v: want a node command with a TAP log", lf)
	}
	st := map[string]string{}
	for _, f := range files {
		cmd := exec.Command(node, append(append([]string{}, lf.Command[1:]...), f)...)
		cmd.Dir = dir
		out, _ := cmd.Output() // node exits 1 when tests fail; the statuses say what happened
		got := tapStatuses(string(out))
		delete(got, "- "+filepath.Join(dir, f))
		delete(got, "- "+f)
		if len(got) == 0 {
			t.Fatalf("%s %s in %s reported no tests:\n%s", node, f, dir, out)
		}
		for k, v := range got {
			st[k] = v
		}
	}
	return st
}

// TestGoldPatchSatisfiesLabels checks every instance in a plain checkout of
// its base commit: with the test patch alone FAIL_TO_PASS tests fail and
// PASS_TO_PASS tests pass; with the gold patch too, all of them pass, and they
// are exactly the tests the runner reports for the test patch's files (pytest
// with Debian's python3; for a project whose labels come from a TAP command,
// that command with the host's node).
func TestGoldPatchSatisfiesLabels(t *testing.T) {
	repos := SharedRepos(t)
	for _, r := range loadDataset(t) {
		t.Run(r.InstanceID, func(t *testing.T) {
			run := func(dir string, files []string) map[string]string {
				return runPytest(t, Python(t), dir, files)
			}
			if lf := projectLabelsFrom(t, r.Repo); lf != nil {
				node := Node(t)
				run = func(dir string, files []string) map[string]string { return runTap(t, node, lf, dir, files) }
			}
			f2p, p2p := labels(t, r)
			dir := filepath.Join(t.TempDir(), "testbed")
			if out, err := exec.Command("git", "clone", "-q", repos.Mirror(Project(r.Repo)), dir).CombinedOutput(); err != nil {
				t.Fatalf("git clone: %v\n%s", err, out)
			}
			runGit(t, dir, "", "reset", "-q", "--hard", r.BaseCommit)
			runGit(t, dir, r.TestPatch, "apply", "-v", "-")
			files := testFiles(r.TestPatch)

			before := run(dir, files)
			for _, name := range f2p {
				if before[name] == "PASSED" {
					t.Errorf("without the gold patch FAIL_TO_PASS %s passed", name)
				}
			}
			for _, name := range p2p {
				if before[name] != "PASSED" {
					t.Errorf("without the gold patch PASS_TO_PASS %s is %q, want PASSED", name, before[name])
				}
			}

			runGit(t, dir, r.Patch, "apply", "-v", "-")
			after := run(dir, files)
			var labelled []string
			for _, name := range append(append([]string{}, f2p...), p2p...) {
				labelled = append(labelled, name)
				if after[name] != "PASSED" {
					t.Errorf("with the gold patch %s is %q, want PASSED", name, after[name])
				}
			}
			var reported []string
			for name := range after {
				reported = append(reported, name)
			}
			sort.Strings(labelled)
			sort.Strings(reported)
			if strings.Join(labelled, "\n") != strings.Join(reported, "\n") {
				t.Errorf("labels do not cover the tests the runner ran:\nlabelled %v\nreported %v", labelled, reported)
			}
		})
	}
}

// TestMirrorExercisesLeakCheck replays upstream's setup_repo.sh repository
// steps against the local mirror (instead of GitHub): the clone holds newer
// commits and tags, and after the reset, tag deletion and gc the upstream
// check (no commit newer than the base commit's timestamp) passes.
func TestMirrorExercisesLeakCheck(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		missing(t, "bash: %v", err)
	}
	repos := SharedRepos(t)
	for _, r := range loadDataset(t) {
		t.Run(r.InstanceID, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "testbed")
			script := fmt.Sprintf(`set -euo pipefail
git clone -o origin --single-branch %[1]q %[2]q
cd %[2]q
before=$(git log --oneline --all --since="$(git show -s --format=%%ci %[3]s) + 1 second" | wc -l)
git reset --hard %[3]s
git remote remove origin
TARGET_TIMESTAMP=$(git show -s --format=%%ci %[3]s)
deleted=0
while read tag; do TAG_COMMIT=$(git rev-list -n 1 "$tag"); TAG_TIME=$(git show -s --format=%%ci "$TAG_COMMIT"); if [[ "$TAG_TIME" > "$TARGET_TIMESTAMP" ]]; then git tag -d "$tag"; deleted=$((deleted+1)); fi; done < <(git tag -l)
git reflog expire --expire=now --all
git gc --prune=now --aggressive --quiet
AFTER_TIMESTAMP=$(date -d "$TARGET_TIMESTAMP + 1 second" '+%%Y-%%m-%%d %%H:%%M:%%S')
COMMIT_COUNT=$(git log --oneline --all --since="$AFTER_TIMESTAMP" | wc -l)
echo "before=$before deleted=$deleted after=$COMMIT_COUNT head=$(git rev-parse HEAD)"
`, repos.Mirror(Project(r.Repo)), dir, r.BaseCommit)
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("setup steps: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			var before, deleted, after int
			var head string
			if _, err := fmt.Sscanf(lines[len(lines)-1], "before=%d deleted=%d after=%d head=%s", &before, &deleted, &after, &head); err != nil {
				t.Fatalf("parsing %q: %v", lines[len(lines)-1], err)
			}
			if before == 0 {
				t.Errorf("the clone had no commits newer than the base commit; the leak check is not exercised")
			}
			if deleted == 0 {
				t.Errorf("no tag newer than the base commit was deleted; every project should tag a later release")
			}
			if after != 0 {
				t.Errorf("after cleanup %d newer commits remain", after)
			}
			if head != r.BaseCommit {
				t.Errorf("HEAD is %s, want base commit %s", head, r.BaseCommit)
			}
		})
	}
}
