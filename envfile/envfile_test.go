package envfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// golden is testdata/upstream_v4.1.0_golden.json: inputs, and the outputs
// upstream v4.1.0's own functions (swebench/harness/test_spec/python.py,
// run unmodified under Python 3.11 with requests.get replaced by a lookup in
// "files") gave for them. get_requirements is
// clean_requirements(get_requirements_by_commit(...)); get_environment_yml
// is clean_environment_yml(get_environment_yml_by_commit(..., "testbed")).
// "requested" lists the URLs upstream asked for, in order.
type golden struct {
	Name      string            `json:"name"`
	Fn        string            `json:"fn"`
	In        string            `json:"in"`
	Repl      [][]*string       `json:"repl"`
	Repo      string            `json:"repo"`
	Commit    string            `json:"commit"`
	Files     map[string]string `json:"files"`
	Want      string            `json:"want"`
	Requested []string          `json:"requested"`
}

// The path tables the golden file was made with.
var (
	goldenReqsPaths = map[string][]string{"o/r": {"reqs/dev.txt", "req.txt"}, "o/flat": {"requirements_test.txt"}}
	goldenYMLPaths  = map[string][]string{"o/r": {"ci/environment.yml", "environment.yml"}}
)

func loadGolden(t *testing.T) []golden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "upstream_v4.1.0_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []golden
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// replacements are the case's, or upstream's REPLACE_REQ_PACKAGES (the
// spec tables') when it gives none.
func (g golden) replacements(t *testing.T) []Replacement {
	if g.Repl == nil {
		tables, err := spec.Load()
		if err != nil {
			t.Fatal(err)
		}
		return Replacements(tables.ReplaceReqPackages)
	}
	var out []Replacement
	for _, r := range g.Repl {
		if r[1] == nil {
			out = append(out, Replacement{Package: *r[0], Remove: true})
		} else {
			out = append(out, Replacement{Package: *r[0], With: *r[1]})
		}
	}
	return out
}

// fileSource is a Source over files keyed by URL that records the URLs
// asked for, as upstream_golden.py's stand-in for requests.get does.
type fileSource struct {
	files     map[string]string
	requested []string
}

func (f *fileSource) Fetch(_ context.Context, url string) (string, bool, error) {
	f.requested = append(f.requested, url)
	body, ok := f.files[url]
	return body, ok, nil
}

func TestUpstreamGolden(t *testing.T) {
	for _, g := range loadGolden(t) {
		t.Run(g.Name, func(t *testing.T) {
			var got string
			var err error
			switch g.Fn {
			case "clean_requirements":
				got = CleanRequirements(g.In, g.replacements(t))
			case "clean_environment_yml":
				got = CleanEnvironmentYML(g.In, g.replacements(t))
			case "get_requirements", "get_environment_yml":
				src := &fileSource{files: g.Files}
				if g.Fn == "get_requirements" {
					got, err = GetRequirements(context.Background(), src, g.Repo, g.Commit, goldenReqsPaths[g.Repo], g.replacements(t))
				} else {
					got, err = GetEnvironmentYML(context.Background(), src, g.Repo, g.Commit, goldenYMLPaths[g.Repo], "testbed", g.replacements(t))
				}
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(src.requested, g.Requested) {
					t.Errorf("requested\n %q\nwant\n %q", src.requested, g.Requested)
				}
			default:
				t.Fatalf("unknown fn %q", g.Fn)
			}
			if got != g.Want {
				t.Errorf("got\n%q\nwant\n%q", got, g.Want)
			}
		})
	}
}

// TestCandidatesMatchUpstream checks every URL list of
// upstream-v4.1.0/network_needed.txt (165 instances) against Candidates,
// using the instances' records and the path tables of specs.json.
func TestCandidatesMatchUpstream(t *testing.T) {
	ref := spectest.SharedDir(t)
	raw, err := os.ReadFile(filepath.Join(ref, "upstream-v4.1.0", "specs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var specs struct {
		Reqs map[string][]string `json:"MAP_REPO_TO_REQS_PATHS"`
		YML  map[string][]string `json:"MAP_REPO_TO_ENV_YML_PATHS"`
	}
	if err := json.Unmarshal(raw, &specs); err != nil {
		t.Fatal(err)
	}
	// repo and commit of every record of the splits upstream generated.
	type rc struct{ repo, commit string }
	records := map[string]rc{}
	splits := spectest.PythonSplits()
	recs := spectest.Records(t, ref, splits...)
	for _, sp := range splits {
		for id, r := range recs[sp] {
			commit := r.EnvironmentSetupCommit
			if commit == "" {
				commit = r.BaseCommit
			}
			records[id] = rc{r.Repo, commit}
		}
	}
	nn, err := os.ReadFile(filepath.Join(ref, "upstream-v4.1.0", "network_needed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(nn)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("bad line %q", line)
		}
		id, tried, kind, all := f[0], f[1], f[2], strings.Split(f[3], ",")
		r, ok := records[id]
		if !ok {
			t.Fatalf("%s: no record", id)
		}
		var got []string
		switch kind {
		case "requirements.txt":
			got = RequirementsCandidates(r.repo, r.commit, specs.Reqs[r.repo])
		case "environment.yml":
			got = EnvironmentYMLCandidates(r.repo, r.commit, specs.YML[r.repo])
		default:
			t.Fatalf("%s: kind %q", id, kind)
		}
		if !reflect.DeepEqual(got, all) || got[0] != tried {
			t.Errorf("%s: candidates %q, upstream %q (first %q)", id, got, all, tried)
		}
		n++
	}
	if n != 165 {
		t.Errorf("checked %d instances, want 165", n)
	}
}

func TestIncludeURL(t *testing.T) {
	for _, tc := range []struct{ reqPath, name, want string }{
		{"requirements_test.txt", "requirements.txt", "https://raw.githubusercontent.com/o/r/c/requirements.txt"},
		{"requirements/dev/dev-requirements.txt", "../testing/all.txt", "https://raw.githubusercontent.com/o/r/c/requirements/dev/../testing/all.txt"},
		{"tests/requirements/py3.txt", "/abs.txt", "/abs.txt"}, // os.path.join restarts at an absolute part
	} {
		if got := IncludeURL("o/r", "c", tc.reqPath, tc.name); got != tc.want {
			t.Errorf("IncludeURL(%q, %q) = %q, want %q", tc.reqPath, tc.name, got, tc.want)
		}
	}
}

// TestPyJoin: Python's posixpath.join (moved here with the function from
// builder/render's TestPosixJoin).
func TestPyJoin(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"https://x/", "a/b", "c", "", "f.txt"}, "https://x/a/b/c/f.txt"},
		{[]string{"a", "/abs", "b"}, "/abs/b"},
		{[]string{"a/", "b"}, "a/b"},
	} {
		if got := pyJoin(tc.parts...); got != tc.want {
			t.Errorf("pyJoin(%q) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}

func TestExpandRequirementsIncludeErrorStops(t *testing.T) {
	_, err := ExpandRequirements("-r a.txt\nx\n", func(string) (string, bool, error) {
		return "", false, os.ErrPermission
	})
	if err != os.ErrPermission {
		t.Errorf("err = %v", err)
	}
}

func TestDecodeText(t *testing.T) {
	// Expected values are Python's bytes.decode("utf-8", "replace").
	for in, want := range map[string]string{
		"plain é":          "plain é",
		"\xe2\x82A":        "\uFFFDA",
		"\xf0\x80\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":         "\uFFFD\uFFFD",
		"\xe0\x80\xaf":     "\uFFFD\uFFFD\uFFFD",
		"a\xf1\x80\x80":    "a\uFFFD",
		"\xff":             "\uFFFD",
		"\xef\xbb\xbfbom":  "\ufeffbom",
	} {
		if got := DecodeText([]byte(in)); got != want {
			t.Errorf("DecodeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRawRootIsTables: the candidate URLs start with upstream's
// SWE_BENCH_URL_RAW, as the spec tables hold it.
func TestRawRootIsTables(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RawURL("o/r", "c", "p.txt"), tables.URLRaw+"o/r/c/p.txt"; got != want {
		t.Errorf("RawURL = %q, tables give %q", got, want)
	}
}
