// Package taskrepo reads and checks an upstream SWE-bench v5 task repo:
//
//	sweb.yaml                   the datasets the repo publishes and their splits
//	tasks/<instance_id>/
//	    task.yaml               metadata (repo, version, base_commit, split, datasets, image, log_parser, eval_type, ...)
//	    tests.json              FAIL_TO_PASS and PASS_TO_PASS
//	    eval.sh, Dockerfile     the eval script and the flat Dockerfile of the task's image
//	    gold.patch, test.patch, problem_statement.md, hints.md (optional)
//	    problem_assets/, test_assets/, ...   files the Dockerfile may COPY (the task dir is its build context)
//
// Open checks the tree as upstream's `swebench dataset check` does
// (swebench/task/checks.py, v5.0.2): every problem names the task and the
// file, a task with an error is left out and the others go on. Each valid
// task yields a core.Instance (the record upstream's load_task builds)
// plus its Dockerfile and its directory. Select picks the tasks a command
// acts on: named ids from any split, else the tasks of the published splits.
package taskrepo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/manifests/naming"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

// DeprecatedSplit is the split of retired tasks: upstream's checks let a
// task there name no datasets, no split sweb.yaml publishes, and an empty
// FAIL_TO_PASS.
const DeprecatedSplit = "deprecated"

// requiredFiles are the files every task directory holds (checks.py
// REQUIRED_FILES).
var requiredFiles = []string{layout.TaskFile, layout.TestsFile, layout.Dockerfile, layout.GoldPatch, layout.TestPatch, layout.EvalFile, layout.ProblemFile}

// requiredKeys are the keys task.yaml must have (checks.py REQUIRED_KEYS).
var requiredKeys = []string{"instance_id", "repo", "version", "base_commit", "split", "image", "log_parser", "eval_type"}

// evalMarkers must both be in eval.sh, or grading cannot read the run.
var evalMarkers = []string{">>>>> Start Test Output", ">>>>> End Test Output"}

// MaxFileBytes caps one file of a task (task.yaml, a patch, eval.sh, the
// Dockerfile): dataset.DefaultMaxRecordBytes, the cap of a whole record.
const MaxFileBytes = dataset.DefaultMaxRecordBytes

// Repo is an opened task repo.
type Repo struct {
	// Dir is the repo's directory, absolute.
	Dir string
	// Datasets and Splits are what sweb.yaml publishes (splits default
	// ["test"], as upstream's load_config).
	Datasets []string
	Splits   []string
	// Tasks are the tasks without errors, sorted by id.
	Tasks []Task
	// Invalid are the ids of task directories left out for errors.
	Invalid []string
	// Warnings are problems that do not stop anything (eval cards).
	Warnings []Problem
	// realDir is Dir with symbolic links resolved: files a link leads
	// out of are not read.
	realDir string
}

// Task is one valid task.
type Task struct {
	// Instance is the record (Source is the task.yaml path).
	Instance core.Instance
	// Split and Datasets are task.yaml's routing keys.
	Split    string
	Datasets []string
	// Dir is the task directory, absolute: the Dockerfile's build context.
	Dir string
	// Dockerfile is the task's flat Dockerfile.
	Dockerfile []byte
	// X86Only, when set, is why the task gets no linux/arm64 image
	// (task.yaml's x86_only: the decision of the dataset it was written
	// from, e.g. USE_X86).
	X86Only string
}

// Problem is one thing wrong with the repo. Where is "sweb.yaml",
// "tasks/" or "tasks/<id>/<file>" (with ":line" when known).
type Problem struct {
	// Task is the task's id ("" for the repo itself).
	Task string
	// Where is the file, relative to the repo, and the line when known.
	Where string
	// Field is the task.yaml or tests.json key at fault, if any.
	Field string
	Msg   string
	// Warning problems are reported and stop nothing.
	Warning bool
}

func (p Problem) Error() string {
	sev := "error"
	if p.Warning {
		sev = "warning"
	}
	if p.Field != "" {
		return fmt.Sprintf("%s: %s: field %q: %s", sev, p.Where, p.Field, p.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", sev, p.Where, p.Msg)
}

// CheckError lists the errors Open found; the Repo returned with it holds
// the tasks that had none.
type CheckError struct {
	Dir      string
	Problems []Problem
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in task repo %s:", len(e.Problems), e.Dir)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Open reads and checks the task repo at dir. It returns the repo with its
// valid tasks and, when any task (or the repo) has errors, a *CheckError
// listing every one; the repo is returned even then, unless sweb.yaml or
// tasks/ cannot be used at all (nil Repo).
func Open(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("task repo %s: %w", dir, err)
	}
	r := &Repo{Dir: abs, realDir: abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		r.realDir = real
	}
	if err := r.loadConfig(); err != nil {
		return nil, &CheckError{Dir: abs, Problems: []Problem{*err}}
	}
	root := filepath.Join(abs, layout.TasksDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, &CheckError{Dir: abs, Problems: []Problem{{Where: layout.TasksDir + "/", Msg: fmt.Sprintf("%s has no %s/ directory: %v", dir, layout.TasksDir, err)}}}
	}
	var problems []Problem
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			// Upstream's checks follow it; here a task directory is a build
			// context and must be a directory of the repo.
			target, _ := os.Readlink(filepath.Join(root, e.Name()))
			problems = append(problems, Problem{Task: e.Name(), Where: layout.TasksDir + "/" + e.Name(),
				Msg: fmt.Sprintf("a symbolic link (to %s), not a directory of the repo: left out (a task directory is its image's whole build context)", target)})
			r.Invalid = append(r.Invalid, e.Name())
			continue
		}
		if !e.IsDir() {
			continue
		}
		t, ps := r.loadTask(filepath.Join(root, e.Name()))
		for _, p := range ps {
			if p.Warning {
				r.Warnings = append(r.Warnings, p)
			} else {
				problems = append(problems, p)
			}
		}
		if t == nil {
			continue
		}
		if slices.ContainsFunc(ps, func(p Problem) bool { return !p.Warning }) {
			r.Invalid = append(r.Invalid, e.Name())
			continue
		}
		r.Tasks = append(r.Tasks, *t)
	}
	if len(r.Tasks) == 0 && len(r.Invalid) == 0 {
		problems = append(problems, Problem{Where: layout.TasksDir + "/", Msg: "no task directories"})
	}
	problems = append(problems, r.collisions()...)
	r.Warnings = append(r.Warnings, r.evalCards()...)
	if len(problems) > 0 {
		return r, &CheckError{Dir: abs, Problems: problems}
	}
	return r, nil
}

// loadConfig reads sweb.yaml.
func (r *Repo) loadConfig() *Problem {
	b, err := r.read(filepath.Join(r.Dir, layout.ConfigFile))
	if err != nil {
		return &Problem{Where: layout.ConfigFile, Msg: fmt.Sprintf("%s has no readable %s: %v", r.Dir, layout.ConfigFile, err)}
	}
	var cfg layout.Config
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return &Problem{Where: layout.ConfigFile, Msg: "not valid YAML: " + err.Error()}
	}
	if len(cfg.Datasets) == 0 {
		return &Problem{Where: layout.ConfigFile, Field: "datasets", Msg: "does not name any datasets"}
	}
	if cfg.Splits == nil {
		cfg.Splits = []string{"test"}
	}
	r.Datasets, r.Splits = cfg.Datasets, cfg.Splits
	return nil
}

// loadTask reads one task directory: nil when it is not a task at all (no
// task.yaml, reported); otherwise the task (partial when task.yaml cannot
// be read) and its problems. The steps: the files present, task.yaml,
// tests.json, then the text files.
func (r *Repo) loadTask(dir string) (*Task, []Problem) {
	l := &taskLoader{repo: r, dir: dir, id: filepath.Base(dir)}
	if !l.files() {
		return nil, l.ps
	}
	t := &Task{Dir: dir}
	t.Instance.Source = l.where(layout.TaskFile)
	if !l.meta(t) {
		return t, l.ps // left out as invalid
	}
	l.tests(t)
	l.texts(t)
	return t, l.ps
}

// taskLoader reads one task directory and collects its problems.
type taskLoader struct {
	repo *Repo
	dir  string
	id   string
	ps   []Problem
}

func (l *taskLoader) where(file string) string { return layout.TasksDir + "/" + l.id + "/" + file }

func (l *taskLoader) add(file, field, format string, a ...any) {
	l.ps = append(l.ps, Problem{Task: l.id, Where: l.where(file), Field: field, Msg: fmt.Sprintf(format, a...)})
}

// read reads a file of the task (the repo's read: bounded, no symbolic
// link out of the repo).
func (l *taskLoader) read(file string) ([]byte, error) {
	return l.repo.read(filepath.Join(l.dir, file))
}

// files checks the files a task must have and the directory's name; false
// when there is no task.yaml (not a task).
func (l *taskLoader) files() bool {
	if _, err := os.Stat(filepath.Join(l.dir, layout.TaskFile)); err != nil {
		l.add("", "", "no %s, so it is not a task", layout.TaskFile)
		return false
	}
	var missing []string
	for _, f := range requiredFiles {
		if fi, err := os.Stat(filepath.Join(l.dir, f)); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		l.add("", "", "missing %s", strings.Join(missing, ", "))
	}
	if err := naming.ValidateID(l.id); err != nil {
		l.add("", "", "directory name: %v", err)
	}
	return true
}

// metaKeys are the task.yaml keys with a field of their own; any other key
// is one of the record's other columns (core.Instance.Extra).
var metaKeys = map[string]bool{
	"instance_id": true, "repo": true, "version": true, "base_commit": true, "created_at": true,
	"environment_setup_commit": true, "split": true, "datasets": true, "image": true, "log_parser": true,
	"eval_type": true, "image_assets": true, X86OnlyKey: true,
}

// X86OnlyKey is the task.yaml key saying a task gets no linux/arm64 image,
// and why (swebuild's; upstream's task repos are x86-only throughout and
// have no such key): `swebuild render --task-repo-out` writes the decision
// the dataset path made (USE_X86, a --specs x86_only list, an x86-only
// rule), so the exported repo plans as the dataset does.
const X86OnlyKey = "x86_only"

// meta reads task.yaml into the task; false when it cannot be read as a
// mapping at all.
func (l *taskLoader) meta(t *Task) bool {
	in := &t.Instance
	b, err := l.read(layout.TaskFile)
	if err != nil {
		l.add(layout.TaskFile, "", "%v", err)
		return false
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		l.add(layout.TaskFile, "", "not valid YAML: %v", err)
		return false
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		l.add(layout.TaskFile, "", "not a mapping")
		return false
	}
	keys := map[string]*yaml.Node{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i].Value, m.Content[i+1]
		keys[k] = v
		if !metaKeys[k] {
			j, err := yamlJSON(v, 0)
			if err != nil {
				l.add(at(v), k, "%v", err)
				continue
			}
			in.SetExtra(k, j)
		}
	}
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			l.add(layout.TaskFile, k, "missing")
		}
	}
	str := func(key string, dst *string) {
		n, ok := keys[key]
		if !ok {
			return
		}
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			l.add(at(n), key, "not a string")
			return
		}
		*dst = n.Value // the text as written: version 1.0 stays "1.0"
	}
	str("instance_id", &in.InstanceID)
	str("repo", &in.Repo)
	str("version", &in.Version)
	str("base_commit", &in.BaseCommit)
	str("created_at", &in.CreatedAt)
	str("environment_setup_commit", &in.EnvironmentSetupCommit)
	str("split", &t.Split)
	str("image", &in.Image)
	str("log_parser", &in.LogParser)
	str("eval_type", &in.EvalType)
	str(X86OnlyKey, &t.X86Only)
	if n, ok := keys[X86OnlyKey]; ok && t.X86Only == "" && n.Tag != "!!null" {
		l.add(at(n), X86OnlyKey, "empty: say why the task is x86-only, or leave the key out")
	}
	if in.InstanceID != "" && in.InstanceID != l.id {
		l.add(at(keys["instance_id"]), "instance_id", "is %q, not the directory's name", in.InstanceID)
	}
	in.InstanceID = l.id
	l.routing(t, keys)
	if n, ok := keys["image"]; ok && in.Image != "" && in.Image != ExpectedImage(l.id) {
		l.add(at(n), "image", "%q is not the derived name %s", in.Image, ExpectedImage(l.id))
	}
	if n, ok := keys["image_assets"]; ok && n.Tag != "!!null" {
		if j, err := yamlJSON(n, 0); err != nil {
			l.add(at(n), "image_assets", "%v", err)
		} else {
			in.ImageAssets = j
		}
	}
	return true
}

// routing checks datasets and split against sweb.yaml.
func (l *taskLoader) routing(t *Task, keys map[string]*yaml.Node) {
	r := l.repo
	if n, ok := keys["datasets"]; ok && n.Tag != "!!null" {
		if err := n.Decode(&t.Datasets); err != nil {
			l.add(at(n), "datasets", "not a list of strings")
		} else if unknown := minus(t.Datasets, r.Datasets); len(unknown) > 0 {
			l.add(at(n), "datasets", "not published by %s: %s", layout.ConfigFile, strings.Join(unknown, " "))
		}
	}
	if len(t.Datasets) == 0 && t.Split != DeprecatedSplit {
		l.add(layout.TaskFile, "datasets", "does not say which datasets it belongs to")
	}
	if n, ok := keys["split"]; ok && t.Split != "" && t.Split != DeprecatedSplit && !slices.Contains(r.Splits, t.Split) {
		l.add(at(n), "split", "%q is not in %s", t.Split, layout.ConfigFile)
	}
}

// at is task.yaml's line of n.
func at(n *yaml.Node) string { return fmt.Sprintf("%s:%d", layout.TaskFile, n.Line) }

// tests reads tests.json: JSON, never YAML (upstream: no implicit typing).
func (l *taskLoader) tests(t *Task) {
	in := &t.Instance
	b, err := l.read(layout.TestsFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.add(layout.TestsFile, "", "%v", err)
		}
		return
	}
	var tests map[string]json.RawMessage
	if err := json.Unmarshal(b, &tests); err != nil {
		l.add(layout.TestsFile, "", "not valid JSON: %v", err)
		return
	}
	for _, k := range []string{"FAIL_TO_PASS", "PASS_TO_PASS"} {
		raw, ok := tests[k]
		if !ok {
			l.add(layout.TestsFile, k, "missing")
			continue
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil || list == nil {
			l.add(layout.TestsFile, k, "not a list of strings")
			continue
		}
		if k == "FAIL_TO_PASS" {
			in.FailToPass = list
		} else {
			in.PassToPass = list
		}
	}
	if in.FailToPass != nil && len(in.FailToPass) == 0 && t.Split != DeprecatedSplit {
		l.add(layout.TestsFile, "FAIL_TO_PASS", "empty, so nothing grades this task")
	}
}

// texts reads eval.sh (both markers), the patches (diffs), the problem
// statement, the optional hints and the Dockerfile, bytes as they are.
func (l *taskLoader) texts(t *Task) {
	in := &t.Instance
	text := func(file string, dst *string) []byte {
		b, err := l.read(file)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				l.add(file, "", "%v", err)
			}
			return nil
		}
		*dst = string(b) // bytes as they are: CRLF in a patch survives
		return b
	}
	if b := text(layout.EvalFile, &in.EvalScript); b != nil {
		for _, mk := range evalMarkers {
			if !bytes.Contains(b, []byte(mk)) {
				l.add(layout.EvalFile, "", "has no %q marker", mk)
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{layout.GoldPatch, &in.Patch}, {layout.TestPatch, &in.TestPatch}} {
		if b := text(f.name, f.dst); len(b) > 0 && !bytes.Contains(b, []byte("diff --git")) {
			l.add(f.name, "", "does not look like a diff")
		}
	}
	text(layout.ProblemFile, &in.ProblemStatement)
	text(layout.HintsFile, &in.HintsText) // optional: "" when absent
	var df string
	if text(layout.Dockerfile, &df) != nil {
		t.Dockerfile = []byte(df)
		if len(bytes.TrimSpace(t.Dockerfile)) == 0 {
			l.add(layout.Dockerfile, "", "empty")
		}
	}
}

// collisions reports tasks whose ids give the same image names.
func (r *Repo) collisions() []Problem {
	ids := make([]string, len(r.Tasks))
	for i, t := range r.Tasks {
		ids[i] = t.Instance.InstanceID
	}
	var ps []Problem
	drop := map[int]bool{}
	for _, c := range naming.Collisions(ids, false) {
		drop[c.Second] = true
		ps = append(ps, Problem{Task: ids[c.Second], Where: layout.TasksDir + "/" + ids[c.Second] + "/", Msg: fmt.Sprintf("gets the same image names as %s (%s); the first is kept", ids[c.First], c.NameID)})
	}
	if len(drop) > 0 {
		kept := r.Tasks[:0]
		for i, t := range r.Tasks {
			if drop[i] {
				r.Invalid = append(r.Invalid, t.Instance.InstanceID)
				continue
			}
			kept = append(kept, t)
		}
		r.Tasks = kept
	}
	return ps
}

// evalCards warns about eval/*.yaml cards named for no published dataset.
func (r *Repo) evalCards() []Problem {
	published := map[string]bool{}
	for _, d := range r.Datasets {
		published[d[strings.LastIndex(d, "/")+1:]] = true
	}
	names, _ := filepath.Glob(filepath.Join(r.Dir, "eval", "*.yaml"))
	var ps []Problem
	for _, p := range names {
		stem := strings.TrimSuffix(filepath.Base(p), ".yaml")
		if !published[stem] {
			ps = append(ps, Problem{Where: "eval/" + filepath.Base(p), Msg: fmt.Sprintf("no dataset named %s in %s, so it is not published", stem, layout.ConfigFile), Warning: true})
		}
	}
	return ps
}

// ExpectedImage is the image name upstream derives for a task
// (checks.expected_image): swebench/sweb.eval.x86_64.<id>:latest, lower
// case, "__" as "_1776_".
func ExpectedImage(instanceID string) string {
	return "swebench/" + naming.NameID("sweb.eval.x86_64."+instanceID+":latest", false)
}

// Select returns the tasks a command acts on. With ids: exactly those, in
// the order given, from any split (a deprecated task is built by naming
// it); an id that is not a valid task is an error. Without: the tasks of
// the splits sweb.yaml publishes that belong to one of its datasets, by id;
// none is an error naming the splits the tree holds.
func (r *Repo) Select(ids []string) ([]Task, error) {
	byID := make(map[string]*Task, len(r.Tasks))
	for i := range r.Tasks {
		byID[r.Tasks[i].Instance.InstanceID] = &r.Tasks[i]
	}
	if len(ids) > 0 {
		var out []Task
		var missing, invalid []string
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			switch t, ok := byID[id]; {
			case ok:
				out = append(out, *t)
			case slices.Contains(r.Invalid, id):
				invalid = append(invalid, id)
			default:
				missing = append(missing, id)
			}
		}
		var errs []error
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("not in %s: %s", filepath.Join(r.Dir, layout.TasksDir), strings.Join(missing, " ")))
		}
		if len(invalid) > 0 {
			errs = append(errs, fmt.Errorf("task(s) with errors (see the check): %s", strings.Join(invalid, " ")))
		}
		return out, errors.Join(errs...)
	}
	var out []Task
	splits := map[string]int{}
	for _, t := range r.Tasks {
		splits[t.Split]++
		if slices.Contains(r.Splits, t.Split) && len(intersect(t.Datasets, r.Datasets)) > 0 {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		var held []string
		for _, s := range slices.Sorted(maps.Keys(splits)) {
			held = append(held, fmt.Sprintf("%s (%d)", s, splits[s]))
		}
		return nil, fmt.Errorf("task repo %s: no task in the published splits %s; the tree holds %s", r.Dir, strings.Join(r.Splits, ", "), strings.Join(held, ", "))
	}
	return out, nil
}

// Instances returns the records of tasks.
func Instances(tasks []Task) []core.Instance {
	out := make([]core.Instance, len(tasks))
	for i := range tasks {
		out[i] = tasks[i].Instance
	}
	return out
}

// read reads a file of the repo, at most MaxFileBytes. A symbolic link is
// followed only to a file inside the repo: one that leads out of it (to
// /etc/passwd, another checkout) is refused, naming where it leads.
func (r *Repo) read(path string) ([]byte, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, fmt.Errorf("a symbolic link that does not resolve: %w", err)
		}
		if !within(r.realDir, target) {
			return nil, fmt.Errorf("a symbolic link to %s, outside the task repo: not read", target)
		}
	}
	return readLimited(path)
}

// within reports whether path is dir or below it (both resolved).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, MaxFileBytes)
	}
	return b, nil
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
