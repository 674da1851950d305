package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

type refMeta struct {
	InstanceID    string   `json:"instance_id"`
	Arch          string   `json:"arch"`
	Platform      string   `json:"platform"`
	BaseKey       string   `json:"base_image_key"`
	EnvKey        string   `json:"env_image_key"`
	InstanceKey   string   `json:"instance_image_key"`
	RemoteKey     string   `json:"remote_instance_image_key_namespace_swebench"`
	EnvHashInput  string   `json:"env_image_key_hash_input"`
	Split         string   `json:"generated_from_split"`
	Partial       bool     `json:"PARTIAL"`
	EnvFromCache  bool     `json:"env_yml_from_cache"`
	EnvScriptList []string `json:"env_script_list"`
}

func readMeta(t *testing.T, path string) refMeta {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m refMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func listDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func compareFile(t *testing.T, path, got string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading reference: %v", err)
		return
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("%s differs from reference:\n%s", path, firstDiff(string(want), got))
	}
}

// firstDiff shows the first differing line.
func firstDiff(want, got string) string {
	wl, gl := bytes.Split([]byte(want), []byte("\n")), bytes.Split([]byte(got), []byte("\n"))
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return "line " + itoa(i+1) + ":\n want: " + trunc(string(w)) + "\n got:  " + trunc(string(g))
		}
	}
	return "(lengths differ)"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func newUpstreamRenderer(t *testing.T) *Renderer {
	t.Helper()
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	return &Renderer{Tables: tables}
}

// TestGoldenInstances renders every instance in upstream-v4.1.0/instances for
// both arches with no pins and compares all six files and the keys.
func TestGoldenInstances(t *testing.T) {
	shared := spectest.SharedDir(t)
	refDir := filepath.Join(shared, "upstream-v4.1.0", "instances")
	recs := spectest.Records(t, shared, spectest.PythonSplits()...)
	r := newUpstreamRenderer(t)
	ids := listDirs(t, refDir)
	if len(ids) < 500 {
		t.Fatalf("only %d reference instances", len(ids))
	}
	n := 0
	platforms := core.AllPlatforms()
	for _, id := range ids {
		m := readMeta(t, filepath.Join(refDir, id, platforms[0].Arch(), "meta.json"))
		inst := recs[m.Split][id]
		if inst == nil {
			t.Errorf("%s: record not found in split %s", id, m.Split)
			continue
		}
		results, err := r.RenderArches(context.Background(), inst, platforms)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		for i, p := range platforms {
			arch := p.Arch()
			dir := filepath.Join(refDir, id, arch)
			m := readMeta(t, filepath.Join(dir, "meta.json"))
			res := results[i]
			n++
			compareFile(t, filepath.Join(dir, "Dockerfile.base"), res.BaseDockerfile)
			compareFile(t, filepath.Join(dir, "Dockerfile.env"), res.EnvDockerfile)
			compareFile(t, filepath.Join(dir, "Dockerfile.instance"), res.InstanceDockerfile)
			compareFile(t, filepath.Join(dir, "setup_env.sh"), res.SetupEnv)
			compareFile(t, filepath.Join(dir, "setup_repo.sh"), res.SetupRepo)
			compareFile(t, filepath.Join(dir, "eval.sh"), res.Eval)
			if got := EnvHashInput(res.EnvScriptList, res.DockerSpecs); got != m.EnvHashInput {
				t.Errorf("%s %s: env hash input differs:\n%s", id, arch, firstDiff(m.EnvHashInput, got))
			}
			if res.BaseKey != m.BaseKey || res.EnvKey != m.EnvKey || res.InstanceKey != m.InstanceKey {
				t.Errorf("%s %s: keys %q %q %q, want %q %q %q", id, arch, res.BaseKey, res.EnvKey, res.InstanceKey, m.BaseKey, m.EnvKey, m.InstanceKey)
			}
			if got := RemoteInstanceKey("swebench", res.InstanceKey); got != m.RemoteKey {
				t.Errorf("%s %s: remote key %q, want %q", id, arch, got, m.RemoteKey)
			}
			if res.Platform.Dockerfile() != m.Platform {
				t.Errorf("%s %s: platform %q, want %q", id, arch, res.Platform.Dockerfile(), m.Platform)
			}
		}
	}
	t.Logf("compared %d renders", n)
}

// TestGoldenPartial checks the network-free files of instances_partial and
// that the env script reports the first URL upstream fetched.
func TestGoldenPartial(t *testing.T) {
	shared := spectest.SharedDir(t)
	refDir := filepath.Join(shared, "upstream-v4.1.0", "instances_partial")
	recs := spectest.Records(t, shared, spectest.PythonSplits()...)
	firstURL := readNetworkNeeded(t, filepath.Join(shared, "upstream-v4.1.0", "network_needed.txt"))
	r := newUpstreamRenderer(t)
	ids := listDirs(t, refDir)
	if len(ids) != 165 {
		t.Fatalf("%d partial instances, want 165", len(ids))
	}
	for _, id := range ids {
		for _, p := range core.AllPlatforms() {
			arch := p.Arch()
			dir := filepath.Join(refDir, id, arch)
			m := readMeta(t, filepath.Join(dir, "meta.json"))
			inst := recs[m.Split][id]
			if inst == nil {
				t.Errorf("%s: record not found in split %s", id, m.Split)
				continue
			}
			rec, err := r.Tables.NewRecipe(inst.InstanceID, inst.Repo, inst.Version, p)
			if err != nil {
				t.Fatal(err)
			}
			repo := r.repoScriptList(rec, inst)
			eval, err := r.evalScriptList(rec, inst)
			if err != nil {
				t.Errorf("%s: %v", id, err)
				continue
			}
			compareFile(t, filepath.Join(dir, "setup_repo.sh"), joinScript("set -euxo pipefail", repo))
			compareFile(t, filepath.Join(dir, "eval.sh"), joinScript("set -uxo pipefail", eval))
			// The whole render fails naming the URL upstream fetched first.
			_, err = r.Render(context.Background(), inst, p)
			if !errors.Is(err, ErrNeedsNetwork) {
				t.Errorf("%s: Render error %v, want needs network", id, err)
			} else if want := firstURL[id]; want == "" || !bytes.Contains([]byte(err.Error()), []byte(want)) {
				t.Errorf("%s: error %q does not name %q", id, err, want)
			}
			// Dockerfile.base and the instance key need no network either.
			res := renderBaseOnly(t, r, rec, inst)
			compareFile(t, filepath.Join(dir, "Dockerfile.base"), res.BaseDockerfile)
		}
	}
}

func renderBaseOnly(t *testing.T, r *Renderer, rec *spec.Recipe, inst *core.Instance) *Result {
	t.Helper()
	// Pretend the env is cached to get past the network step; only the base
	// Dockerfile (independent of the env) is compared.
	cp := *rec
	cp.EnvYMLCached, cp.EnvYML = true, "x"
	res, err := r.RenderRecipe(context.Background(), &cp, inst)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readNetworkNeeded(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := bytes.Split(line, []byte("\t"))
		if len(f) >= 2 {
			out[string(f[0])] = string(f[1])
		}
	}
	return out
}

type multilingualMeta struct {
	refMeta
	Language        string  `json:"language"`
	BaseHashInput   *string `json:"base_image_key_hash_input"`
	EnvTemplateFrom string  `json:"env_dockerfile_template"`
	RepoScriptList  []string
	EvalScriptList  []string
}

// MultilingualSplits are the dataset files upstream-v4.1.0-multilingual
// was generated from.
var multilingualSplits = []string{"SWE-bench_Multilingual/test", "SWE-bench_Multimodal/dev"}

// TestGoldenMultilingual renders every instance of the shared
// upstream-v4.1.0-multilingual reference (C, Go, Java, JS/TS, PHP, Ruby,
// Rust; Multilingual and Multimodal) for both platforms with no pins and
// compares the six files, the three image keys (and the namespaced
// instance key), the platform, and the env and base key hash inputs.
func TestGoldenMultilingual(t *testing.T) {
	shared := spectest.SharedDir(t)
	refDir := filepath.Join(shared, "upstream-v4.1.0-multilingual", "instances")
	recs := spectest.Records(t, shared, multilingualSplits...)
	r := newUpstreamRenderer(t)
	ids := listDirs(t, refDir)
	if len(ids) != 210 {
		t.Fatalf("%d reference instances, want 210", len(ids))
	}
	perLang := map[string]int{}
	for _, id := range ids {
		var m multilingualMeta
		raw, err := os.ReadFile(filepath.Join(refDir, id, "x86_64", "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		inst := recs[m.Split][id]
		if inst == nil {
			t.Errorf("%s: record not found in split %s", id, m.Split)
			continue
		}
		results, err := r.RenderArches(context.Background(), inst, core.AllPlatforms())
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		for _, res := range results {
			arch := res.Arch()
			dir := filepath.Join(refDir, id, arch)
			var m multilingualMeta
			raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			perLang[m.Language]++
			compareFile(t, filepath.Join(dir, "Dockerfile.base"), res.BaseDockerfile)
			compareFile(t, filepath.Join(dir, "Dockerfile.env"), res.EnvDockerfile)
			compareFile(t, filepath.Join(dir, "Dockerfile.instance"), res.InstanceDockerfile)
			compareFile(t, filepath.Join(dir, "setup_env.sh"), res.SetupEnv)
			compareFile(t, filepath.Join(dir, "setup_repo.sh"), res.SetupRepo)
			compareFile(t, filepath.Join(dir, "eval.sh"), res.Eval)
			if res.Language != m.Language {
				t.Errorf("%s %s: language %q, want %q", id, arch, res.Language, m.Language)
			}
			if got := EnvHashInput(res.EnvScriptList, res.DockerSpecs); got != m.EnvHashInput {
				t.Errorf("%s %s: env hash input differs:\n%s", id, arch, firstDiff(m.EnvHashInput, got))
			}
			switch {
			case m.BaseHashInput == nil && res.DockerSpecs.Len() != 0:
				t.Errorf("%s %s: docker_specs %s, want none", id, arch, res.DockerSpecs.Repr())
			case m.BaseHashInput != nil && res.DockerSpecs.Repr() != *m.BaseHashInput:
				t.Errorf("%s %s: base key hash input %q, want %q", id, arch, res.DockerSpecs.Repr(), *m.BaseHashInput)
			}
			if res.BaseKey != m.BaseKey || res.EnvKey != m.EnvKey || res.InstanceKey != m.InstanceKey {
				t.Errorf("%s %s: keys %q %q %q, want %q %q %q", id, arch, res.BaseKey, res.EnvKey, res.InstanceKey, m.BaseKey, m.EnvKey, m.InstanceKey)
			}
			if got := RemoteInstanceKey("swebench", res.InstanceKey); got != m.RemoteKey {
				t.Errorf("%s %s: remote key %q, want %q", id, arch, got, m.RemoteKey)
			}
			if res.Platform.Dockerfile() != m.Platform {
				t.Errorf("%s %s: platform %q, want %q", id, arch, res.Platform.Dockerfile(), m.Platform)
			}
			if fromBase := strings.HasPrefix(m.EnvTemplateFrom, "_DOCKERFILE_BASE"); res.EnvFromBase != fromBase {
				t.Errorf("%s %s: env from base template %v, reference says %q", id, arch, res.EnvFromBase, m.EnvTemplateFrom)
			}
		}
	}
	// NOTES.md's counts of this half, per language and both arches.
	want := map[string]int{"c": 40, "go": 40, "java": 48, "js": 146, "php": 44, "rb": 56, "rs": 46}
	if !reflect.DeepEqual(perLang, want) {
		t.Errorf("renders per language %v, want %v", perLang, want)
	}
	t.Logf("compared %d renders: %v", 2*len(ids), perLang)
}
