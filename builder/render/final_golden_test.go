package render

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// finalMeta is what the final golden test reads of a layered-final
// meta.json (env_script_list is a list for some languages and a Python repr
// string for others, so it is not read).
type finalMeta struct {
	Language      string  `json:"language"`
	Platform      string  `json:"platform"`
	BaseKey       string  `json:"base_image_key"`
	EnvKey        string  `json:"env_image_key"`
	InstanceKey   string  `json:"instance_image_key"`
	RemoteKey     string  `json:"remote_instance_image_key_namespace_swebench"`
	EnvHashInput  string  `json:"env_image_key_hash_input"`
	BaseHashInput *string `json:"base_image_key_hash_input"`
	Split         string  `json:"generated_from_split"`
}

func newRendererVersion(t *testing.T, version string) *Renderer {
	t.Helper()
	tables, err := spec.LoadVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return &Renderer{Tables: tables}
}

// TestGoldenFinal renders every instance of upstream-v5/layered-final (v4's
// make_test_spec at 2514c86, the instances whose files changed since
// v4.1.0) for both arches with the final tables and no pins, and compares
// the six files, the keys and the hash inputs. It also renders them with the
// v4.1.0 tables: the files that differ then must be exactly the rows of
// differences.csv (so the final state is what makes them equal).
func TestGoldenFinal(t *testing.T) {
	shared := spectest.SharedDir(t)
	refDir := filepath.Join(shared, "upstream-v5", "layered-final", "instances")
	recs := spectest.Records(t, shared, append(spectest.PythonSplits(), multilingualSplits...)...)
	final := newRendererVersion(t, spec.VersionFinal)
	v410 := newRendererVersion(t, spec.VersionV410)
	changed := readDifferences(t, filepath.Join(shared, "upstream-v5", "layered-final", "differences.csv"))
	ids := listDirs(t, refDir)
	if len(ids) != 51 {
		t.Fatalf("%d reference instances, want 51 (NOTES.md: Python 17, C 20, Java 7, Rust 7)", len(ids))
	}
	perLang := map[string]int{}
	files, identical := 0, 0
	gotChanged := map[string]bool{}
	for _, id := range ids {
		var m0 finalMeta
		readJSONFile(t, filepath.Join(refDir, id, "x86_64", "meta.json"), &m0)
		inst := recs[m0.Split][id]
		if inst == nil {
			t.Errorf("%s: record not found in split %s", id, m0.Split)
			continue
		}
		results, err := final.RenderArches(context.Background(), inst, core.AllPlatforms())
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		old, err := v410.RenderArches(context.Background(), inst, core.AllPlatforms())
		if err != nil {
			t.Errorf("%s (v4.1.0): %v", id, err)
			continue
		}
		for i, res := range results {
			arch := res.Arch()
			dir := filepath.Join(refDir, id, arch)
			var m finalMeta
			readJSONFile(t, filepath.Join(dir, "meta.json"), &m)
			perLang[m.Language]++
			got := map[string]string{
				FileBaseDockerfile: res.BaseDockerfile, FileEnvDockerfile: res.EnvDockerfile,
				FileInstanceDockerfile: res.InstanceDockerfile, FileSetupEnv: res.SetupEnv,
				FileSetupRepo: res.SetupRepo, FileEval: res.Eval,
			}
			was := map[string]string{
				FileBaseDockerfile: old[i].BaseDockerfile, FileEnvDockerfile: old[i].EnvDockerfile,
				FileInstanceDockerfile: old[i].InstanceDockerfile, FileSetupEnv: old[i].SetupEnv,
				FileSetupRepo: old[i].SetupRepo, FileEval: old[i].Eval,
			}
			for name, data := range got {
				want, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				files++
				if string(want) != data {
					t.Errorf("%s/%s differs from reference:\n%s", dir, name, firstDiff(string(want), data))
				} else {
					identical++
				}
				if was[name] != string(want) {
					gotChanged[id+"/"+arch+"/"+name] = true
				}
			}
			if res.Language != m.Language {
				t.Errorf("%s %s: language %q, want %q", id, arch, res.Language, m.Language)
			}
			if got := EnvHashInput(res.EnvScriptList, res.DockerSpecs); got != m.EnvHashInput {
				t.Errorf("%s %s: env hash input differs:\n%s", id, arch, firstDiff(m.EnvHashInput, got))
			}
			if m.BaseHashInput != nil && res.DockerSpecs.Repr() != *m.BaseHashInput {
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
		}
	}
	want := map[string]int{"py": 34, "c": 40, "java": 14, "rs": 14}
	if !reflect.DeepEqual(perLang, want) {
		t.Errorf("renders per language %v, want %v", perLang, want)
	}
	if !reflect.DeepEqual(gotChanged, changed) {
		t.Errorf("files where v4.1.0's tables give other bytes than the reference:\n%v\ndifferences.csv lists:\n%v", keys(gotChanged), keys(changed))
	}
	t.Logf("final tables: %d of %d files byte-identical over %d renders %v; %d files differ under v4.1.0's tables, as differences.csv lists", identical, files, 2*len(ids), perLang, len(gotChanged))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readDifferences reads differences.csv: the (instance/arch/file) rows,
// meta.json left out (this renderer writes its own meta.json).
func readDifferences(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	out := map[string]bool{}
	for _, r := range rows[1:] {
		if r[col["file"]] == FileMeta {
			continue
		}
		out[r[col["instance_id"]]+"/"+filepath.Base(r[col["dir"]])+"/"+r[col["file"]]] = true
	}
	return out
}
