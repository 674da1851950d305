package ci

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// actionlintPath finds actionlint: $ACTIONLINT, the swebuild cache where
// scripts/install-actionlint.sh puts it, then PATH.
func actionlintPath() string {
	if p := os.Getenv("ACTIONLINT"); p != "" {
		return p
	}
	cache := os.Getenv("SWEBUILD_CACHE")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache", "swebuild")
		}
	}
	if cache != "" {
		p := filepath.Join(cache, "bin", "actionlint")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("actionlint"); err == nil {
		return p
	}
	return ""
}

func workflowFiles(t *testing.T) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pat := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, ".github", "workflows", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no workflow files under .github/workflows")
	}
	return files
}

// TestActionlint runs actionlint on every workflow. Without actionlint the
// test skips, or fails when CI is set (scripts/install-actionlint.sh).
func TestActionlint(t *testing.T) {
	bin := actionlintPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("actionlint not found: run scripts/install-actionlint.sh (or set ACTIONLINT)")
		}
		t.Skip("actionlint not found: run scripts/install-actionlint.sh")
	}
	files := workflowFiles(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-no-color"}, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint %v: %v\n%s", files, err, out)
	}
}

var (
	usesLine  = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	pinnedRef = regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	versionRe = regexp.MustCompile(`^\s*#\s*v\d+(\.\d+)*\s*$`)
)

// TestWorkflowPinsAndPermissions checks every action is pinned to a full
// commit SHA with a version comment, the workflow grants nothing at the top
// level, and secrets are only read through secrets.*.
func TestWorkflowPinsAndPermissions(t *testing.T) {
	for _, f := range workflowFiles(t) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		line := 0
		topPermissions := false
		for sc.Scan() {
			line++
			text := sc.Text()
			if text == "permissions: {}" {
				topPermissions = true
			}
			if m := usesLine.FindStringSubmatch(text); m != nil {
				if strings.HasPrefix(m[1], "./") {
					continue
				}
				if !pinnedRef.MatchString(m[1]) {
					t.Errorf("%s:%d: %s is not pinned to a full commit SHA", f, line, m[1])
				}
				if !versionRe.MatchString(m[2]) {
					t.Errorf("%s:%d: %s has no version comment (# vX.Y.Z)", f, line, m[1])
				}
			}
			if strings.Contains(text, "TOKEN") && strings.Contains(text, "${{") && !strings.Contains(text, "secrets.") {
				t.Errorf("%s:%d: a token not read through secrets.*: %s", f, line, strings.TrimSpace(text))
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if !topPermissions {
			t.Errorf("%s: no top-level `permissions: {}` (each job must ask for what it needs)", f)
		}
	}
}

// The nightly workflow as far as the tests below read it.
type wfStep struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]any    `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type wfJob struct {
	Needs    any               `yaml:"needs"`
	If       string            `yaml:"if"`
	Outputs  map[string]string `yaml:"outputs"`
	Env      map[string]string `yaml:"env"`
	Strategy struct {
		Matrix any `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []wfStep `yaml:"steps"`
}

func (j wfJob) needs() []string {
	switch v := j.Needs.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

func readNightly(t *testing.T) map[string]wfJob {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "nightly.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]wfJob `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("nightly.yml: %v", err)
	}
	return wf.Jobs
}

// compilesBuildKit reports whether a run step would compile buildkitd:
// scripts/stack.sh build, make demo or stack (which build it when it is
// missing), or a go build/install of BuildKit's commands.
func compilesBuildKit(run string) bool {
	return strings.Contains(run, "stack.sh build") || strings.Contains(run, "make demo") || strings.Contains(run, "make stack") ||
		(strings.Contains(run, "go ") && strings.Contains(run, "moby/buildkit/cmd"))
}

// TestNightlyNoJobCompilesBuildKit: only the buildkit job compiles
// buildkitd, and only when its cache entry (keyed on the runner arch, the
// BuildKit version of go.mod and the build flags) is missing; every job that
// starts BuildKit first restores exactly that entry and fails without it, so
// `stack.sh up` finds the binaries and compiles nothing.
func TestNightlyNoJobCompilesBuildKit(t *testing.T) {
	jobs := readNightly(t)
	bk, ok := jobs["buildkit"]
	if !ok {
		t.Fatal("no buildkit job")
	}
	var saveKey, savePath string
	var lookup *wfStep
	for i, s := range bk.Steps {
		switch {
		case strings.HasPrefix(s.Uses, "actions/cache/restore@"):
			lookup = &bk.Steps[i]
		case strings.HasPrefix(s.Uses, "actions/cache/save@"):
			saveKey, savePath = fmt.Sprint(s.With["key"]), fmt.Sprint(s.With["path"])
			if !strings.Contains(s.If, "cache-hit != 'true'") {
				t.Errorf("buildkit job: the save runs on a cache hit too (if %q)", s.If)
			}
		case compilesBuildKit(s.Run):
			if !strings.Contains(s.If, "cache-hit != 'true'") {
				t.Errorf("buildkit job: step %q compiles BuildKit on a cache hit too (if %q)", s.Name, s.If)
			}
		}
	}
	if lookup == nil || lookup.With["lookup-only"] != true || fmt.Sprint(lookup.With["key"]) != saveKey {
		t.Fatalf("buildkit job: no lookup-only restore with the save's key %q", saveKey)
	}
	for _, part := range []string{"runner.arch", "steps.buildkit.outputs.version", "hashFiles('scripts/go-build.sh'"} {
		if !strings.Contains(saveKey, part) {
			t.Errorf("buildkit cache key %q does not depend on %s", saveKey, part)
		}
	}
	starts := 0
	for name, j := range jobs {
		restored := false
		for _, s := range j.Steps {
			if name != "buildkit" && compilesBuildKit(s.Run) {
				t.Errorf("job %s: step %q compiles BuildKit", name, s.Name)
			}
			if name != "buildkit" && strings.HasPrefix(s.Uses, "actions/cache/restore@") && fmt.Sprint(s.With["key"]) == saveKey {
				if fmt.Sprint(s.With["path"]) != savePath || s.With["fail-on-cache-miss"] != true {
					t.Errorf("job %s: the BuildKit restore has path %v, fail-on-cache-miss %v", name, s.With["path"], s.With["fail-on-cache-miss"])
				}
				restored = true
			}
			if strings.Contains(s.Run, "stack.sh up") {
				starts++
				if !restored {
					t.Errorf("job %s: starts BuildKit before restoring the cached binaries", name)
				}
				if !slices.Contains(j.needs(), "buildkit") {
					t.Errorf("job %s: starts BuildKit but does not wait for the buildkit job (needs %v)", name, j.needs())
				}
			}
		}
	}
	if starts != 3 {
		t.Errorf("%d jobs start BuildKit, want 3 (envs, build and repair)", starts)
	}
}

// TestNightlyEnvStage: the plan's env stage is wired through: prepare emits
// the env matrix (reading the env ledger), the envs job builds one env job
// per matrix entry and uploads its records, every instance shard waits for
// it and builds FROM those records (PLAN, ENVS_DIR), and the merge keeps the
// night's env records in the env ledger.
func TestNightlyEnvStage(t *testing.T) {
	jobs := readNightly(t)
	prep := jobs["prepare"]
	if !strings.Contains(prep.Outputs["envs_matrix"], "steps.matrix.outputs.envs_matrix") {
		t.Errorf("prepare outputs %v: no envs_matrix", prep.Outputs)
	}
	runs := func(j wfJob, what string) *wfStep {
		for i, s := range j.Steps {
			if strings.Contains(s.Run, what) {
				return &j.Steps[i]
			}
		}
		return nil
	}
	if s := runs(prep, "ci matrix"); s == nil || !strings.Contains(s.Run, "--env-ledger state/envs.jsonl") {
		t.Error("prepare: ci matrix does not read the env ledger")
	}
	envs, ok := jobs["envs"]
	if !ok {
		t.Fatal("no envs job")
	}
	if fmt.Sprint(envs.Strategy.Matrix) != "${{ fromJSON(needs.prepare.outputs.envs_matrix) }}" || !strings.Contains(envs.If, "envs_jobs != '0'") {
		t.Errorf("envs job: matrix %v, if %q", envs.Strategy.Matrix, envs.If)
	}
	if runs(envs, "nightly-shard.sh envs") == nil || envs.Env["ENV_JOB"] == "" || envs.Env["PLAN"] == "" {
		t.Error("envs job: does not run `nightly-shard.sh envs` with ENV_JOB and PLAN")
	}
	uploads := false
	for _, s := range envs.Steps {
		uploads = uploads || (strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasPrefix(fmt.Sprint(s.With["name"]), "envs-"))
	}
	if !uploads {
		t.Error("envs job: its records are not uploaded as an envs-* artifact")
	}
	build := jobs["build"]
	if !slices.Contains(build.needs(), "envs") || !strings.Contains(build.If, "needs.envs.result == 'skipped'") {
		t.Errorf("build job: needs %v, if %q: must wait for the env stage and run when it had nothing to do", build.needs(), build.If)
	}
	if build.Env["PLAN"] == "" || build.Env["ENVS_DIR"] == "" || runs(build, "nightly-shard.sh build") == nil {
		t.Errorf("build job env %v: the shards do not build FROM the env stage", build.Env)
	}
	downloads := false
	for _, s := range build.Steps {
		downloads = downloads || (strings.HasPrefix(s.Uses, "actions/download-artifact@") && fmt.Sprint(s.With["pattern"]) == "envs-*" && fmt.Sprint(s.With["path"]) == build.Env["ENVS_DIR"]+"/")
	}
	if !downloads {
		t.Error("build job: the envs-* artifacts are not downloaded into ENVS_DIR")
	}
	saved := false
	for _, s := range jobs["merge"].Steps {
		saved = saved || strings.Contains(s.Run, "ci ledger push") && strings.Contains(s.Run, "--file state/envs.jsonl")
	}
	if !saved || runs(jobs["merge"], ">> state/envs.jsonl") == nil {
		t.Error("merge job: tonight's env records are not kept in the env ledger")
	}
}

// TestNightlyRepair: the repair is wired in: it runs when a shard failed,
// after the env stage and the shards, reads tonight's env records and shard
// results and last night's env ledger, and uploads its report, proposal and
// records; the merge merges its records after the shards', keeps its env
// images in the env ledger, shows its report, and gives drift the ledger
// and the limit of unrecorded changes.
func TestNightlyRepair(t *testing.T) {
	jobs := readNightly(t)
	rep, ok := jobs["repair"]
	if !ok {
		t.Fatal("no repair job")
	}
	for _, n := range []string{"prepare", "buildkit", "envs", "build"} {
		if !slices.Contains(rep.needs(), n) {
			t.Errorf("repair job needs %v, not %s", rep.needs(), n)
		}
	}
	if !strings.Contains(rep.If, "needs.build.result == 'failure'") {
		t.Errorf("repair job if %q: must run when a shard failed", rep.If)
	}
	var run, pull string
	uploads, shards := false, false
	for _, s := range rep.Steps {
		switch {
		case strings.Contains(s.Run, "ci repair"):
			run = s.Run
		case strings.Contains(s.Run, "ci ledger pull"):
			pull = s.Run
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.With["name"] == "repair":
			uploads = strings.Contains(fmt.Sprint(s.With["path"]), "repair/proposal.json") && strings.Contains(fmt.Sprint(s.With["path"]), "repair/records.jsonl")
		case strings.HasPrefix(s.Uses, "actions/download-artifact@") && s.With["pattern"] == "shard-*":
			shards = true
		}
	}
	for _, want := range []string{"--plan plan/plan.json", "--results shards", "--envs envs", "--env-ledger state/envs.jsonl", "--push \"$REPO/build-cache\"", "--out repair"} {
		if !strings.Contains(run, want) {
			t.Errorf("repair step %q lacks %s", run, want)
		}
	}
	if !strings.Contains(pull, "--tag swebuild-envs-ledger --file state/envs.jsonl") || !uploads || !shards {
		t.Errorf("repair job: env ledger pull %q, uploads the repair artifact %v, downloads the shards %v", pull, uploads, shards)
	}
	merge := jobs["merge"]
	if !slices.Contains(merge.needs(), "repair") {
		t.Errorf("merge needs %v, not repair", merge.needs())
	}
	var mergeRun, driftRun, summaryRun, ledgerRun string
	for _, s := range merge.Steps {
		switch {
		case strings.Contains(s.Run, "ci merge"):
			mergeRun = s.Run
		case strings.Contains(s.Run, "swebuild drift"):
			driftRun = s.Run
		case strings.Contains(s.Run, "ci summary"):
			summaryRun = s.Run + fmt.Sprint(s.Env)
		case strings.Contains(s.Run, ">> state/envs.jsonl"):
			ledgerRun = s.Run
		}
	}
	if !strings.Contains(mergeRun, "--results repair/records.jsonl") || strings.Index(mergeRun, "--results shards") > strings.Index(mergeRun, "repair/records.jsonl") {
		t.Errorf("merge %q: the repair's records are not read after the shards'", mergeRun)
	}
	if !strings.Contains(ledgerRun, "repair") || !strings.Contains(summaryRun, "--repair") || !strings.Contains(summaryRun, "repair/report.md") {
		t.Errorf("merge: env ledger %q, summary %q", ledgerRun, summaryRun)
	}
	if !strings.Contains(driftRun, "--ledger state/ledger.jsonl") || !strings.Contains(driftRun, "--max-unrecorded") {
		t.Errorf("drift %q: no ledger or unrecorded limit", driftRun)
	}
}
