// Package taskwrite writes a dataset as an upstream SWE-bench v5 task repo
// (swebench/task/repo.py): sweb.yaml naming the datasets and splits it
// publishes, and per instance tasks/<instance_id>/ with task.yaml (short
// metadata, keys sorted, multi-line strings as literal blocks), tests.json
// (FAIL_TO_PASS, PASS_TO_PASS), eval.sh, Dockerfile (the flat v5 form),
// gold.patch, test.patch, problem_statement.md and, when the record has
// hints, hints.md. The reader is package taskrepo.
package taskwrite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/manifests/naming"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

const (
	imagePrefix  = "swebench/"
	evalTypePass = "pass_and_fail"
	evalTypeFail = "fail_only"
)

// Options say what the repo publishes and for which platform its
// Dockerfiles are rendered.
type Options struct {
	// Out is the repo's root folder (created when missing).
	Out string
	// Datasets are the dataset names sweb.yaml publishes and every task
	// belongs to (e.g. SWE-bench/SWE-bench_Verified); at least one.
	Datasets []string
	// Split is every task's split and sweb.yaml's only split ("test" when
	// empty).
	Split string
	// Platform of the Dockerfiles and eval.sh (zero: linux/amd64, as
	// upstream's task repos).
	Platform core.Platform
}

// ExpectedImage is the image name upstream's harness derives for an
// instance (swebench/task/checks.py expected_image).
func ExpectedImage(instanceID string) string {
	return naming.NoDoubleUnderscore(imagePrefix + strings.ToLower("sweb.eval.x86_64."+instanceID+":latest"))
}

// Write renders every instance and writes the task repo. It keeps going
// after a failed instance and returns how many tasks were written and the
// failures in input order; a problem with the repo itself is returned as
// one failure with instance id "*".
func Write(ctx context.Context, r *render.Renderer, insts []core.Instance, opts Options) (int, []*render.InstanceError) {
	fail := func(err error) (int, []*render.InstanceError) {
		return 0, []*render.InstanceError{{InstanceID: "*", Err: err}}
	}
	if len(opts.Datasets) == 0 {
		return fail(errors.New("task repo: no dataset name for sweb.yaml"))
	}
	if opts.Split == "" {
		opts.Split = "test"
	}
	if opts.Platform.IsZero() {
		opts.Platform = core.AMD64
	}
	if err := os.MkdirAll(filepath.Join(opts.Out, layout.TasksDir), 0o755); err != nil {
		return fail(fmt.Errorf("creating %s: %w", opts.Out, err))
	}
	cfg, err := config(filepath.Join(opts.Out, layout.ConfigFile), opts)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(opts.Out, layout.ConfigFile), cfg, 0o644); err != nil {
		return fail(fmt.Errorf("writing %s: %w", layout.ConfigFile, err))
	}
	n := 0
	var failed []*render.InstanceError
	for i := range insts {
		inst := &insts[i]
		if err := ctx.Err(); err != nil {
			return n, append(failed, &render.InstanceError{InstanceID: "*", Err: err})
		}
		if err := writeTask(ctx, r, inst, opts); err != nil {
			failed = append(failed, &render.InstanceError{InstanceID: inst.InstanceID, Source: inst.Source, Err: err})
			continue
		}
		n++
	}
	return n, failed
}

// config is sweb.yaml: the options' datasets and split, added to those of
// an existing sweb.yaml (so writing dev then test into one repo publishes
// both), sorted.
func config(path string, opts Options) ([]byte, error) {
	var cur layout.Config
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := yaml.Unmarshal(raw, &cur); err != nil {
			return nil, fmt.Errorf("reading the existing %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	union := func(a, b []string) []string {
		set := map[string]bool{}
		for _, s := range append(append([]string(nil), a...), b...) {
			set[s] = true
		}
		out := make([]string, 0, len(set))
		for s := range set {
			out = append(out, s)
		}
		sort.Strings(out)
		return out
	}
	return dumpYAML(map[string]any{
		"datasets": union(cur.Datasets, opts.Datasets),
		"splits":   union(cur.Splits, []string{opts.Split}),
	})
}

// Files returns one task's files (name → content), rendered for the
// options' platform.
func Files(ctx context.Context, r *render.Renderer, inst *core.Instance, opts Options) (map[string][]byte, error) {
	if opts.Platform.IsZero() {
		opts.Platform = core.AMD64
	}
	res, err := r.Render(ctx, inst, opts.Platform)
	if err != nil {
		return nil, err
	}
	flat, err := res.Flat(inst.ImageAssets)
	if err != nil {
		return nil, err
	}
	eval := inst.EvalScript
	if eval == "" {
		eval = res.Eval
	}
	meta, err := taskMeta(inst, opts, r.Tables.X86OnlyRule, r.Tables.LogParser)
	if err != nil {
		return nil, err
	}
	task, err := dumpYAML(meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", layout.TaskFile, err)
	}
	tests, err := dumpTests(inst)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", layout.TestsFile, err)
	}
	files := map[string][]byte{
		layout.TaskFile:    task,
		layout.TestsFile:   tests,
		layout.EvalFile:    []byte(eval),
		layout.Dockerfile:  []byte(flat),
		layout.GoldPatch:   []byte(inst.Patch),
		layout.TestPatch:   []byte(inst.TestPatch),
		layout.ProblemFile: []byte(inst.ProblemStatement),
	}
	// Written only when not empty (repo.py OPTIONAL_FILE).
	if inst.HintsText != "" {
		files[layout.HintsFile] = []byte(inst.HintsText)
	}
	return files, nil
}

func writeTask(ctx context.Context, r *render.Renderer, inst *core.Instance, opts Options) error {
	if err := naming.ValidateID(inst.InstanceID); err != nil {
		return err
	}
	files, err := Files(ctx, r, inst, opts)
	if err != nil {
		return err
	}
	dir := filepath.Join(opts.Out, layout.TasksDir, inst.InstanceID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	// A stale hints.md from an earlier run would stand in for missing prose.
	if _, ok := files[layout.HintsFile]; !ok {
		if err := os.Remove(filepath.Join(dir, layout.HintsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale %s: %w", layout.HintsFile, err)
		}
	}
	return nil
}

// taskMeta is task.yaml: the record's columns that are not files of their
// own (its other columns too), plus split, datasets, image, log_parser,
// eval_type and, for an instance the spec tables make x86-only (USE_X86, a
// --specs x86_only list, an x86-only rule), x86_only with that rule. A
// record without log_parser gets the one its repo's profile names (a
// --specs profile, as the fixture's), else upstream's MAP_REPO_TO_PARSER's.
func taskMeta(inst *core.Instance, opts Options, x86Only func(*core.Instance) string, profileParser func(repo string) string) (map[string]any, error) {
	m := map[string]any{
		"instance_id": inst.InstanceID,
		"repo":        inst.Repo,
		"version":     inst.Version,
		"base_commit": inst.BaseCommit,
		"split":       opts.Split,
		"datasets":    opts.Datasets,
		"image":       ExpectedImage(inst.InstanceID),
	}
	if inst.CreatedAt != "" {
		m["created_at"] = inst.CreatedAt
	}
	if inst.EnvironmentSetupCommit != "" {
		m["environment_setup_commit"] = inst.EnvironmentSetupCommit
	}
	m["log_parser"] = inst.LogParser
	if inst.LogParser == "" {
		name := profileParser(inst.Repo)
		if name == "" {
			var ok bool
			if name, ok = grading.ParserName(inst.Repo); !ok {
				return nil, fmt.Errorf("log_parser: the record has none, and neither a spec profile nor upstream names a parser for repo %s", inst.Repo)
			}
		}
		m["log_parser"] = name
	}
	switch {
	case inst.EvalType != "":
		m["eval_type"] = inst.EvalType
	case grading.FailOnlyRepo(inst.Repo):
		m["eval_type"] = evalTypeFail
	default:
		m["eval_type"] = evalTypePass
	}
	if inst.ImageAssets != "" {
		var assets any
		if err := json.Unmarshal([]byte(inst.ImageAssets), &assets); err != nil {
			return nil, fmt.Errorf("image_assets: %w", err)
		}
		m["image_assets"] = assets
	}
	if rule := x86Only(inst); rule != "" {
		m[X86OnlyKey] = rule
	}
	for _, c := range inst.Extra {
		if _, taken := m[c.Name]; taken || ownKeys[c.Name] {
			return nil, fmt.Errorf("column %q: a task.yaml key of its own, so the column cannot be kept there", c.Name)
		}
		v, err := jsonValue(c.Value)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		m[c.Name] = v
	}
	return m, nil
}

// X86OnlyKey is the task.yaml key saying why a task gets no linux/arm64
// image (taskrepo reads it; upstream's task repos, x86-only throughout,
// have no such key and their checks ignore it).
const X86OnlyKey = "x86_only"

// ownKeys are the task.yaml keys a record's other column may not take:
// every key Files writes, whether or not this record has a value for it.
var ownKeys = map[string]bool{
	"instance_id": true, "repo": true, "version": true, "base_commit": true, "split": true, "datasets": true,
	"image": true, "created_at": true, "environment_setup_commit": true, "log_parser": true, "eval_type": true,
	"image_assets": true, X86OnlyKey: true,
}

// jsonValue decodes a column's JSON text for the YAML writer: objects as
// maps, numbers as json.Number (written as they were).
func jsonValue(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// dumpTests is repo.py dump_tests: JSON with indent 2, non-ASCII kept, and
// a final newline.
func dumpTests(inst *core.Instance) ([]byte, error) {
	f2p, p2p := inst.FailToPass, inst.PassToPass
	if f2p == nil {
		f2p = []string{}
	}
	if p2p == nil {
		p2p = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		F2P []string `json:"FAIL_TO_PASS"`
		P2P []string `json:"PASS_TO_PASS"`
	}{f2p, p2p}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dumpYAML writes a mapping as repo.py dump_yaml does: keys sorted, block
// style, sequences not indented under their key, strings holding a line
// break as literal blocks.
func dumpYAML(v map[string]any) ([]byte, error) {
	node, err := yamlNode(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(node); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := slices.Sorted(maps.Keys(v))
		for _, k := range keys {
			val, err := yamlNode(v[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, val)
		}
		return n, nil
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, s := range v {
			c, _ := yamlNode(s)
			n.Content = append(n.Content, c)
		}
		return n, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			c, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		} else if needsQuotes(v) && strings.IndexFunc(v, notPrintable) < 0 {
			// PyYAML quotes such a string with single quotes.
			n.Style = yaml.SingleQuotedStyle
		}
		return n, nil
	default:
		n := &yaml.Node{}
		if err := n.Encode(v); err != nil {
			return nil, err
		}
		return n, nil
	}
}

// needsQuotes reports whether the YAML encoder would quote v as a plain
// scalar (it would read back as another type, or is not plain-safe).
func needsQuotes(v string) bool {
	b, err := yaml.Marshal(v)
	return err == nil && len(b) > 0 && (b[0] == '"' || b[0] == '\'')
}

func notPrintable(r rune) bool { return r < 0x20 || r == 0x7f || !unicode.IsPrint(r) && r != ' ' }
