package render

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

type flatRefMeta struct {
	Splits           []string `json:"splits"`
	Status           string   `json:"status"`
	Language         string   `json:"language"`
	BaseBodyRepeated bool     `json:"base_body_repeated"`
}

// TestGoldenFlat renders every instance of upstream-v5/flat (the output of
// upstream's tools/make_v5_dockerfiles.py at 2514c86, x86_64 only) with the
// final tables and no pins. Python and Multimodal files must be
// byte-identical to Flat; Multilingual ones (where upstream repeats the base
// body) byte-identical to the upstream-exact variant, while Flat's are
// checked by TestFlatMultilingualBuildable.
func TestGoldenFlat(t *testing.T) {
	shared := spectest.SharedDir(t)
	refDir := filepath.Join(shared, "upstream-v5", "flat")
	recs := spectest.Records(t, shared, append(spectest.PythonSplits(), multilingualSplits...)...)
	r := newRendererVersion(t, spec.VersionFinal)
	ents, err := os.ReadDir(refDir)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".Dockerfile")
		if !ok {
			continue
		}
		var m flatRefMeta
		readJSONFile(t, filepath.Join(refDir, "meta", id+".json"), &m)
		if m.Status != "ok" || len(m.Splits) == 0 {
			t.Errorf("%s: meta status %q, splits %v", id, m.Status, m.Splits)
			continue
		}
		inst := recs[m.Splits[0]][id]
		if inst == nil {
			t.Errorf("%s: no record in %s", id, m.Splits[0])
			continue
		}
		res, err := r.Render(context.Background(), inst, core.AMD64)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		want, err := os.ReadFile(filepath.Join(refDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if res.EnvFromBase != m.BaseBodyRepeated {
			t.Errorf("%s: EnvFromBase %v, meta base_body_repeated %v", id, res.EnvFromBase, m.BaseBodyRepeated)
		}
		got, err := res.Flat(inst.ImageAssets)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		exact, err := res.flat(inst.ImageAssets, true)
		if err != nil {
			t.Fatal(err)
		}
		split := strings.SplitN(m.Splits[0], "/", 2)[0]
		switch {
		case !m.BaseBodyRepeated && got != string(want):
			t.Errorf("%s (%s) differs from upstream:\n%s", id, split, firstDiff(string(want), got))
		case m.BaseBodyRepeated && exact != string(want):
			t.Errorf("%s (%s, upstream-exact variant) differs from upstream:\n%s", id, split, firstDiff(string(want), exact))
		case m.BaseBodyRepeated && got == string(want):
			t.Errorf("%s (%s): the repeated base body was not dropped", id, split)
		default:
			counts[split+"/"+m.Language]++
		}
	}
	want := map[string]int{
		"SWE-bench_Verified/py": 500, "SWE-bench_Multimodal/js": 53,
		"SWE-bench_Multilingual/c": 20, "SWE-bench_Multilingual/go": 20, "SWE-bench_Multilingual/java": 24,
		"SWE-bench_Multilingual/js": 20, "SWE-bench_Multilingual/php": 22, "SWE-bench_Multilingual/rb": 28,
		"SWE-bench_Multilingual/rs": 23,
	}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("byte-identical per split/language %v, want %v", counts, want)
	}
	t.Logf("byte-identical: %v", counts)
}

// TestFlatMultilingualBuildable parses every Multilingual flat file (the
// languages whose Dockerfile.env is the base template again) with
// BuildKit's Dockerfile parser: Flat's has one FROM and no RUN, COPY or ADD
// instruction twice (so `adduser nonroot` runs once), while upstream's own
// bytes repeat the base body (the check fails on them, as it must).
func TestFlatMultilingualBuildable(t *testing.T) {
	shared := spectest.SharedDir(t)
	recs := spectest.Records(t, shared, "SWE-bench_Multilingual/test")
	r := newRendererVersion(t, spec.VersionFinal)
	n, upstreamRepeats := 0, 0
	for _, inst := range recs["SWE-bench_Multilingual/test"] {
		res, err := r.Render(context.Background(), inst, core.AMD64)
		if err != nil {
			t.Errorf("%s: %v", inst.InstanceID, err)
			continue
		}
		got, err := res.Flat(inst.ImageAssets)
		if err != nil {
			t.Fatal(err)
		}
		if rep := repeatedInstructions(t, got); len(rep) > 0 || strings.Count(got, "adduser") > 1 {
			t.Errorf("%s: instructions repeated: %q", inst.InstanceID, rep)
		}
		exact, err := res.flat(inst.ImageAssets, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(repeatedInstructions(t, exact)) > 0 {
			upstreamRepeats++
		}
		n++
	}
	if n != 300 || upstreamRepeats != 300 {
		t.Errorf("%d Multilingual files, %d with repeats in upstream's form; want 300 and 300", n, upstreamRepeats)
	}
	t.Logf("%d Multilingual flat files: none repeats an instruction (upstream's form repeats in %d)", n, upstreamRepeats)
}

// repeatedInstructions parses a Dockerfile with BuildKit's parser and
// returns the RUN, COPY, ADD and FROM instructions that occur more than once.
func repeatedInstructions(t *testing.T, dockerfile string) []string {
	t.Helper()
	res, err := parser.Parse(strings.NewReader(dockerfile))
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	seen := map[string]int{}
	var out []string
	for _, node := range res.AST.Children {
		switch strings.ToLower(node.Value) {
		case "run", "copy", "add", "from":
		default:
			continue
		}
		key := node.Original
		for _, h := range node.Heredocs {
			key += "\n" + h.Content
		}
		if strings.ToLower(node.Value) == "from" {
			key = "FROM"
		}
		if seen[key]++; seen[key] == 2 {
			out = append(out, node.Original)
		}
	}
	return out
}
