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
)

// File and directory names of a task repo (swebench/task/repo.py).
const (
	ConfigFile      = "sweb.yaml"
	TasksDir        = "tasks"
	TaskFile        = "task.yaml"
	TestsFile       = "tests.json"
	DockerfileName  = "Dockerfile"
	EvalScriptFile  = "eval.sh"
	GoldPatchFile   = "gold.patch"
	TestPatchFile   = "test.patch"
	ProblemFile     = "problem_statement.md"
	HintsFile       = "hints.md"
	DeprecatedSplit = "deprecated"
)

// requiredFiles are the files every task directory holds (checks.py
// REQUIRED_FILES).
var requiredFiles = []string{TaskFile, TestsFile, DockerfileName, GoldPatchFile, TestPatchFile, EvalScriptFile, ProblemFile}

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
	r := &Repo{Dir: abs}
	if err := r.loadConfig(); err != nil {
		return nil, &CheckError{Dir: abs, Problems: []Problem{*err}}
	}
	root := filepath.Join(abs, TasksDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, &CheckError{Dir: abs, Problems: []Problem{{Where: TasksDir + "/", Msg: fmt.Sprintf("%s has no %s/ directory: %v", dir, TasksDir, err)}}}
	}
	var problems []Problem
	for _, e := range entries {
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
		problems = append(problems, Problem{Where: TasksDir + "/", Msg: "no task directories"})
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
	b, err := readLimited(filepath.Join(r.Dir, ConfigFile))
	if err != nil {
		return &Problem{Where: ConfigFile, Msg: fmt.Sprintf("%s has no readable %s: %v", r.Dir, ConfigFile, err)}
	}
	var cfg struct {
		Datasets []string `yaml:"datasets"`
		Splits   []string `yaml:"splits"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return &Problem{Where: ConfigFile, Msg: "not valid YAML: " + err.Error()}
	}
	if len(cfg.Datasets) == 0 {
		return &Problem{Where: ConfigFile, Field: "datasets", Msg: "does not name any datasets"}
	}
	if cfg.Splits == nil {
		cfg.Splits = []string{"test"}
	}
	r.Datasets, r.Splits = cfg.Datasets, cfg.Splits
	return nil
}

// loadTask reads one task directory: nil when it is not a task at all (no
// task.yaml, reported); otherwise the task (partial when task.yaml cannot
// be read) and its problems.
func (r *Repo) loadTask(dir string) (*Task, []Problem) {
	id := filepath.Base(dir)
	where := func(file string) string { return TasksDir + "/" + id + "/" + file }
	var ps []Problem
	add := func(file, field, format string, a ...any) {
		ps = append(ps, Problem{Task: id, Where: where(file), Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if _, err := os.Stat(filepath.Join(dir, TaskFile)); err != nil {
		add("", "", "no %s, so it is not a task", TaskFile)
		return nil, ps
	}
	var missing []string
	for _, f := range requiredFiles {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		add("", "", "missing %s", strings.Join(missing, ", "))
	}
	if err := naming.ValidateID(id); err != nil {
		add("", "", "directory name: %v", err)
	}
	t := &Task{Dir: dir}
	in := &t.Instance
	in.Source = where(TaskFile)

	meta, err := readLimited(filepath.Join(dir, TaskFile))
	if err != nil {
		add(TaskFile, "", "%v", err)
		return t, ps // left out as invalid
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(meta, &doc); err != nil {
		add(TaskFile, "", "not valid YAML: %v", err)
		return t, ps // left out as invalid
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		add(TaskFile, "", "not a mapping")
		return t, ps // left out as invalid
	}
	keys := map[string]*yaml.Node{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		keys[m.Content[i].Value] = m.Content[i+1]
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", TaskFile, n.Line) }
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			add(TaskFile, k, "missing")
		}
	}
	str := func(key string, dst *string) {
		n, ok := keys[key]
		if !ok {
			return
		}
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			add(at(n), key, "not a string")
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
	if in.InstanceID != "" && in.InstanceID != id {
		add(at(keys["instance_id"]), "instance_id", "is %q, not the directory's name", in.InstanceID)
	}
	in.InstanceID = id
	if n, ok := keys["datasets"]; ok && n.Tag != "!!null" {
		if err := n.Decode(&t.Datasets); err != nil {
			add(at(n), "datasets", "not a list of strings")
		} else if unknown := minus(t.Datasets, r.Datasets); len(unknown) > 0 {
			add(at(n), "datasets", "not published by %s: %s", ConfigFile, strings.Join(unknown, " "))
		}
	}
	if len(t.Datasets) == 0 && t.Split != DeprecatedSplit {
		add(TaskFile, "datasets", "does not say which datasets it belongs to")
	}
	if n, ok := keys["split"]; ok && t.Split != "" && t.Split != DeprecatedSplit && !slices.Contains(r.Splits, t.Split) {
		add(at(n), "split", "%q is not in %s", t.Split, ConfigFile)
	}
	if n, ok := keys["image"]; ok && in.Image != "" && in.Image != ExpectedImage(id) {
		add(at(n), "image", "%q is not the derived name %s", in.Image, ExpectedImage(id))
	}
	if n, ok := keys["image_assets"]; ok && n.Tag != "!!null" {
		var v any
		if err := n.Decode(&v); err != nil {
			add(at(n), "image_assets", "%v", err)
		} else if b, err := json.Marshal(v); err != nil {
			add(at(n), "image_assets", "cannot be JSON: %v", err)
		} else {
			in.ImageAssets = string(b)
		}
	}

	// tests.json: JSON, never YAML (upstream: no implicit typing).
	if b, err := readLimited(filepath.Join(dir, TestsFile)); err == nil {
		var tests map[string]json.RawMessage
		if err := json.Unmarshal(b, &tests); err != nil {
			add(TestsFile, "", "not valid JSON: %v", err)
		} else {
			for _, k := range []string{"FAIL_TO_PASS", "PASS_TO_PASS"} {
				raw, ok := tests[k]
				if !ok {
					add(TestsFile, k, "missing")
					continue
				}
				var list []string
				if err := json.Unmarshal(raw, &list); err != nil || list == nil {
					add(TestsFile, k, "not a list of strings")
					continue
				}
				if k == "FAIL_TO_PASS" {
					in.FailToPass = list
				} else {
					in.PassToPass = list
				}
			}
			if in.FailToPass != nil && len(in.FailToPass) == 0 && t.Split != DeprecatedSplit {
				add(TestsFile, "FAIL_TO_PASS", "empty, so nothing grades this task")
			}
		}
	}
	text := func(file string, dst *string) []byte {
		b, err := readLimited(filepath.Join(dir, file))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				add(file, "", "%v", err)
			}
			return nil
		}
		*dst = string(b) // bytes as they are: CRLF in a patch survives
		return b
	}
	if b := text(EvalScriptFile, &in.EvalScript); b != nil {
		for _, mk := range evalMarkers {
			if !bytes.Contains(b, []byte(mk)) {
				add(EvalScriptFile, "", "has no %q marker", mk)
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{GoldPatchFile, &in.Patch}, {TestPatchFile, &in.TestPatch}} {
		if b := text(f.name, f.dst); len(b) > 0 && !bytes.Contains(b, []byte("diff --git")) {
			add(f.name, "", "does not look like a diff")
		}
	}
	text(ProblemFile, &in.ProblemStatement)
	text(HintsFile, &in.HintsText) // optional: "" when absent
	var df string
	if text(DockerfileName, &df) != nil {
		t.Dockerfile = []byte(df)
		if len(bytes.TrimSpace(t.Dockerfile)) == 0 {
			add(DockerfileName, "", "empty")
		}
	}
	return t, ps
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
		ps = append(ps, Problem{Task: ids[c.Second], Where: TasksDir + "/" + ids[c.Second] + "/", Msg: fmt.Sprintf("gets the same image names as %s (%s); the first is kept", ids[c.First], c.NameID)})
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
			ps = append(ps, Problem{Where: "eval/" + filepath.Base(p), Msg: fmt.Sprintf("no dataset named %s in %s, so it is not published", stem, ConfigFile), Warning: true})
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
			errs = append(errs, fmt.Errorf("not in %s: %s", filepath.Join(r.Dir, TasksDir), strings.Join(missing, " ")))
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
