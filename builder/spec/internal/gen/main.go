// Command gen transcribes the upstream SWE-bench v4.1.0 tables that
// builder/spec needs from the shared reference data into data/:
//
//   - data/specs.json: USE_X86, docker defaults, the languages of every repo,
//     the Dockerfile templates of every language, heredoc delimiters, ...;
//   - data/specs/<owner>__<name>.json: one repo's spec table (Python from
//     upstream-v4.1.0/specs.json; C, Go, Java, JavaScript/TypeScript, PHP,
//     Ruby and Rust from upstream-v4.1.0-multilingual/specs-multilingual.json,
//     checked equal to specs.json's copy), decoded only when a record of
//     that repo is rendered;
//   - data/envcache/<instance_id>.yml: the bundled per-instance
//     environment.yml files, recovered verbatim from the reference env script
//     lists (meta.json env_script_list item 2 is "cat <<'EOF' > ...\n<yml>\nEOF").
//
// Non-Python specs are written in a normalized form (see nonPython): their
// list-valued install becomes install_cmds, test_cmd (a string or a list)
// becomes the list test_cmds, apt-pkgs becomes apt_pkgs, and docker_specs
// keeps upstream's key order as a list of [key, value] pairs, since the
// image keys hash Python's str() of that dict.
//
// Run through `go generate ./builder/spec`.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	shared := flag.String("shared", "../../../shared/swebench-reference", "the swebench-reference folder")
	out := flag.String("out", "data", "output folder")
	flag.Parse()
	if err := run(*shared, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type templates struct {
	Base     map[string]string `json:"_DOCKERFILE_BASE"`
	Env      map[string]string `json:"_DOCKERFILE_ENV"`
	Instance map[string]string `json:"_DOCKERFILE_INSTANCE"`
	BaseJS2  string            `json:"_DOCKERFILE_BASE_JS_2"`
}

type upstream struct {
	Specs          map[string]map[string]json.RawMessage `json:"MAP_REPO_VERSION_TO_SPECS"`
	ReqsPaths      map[string][]string                   `json:"MAP_REPO_TO_REQS_PATHS"`
	EnvYMLPaths    map[string][]string                   `json:"MAP_REPO_TO_ENV_YML_PATHS"`
	UseX86         []string                              `json:"USE_X86"`
	Defaults       map[string]string                     `json:"DEFAULT_DOCKER_SPECS"`
	Branches       map[string]map[string]string          `json:"REPO_BASE_COMMIT_BRANCH"`
	NonTestExts    []string                              `json:"NON_TEST_EXTS"`
	RepoToExt      map[string]string                     `json:"MAP_REPO_TO_EXT"`
	Install        map[string]string                     `json:"MAP_REPO_TO_INSTALL"`
	Latest         string                                `json:"LATEST"`
	URLRaw         string                                `json:"SWE_BENCH_URL_RAW"`
	Start          string                                `json:"START_TEST_OUTPUT"`
	End            string                                `json:"END_TEST_OUTPUT"`
	Templates      templates                             `json:"DOCKERFILE_TEMPLATES"`
	TestSpecPython map[string]json.RawMessage            `json:"TEST_SPEC_PYTHON"`
	TestSpecJS     struct {
		TestCmds map[string]string `json:"MAP_REPO_TO_TEST_CMDS"`
		Heredoc  string            `json:"EVAL_HEREDOC_DELIMITER"`
	} `json:"TEST_SPEC_JAVASCRIPT"`
}

// tables is the schema of data/specs.json (read by builder/spec).
type tables struct {
	Source             string                                `json:"source"`
	Specs              map[string]map[string]json.RawMessage `json:"-"`
	ReqsPaths          map[string][]string                   `json:"reqs_paths"`
	EnvYMLPaths        map[string][]string                   `json:"env_yml_paths"`
	UseX86             []string                              `json:"use_x86"`
	DefaultDockerSpecs map[string]string                     `json:"default_docker_specs"`
	Branches           map[string]map[string]string          `json:"repo_base_commit_branch"`
	NonTestExts        []string                              `json:"non_test_exts"`
	RepoToExt          map[string]string                     `json:"repo_to_ext"`
	RepoToInstall      map[string]string                     `json:"repo_to_install"`
	Latest             string                                `json:"latest"`
	URLRaw             string                                `json:"swe_bench_url_raw"`
	StartTestOutput    string                                `json:"start_test_output"`
	EndTestOutput      string                                `json:"end_test_output"`
	BaseTemplates      map[string]string                     `json:"dockerfile_base"`
	EnvTemplates       map[string]string                     `json:"dockerfile_env"`
	InstanceTemplates  map[string]string                     `json:"dockerfile_instance"`
	VariantTemplates   map[string]string                     `json:"dockerfile_base_variants"`
	HeredocEnv         string                                `json:"heredoc_env"`
	HeredocEval        string                                `json:"heredoc_eval"`
	HeredocEvalCommon  string                                `json:"heredoc_eval_common"`
	RepoTestCmds       map[string]string                     `json:"repo_test_cmds"`
	ReplaceReqPackages [][2]string                           `json:"replace_req_packages"`
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding %s: %w", filepath.Base(path), err)
	}
	return nil
}

// sourceV410 and sourceFinal describe the two table sets in specs.json.
const (
	sourceV410 = "SWE-bench v4.1.0 (726c5461e2ef52d83cf1ea2107870a8bb3328d57): Python repos from specs.json, " +
		"the other languages from specs-multilingual.json (normalized: install_cmds, test_cmds, apt_pkgs, ordered docker_specs); generated by builder/spec/internal/gen"
	sourceFinal = "SWE-bench 2514c8698d6179b9dc1b07dface832a6046d937e (the tables' final state, swebench 4.1.0): Python repos from upstream-v5/specs-final.json, " +
		"the other languages from specs-final-multilingual.json (normalized as data/specs.json); data/final/specs holds only the repos whose specs differ from v4.1.0's; generated by builder/spec/internal/gen"
)

func run(shared, out string) error {
	v410, err := build(filepath.Join(shared, "upstream-v4.1.0", "specs.json"),
		filepath.Join(shared, "upstream-v4.1.0-multilingual", "specs-multilingual.json"), sourceV410)
	if err != nil {
		return err
	}
	final, err := build(filepath.Join(shared, "upstream-v5", "specs-final.json"),
		filepath.Join(shared, "upstream-v5", "specs-final-multilingual.json"), sourceFinal)
	if err != nil {
		return fmt.Errorf("final tables: %w", err)
	}
	if err := writeTables(out, v410, nil); err != nil {
		return err
	}
	if err := writeTables(filepath.Join(out, "final"), final, v410.Specs); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "envcache"), 0o755); err != nil {
		return err
	}
	n, err := envCache(shared, v410.HeredocEnv, filepath.Join(out, "envcache"))
	if err != nil {
		return err
	}
	langs := map[string]int{}
	for _, l := range v410.RepoToExt {
		langs[l]++
	}
	fmt.Printf("gen: %d repos %v, %d cached environment.yml files\n", len(v410.Specs), langs, n)
	return nil
}

// writeTables writes dir/specs.json and dir/specs/<repo>.json; with base
// set, only the repos whose normalized specs differ from base's.
func writeTables(dir string, t *tables, base map[string]map[string]json.RawMessage) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(t); err != nil {
		return fmt.Errorf("encoding tables: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.json"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	specs := t.Specs
	if base != nil {
		specs = map[string]map[string]json.RawMessage{}
		for repo, versions := range t.Specs {
			if !sameVersions(versions, base[repo]) {
				specs[repo] = versions
			}
		}
		fmt.Printf("gen: %s: %d repos differ from v4.1.0\n", dir, len(specs))
	}
	return writeRepoSpecs(filepath.Join(dir, "specs"), specs)
}

func sameVersions(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for v, raw := range a {
		if !bytes.Equal(compact(raw), compact(b[v])) {
			return false
		}
	}
	return true
}

// build reads one pair of upstream dumps (Python + every language, and the
// multilingual one) into the tables builder/spec reads.
func build(specsFile, mlFile, source string) (*tables, error) {
	var up, ml upstream
	if err := readJSON(specsFile, &up); err != nil {
		return nil, err
	}
	if err := readJSON(mlFile, &ml); err != nil {
		return nil, err
	}
	t := &tables{
		Source:             source,
		Specs:              map[string]map[string]json.RawMessage{},
		ReqsPaths:          up.ReqsPaths,
		EnvYMLPaths:        up.EnvYMLPaths,
		UseX86:             up.UseX86,
		DefaultDockerSpecs: up.Defaults,
		Branches:           up.Branches,
		NonTestExts:        up.NonTestExts,
		RepoToExt:          map[string]string{},
		RepoToInstall:      up.Install,
		Latest:             up.Latest,
		URLRaw:             up.URLRaw,
		StartTestOutput:    up.Start,
		EndTestOutput:      up.End,
		BaseTemplates:      up.Templates.Base,
		EnvTemplates:       up.Templates.Env,
		InstanceTemplates:  up.Templates.Instance,
		VariantTemplates:   map[string]string{"js_2": up.Templates.BaseJS2},
		HeredocEvalCommon:  ml.TestSpecJS.Heredoc,
		RepoTestCmds:       ml.TestSpecJS.TestCmds,
	}
	if err := sameTables(&up, &ml); err != nil {
		return nil, err
	}
	for repo, versions := range up.Specs {
		if up.RepoToExt[repo] != "py" {
			continue
		}
		for v, raw := range versions {
			if err := checkPython(raw); err != nil {
				return nil, fmt.Errorf("specs %s %s: %w", repo, v, err)
			}
		}
		t.Specs[repo] = versions
		t.RepoToExt[repo] = "py"
	}
	for repo, versions := range ml.Specs {
		lang := ml.RepoToExt[repo]
		if lang == "" || lang == "py" {
			return nil, fmt.Errorf("specs-multilingual.json: repo %s has language %q", repo, lang)
		}
		norm := make(map[string]json.RawMessage, len(versions))
		for v, raw := range versions {
			n, err := nonPython(raw)
			if err != nil {
				return nil, fmt.Errorf("specs-multilingual.json: %s %s: %w", repo, v, err)
			}
			norm[v] = n
		}
		t.Specs[repo] = norm
		t.RepoToExt[repo] = lang
	}
	for k, v := range up.TestSpecPython {
		var err error
		switch {
		case strings.HasPrefix(k, "HEREDOC_DELIMITER_env"):
			err = json.Unmarshal(v, &t.HeredocEnv)
		case strings.HasPrefix(k, "HEREDOC_DELIMITER_eval"):
			err = json.Unmarshal(v, &t.HeredocEval)
		case k == "REPLACE_REQ_PACKAGES":
			err = json.Unmarshal(v, &t.ReplaceReqPackages)
		}
		if err != nil {
			return nil, fmt.Errorf("decoding TEST_SPEC_PYTHON.%s: %w", k, err)
		}
	}
	switch {
	case t.HeredocEnv == "" || t.HeredocEval == "" || t.HeredocEvalCommon == "":
		return nil, errors.New("the reference lacks heredoc delimiters")
	case t.BaseTemplates["py"] == "" || up.Templates.BaseJS2 == "":
		return nil, errors.New("the reference lacks Dockerfile templates")
	}
	for repo, lang := range t.RepoToExt {
		if t.BaseTemplates[lang] == "" || t.InstanceTemplates[lang] == "" {
			return nil, fmt.Errorf("repo %s: no Dockerfile templates for language %q", repo, lang)
		}
	}
	return t, nil
}

// RepoFile is the file name of a repo's spec table under data/specs.
func RepoFile(repo string) string { return strings.ReplaceAll(repo, "/", "__") + ".json" }

// writeRepoSpecs replaces dir by one file per repo.
func writeRepoSpecs(dir string, specs map[string]map[string]json.RawMessage) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for repo, versions := range specs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		if err := enc.Encode(versions); err != nil {
			return fmt.Errorf("encoding %s: %w", repo, err)
		}
		if err := os.WriteFile(filepath.Join(dir, RepoFile(repo)), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sameTables checks that the two dumps agree where they overlap: the
// non-Python specs, languages and templates (specs.json holds every
// language too; specs-multilingual.json is the designated source).
func sameTables(up, ml *upstream) error {
	for repo, versions := range ml.Specs {
		if up.RepoToExt[repo] != ml.RepoToExt[repo] {
			return fmt.Errorf("repo %s: language %q in specs.json, %q in specs-multilingual.json", repo, up.RepoToExt[repo], ml.RepoToExt[repo])
		}
		if len(up.Specs[repo]) != len(versions) {
			return fmt.Errorf("repo %s: %d versions in specs.json, %d in specs-multilingual.json", repo, len(up.Specs[repo]), len(versions))
		}
		for v, raw := range versions {
			if !bytes.Equal(compact(up.Specs[repo][v]), compact(raw)) {
				return fmt.Errorf("repo %s version %s differs between specs.json and specs-multilingual.json", repo, v)
			}
		}
	}
	for lang, tmpl := range ml.Templates.Base {
		if up.Templates.Base[lang] != tmpl {
			return fmt.Errorf("_DOCKERFILE_BASE[%s] differs between the two dumps", lang)
		}
	}
	if up.Templates.BaseJS2 != ml.Templates.BaseJS2 {
		return errors.New("_DOCKERFILE_BASE_JS_2 differs between the two dumps")
	}
	return nil
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil
	}
	return b.Bytes()
}

// pythonKeys are the spec keys make_*_py read.
var pythonKeys = map[string]bool{
	"python": true, "packages": true, "install": true, "pip_packages": true, "pre_install": true,
	"eval_commands": true, "test_cmd": true, "no_use_env": true, "execute_test_as_nonroot": true, "nano_cpus": true,
}

func checkPython(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	for k := range m {
		if !pythonKeys[k] {
			return fmt.Errorf("unknown key %q (builder/spec would drop it)", k)
		}
	}
	return nil
}

// nonPython normalizes one non-Python spec for builder/spec.Spec.
func nonPython(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var order []string
	fields := map[string]json.RawMessage{}
	if err := readObject(dec, func(key string) error {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		order = append(order, key)
		fields[key] = v
		return nil
	}); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range order {
		v := fields[k]
		switch k {
		case "pre_install", "build":
			var l []string
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = l
		case "install":
			var l []string
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, fmt.Errorf("install: want a list: %w", err)
			}
			out["install_cmds"] = l
		case "apt-pkgs":
			var l []string
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, fmt.Errorf("apt-pkgs: %w", err)
			}
			if len(l) == 0 {
				// Upstream would write "apt-get install -y " for a present,
				// empty list; the normalized form could not tell it apart.
				return nil, errors.New("apt-pkgs: present but empty")
			}
			out["apt_pkgs"] = l
		case "test_cmd":
			var s string
			if err := json.Unmarshal(v, &s); err == nil {
				out["test_cmds"] = []string{s}
				break
			}
			var l []string
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, fmt.Errorf("test_cmd: want a string or a list: %w", err)
			}
			out["test_cmds"] = l
		case "docker_specs":
			pairs, err := orderedPairs(v)
			if err != nil {
				return nil, fmt.Errorf("docker_specs: %w", err)
			}
			out[k] = pairs
		default:
			return nil, fmt.Errorf("unknown key %q (builder/spec would drop it)", k)
		}
	}
	if out["test_cmds"] == nil {
		return nil, errors.New("no test_cmd")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// orderedPairs turns a JSON object into [[key, value], ...] in file order.
func orderedPairs(raw json.RawMessage) ([][2]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var out [][2]json.RawMessage
	err := readObject(dec, func(key string) error {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		k, _ := json.Marshal(key)
		out = append(out, [2]json.RawMessage{k, compact(v)})
		return nil
	})
	return out, err
}

// readObject reads one JSON object from dec, calling value for each key
// (which must consume the value).
func readObject(dec *json.Decoder, value func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want an object, got %v", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("want an object key, got %v", tok)
		}
		if err := value(key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the object")
	}
	return nil
}

type meta struct {
	InstanceID    string   `json:"instance_id"`
	EnvFromCache  bool     `json:"env_yml_from_cache"`
	EnvScriptList []string `json:"env_script_list"`
}

func envCache(shared, heredoc, out string) (int, error) {
	dir := filepath.Join(shared, "upstream-v4.1.0", "instances")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("listing reference instances: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	prefix := "cat <<'" + heredoc + "' > /root/environment.yml\n"
	suffix := "\n" + heredoc
	n := 0
	for _, name := range names {
		p := filepath.Join(dir, name, "x86_64", "meta.json")
		raw, err := os.ReadFile(p)
		if err != nil {
			return n, fmt.Errorf("reading %s: %w", p, err)
		}
		var m meta
		if err := json.Unmarshal(raw, &m); err != nil {
			return n, fmt.Errorf("decoding %s: %w", p, err)
		}
		if !m.EnvFromCache {
			continue
		}
		if len(m.EnvScriptList) < 2 || !strings.HasPrefix(m.EnvScriptList[1], prefix) || !strings.HasSuffix(m.EnvScriptList[1], suffix) {
			return n, fmt.Errorf("%s: env_script_list[1] is not the cached environment.yml heredoc", p)
		}
		yml := strings.TrimSuffix(strings.TrimPrefix(m.EnvScriptList[1], prefix), suffix)
		if err := os.WriteFile(filepath.Join(out, m.InstanceID+".yml"), []byte(yml), 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
