package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
)

type refMeta struct {
	EnvKey      string `json:"env_image_key"`
	InstanceKey string `json:"instance_image_key"`
	InUseX86    bool   `json:"in_USE_X86"`
}

func verified(t *testing.T) (string, []core.Instance) {
	shared := spectest.SharedDir(t)
	insts, err := spectest.ReadJSONL(filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return shared, insts
}

// TestPlanVerified checks node counts and keys per platform against the
// reference meta.json files, the x86-only ids, and env node sharing.
func TestPlanVerified(t *testing.T) {
	shared, insts := verified(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables}
	p, err := Build(context.Background(), r, insts, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 0 {
		t.Fatalf("errors: %+v", p.Errors[0])
	}
	// Expected graph from the reference data.
	for _, platform := range core.AllPlatforms() {
		arch := platform.Arch()
		wantEnv := map[string][]string{}
		wantInst := map[string]string{}
		var wantSkipped []string
		for _, inst := range insts {
			raw, err := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", inst.InstanceID, arch, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m refMeta
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if platform == core.ARM64 && m.InUseX86 {
				wantSkipped = append(wantSkipped, inst.InstanceID)
				continue
			}
			wantEnv[m.EnvKey] = append(wantEnv[m.EnvKey], inst.InstanceID)
			wantInst[m.InstanceKey] = m.EnvKey
		}
		sort.Strings(wantSkipped)
		var pp *PlatformPlan
		for i := range p.Platforms {
			if p.Platforms[i].Platform == platform {
				pp = &p.Platforms[i]
			}
		}
		if pp == nil {
			t.Fatalf("no plan for %s", arch)
		}
		if pp.Totals.Base != 1 || pp.Totals.Env != len(wantEnv) || pp.Totals.Instance != len(wantInst) {
			t.Errorf("%s totals %+v, want 1 base, %d env, %d instance", arch, pp.Totals, len(wantEnv), len(wantInst))
		}
		t.Logf("%s: %+v", pp.Platform, pp.Totals)
		if strings.Join(pp.Skipped, ",") != strings.Join(wantSkipped, ",") {
			t.Errorf("%s: skipped %d ids, want %d", arch, len(pp.Skipped), len(wantSkipped))
		}
		for _, n := range pp.Nodes {
			switch n.Kind {
			case graph.KindEnv:
				want := wantEnv[n.Key]
				sort.Strings(want)
				if strings.Join(n.Instances, ",") != strings.Join(want, ",") {
					t.Errorf("env node %s: instances %v, want %v", n.Key, n.Instances, want)
				}
				// Sharing means identical env scripts.
				first, _ := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", n.Instances[0], arch, "setup_env.sh"))
				for _, id := range n.Instances[1:] {
					other, _ := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", id, arch, "setup_env.sh"))
					if !bytes.Equal(first, other) {
						t.Errorf("env node %s shared by %s and %s with different setup_env.sh", n.Key, n.Instances[0], id)
					}
				}
				if n.Parent() != "sweb.base.py."+arch+":latest" {
					t.Errorf("env node %s parent %s", n.Key, n.Parent())
				}
			case graph.KindInstance:
				if wantInst[n.Key] != n.Parent() {
					t.Errorf("instance node %s: parent %s, want %s", n.Key, n.Parent(), wantInst[n.Key])
				}
				if string(n.Context[render.FileSetupRepo]) == "" || len(n.Dockerfile) == 0 {
					t.Errorf("instance node %s has no build input", n.Key)
				}
			}
		}
	}
	if len(p.X86Only) != 86 {
		t.Errorf("%d x86-only Verified ids, want 86", len(p.X86Only))
	}
	var buf bytes.Buffer
	if err := p.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"linux/arm64: 1 base", "86 x86-only instances have no linux/arm64 node", "x86-only by USE_X86 (no linux/arm64 node): " + p.X86Only[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestPlanErrorsKeepGoing: an instance with an unknown version is reported
// with its source, and the others are planned.
func TestPlanErrorsKeepGoing(t *testing.T) {
	_, insts := verified(t)
	insts = append([]core.Instance(nil), insts[:3]...)
	insts[1].Version = "99.9"
	insts[1].Source = "x.jsonl:2"
	tables, _ := spec.Load()
	p, err := Build(context.Background(), &render.Renderer{Tables: tables}, insts, []core.Platform{core.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 1 || p.Errors[0].InstanceID != insts[1].InstanceID || p.Errors[0].Source != "x.jsonl:2" {
		t.Fatalf("errors %+v", p.Errors)
	}
	if p.Platforms[0].Totals.Instance != 2 {
		t.Errorf("totals %+v", p.Platforms[0].Totals)
	}
	if _, err := Build(context.Background(), &render.Renderer{Tables: tables}, insts, []core.Platform{{}}); err == nil {
		t.Error("no platform accepted")
	}
}

// independentX86Rule applies the written conditions of the two x86-only
// rules (spec.X86Rules) to a spec as dumped in the shared reference's
// specs-multilingual.json, without package spec: JavaScript node_version
// below 4; a pre_install/install/build command running
// node_modules/puppeteer/install.js.
func independentX86Rule(lang string, s map[string]json.RawMessage) string {
	var ds map[string]any
	_ = json.Unmarshal(s["docker_specs"], &ds)
	if nv, ok := ds["node_version"].(string); ok && lang == "js" {
		if n, err := strconv.Atoi(strings.Split(nv, ".")[0]); err == nil && n < 4 {
			return spec.RuleNodeWithoutArm64
		}
	}
	for _, k := range []string{"pre_install", "install", "build"} {
		var cmds []string
		_ = json.Unmarshal(s[k], &cmds)
		for _, c := range cmds {
			if strings.Contains(c, "node_modules/puppeteer/install.js") {
				return spec.RulePuppeteerChromium
			}
		}
	}
	return ""
}

// TestPlanMultilingual plans all of SWE-bench Multilingual (300) and
// Multimodal (102) for both platforms with the default pins and checks,
// per language, how many instances get arm64 nodes and which rule makes
// each other one x86-only, against counts computed here from the reference
// tables and the datasets, and against the numbers written down.
func TestPlanMultilingual(t *testing.T) {
	shared := spectest.SharedDir(t)
	var insts []core.Instance
	for _, split := range []string{"SWE-bench_Multilingual/test", "SWE-bench_Multimodal/dev"} {
		got, err := spectest.ReadJSONL(filepath.Join(shared, "datasets", split+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, got...)
	}
	raw, err := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0-multilingual", "specs-multilingual.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Specs map[string]map[string]map[string]json.RawMessage `json:"MAP_REPO_VERSION_TO_SPECS"`
		Ext   map[string]string                                `json:"MAP_REPO_TO_EXT"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	wantRule := map[string]string{}
	wantLangs := map[string]*Language{}
	for _, in := range insts {
		lang := ref.Ext[in.Repo]
		l := wantLangs[lang]
		if l == nil {
			l = &Language{Language: lang}
			wantLangs[lang] = l
		}
		l.Instances++
		if rule := independentX86Rule(lang, ref.Specs[in.Repo][in.Version]); rule != "" {
			wantRule[in.InstanceID] = rule
			if l.X86Only == nil {
				l.X86Only = map[string]int{}
			}
			l.X86Only[rule]++
		} else {
			l.ARM64++
		}
	}
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, err := pins.Named("default")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(context.Background(), &render.Renderer{Tables: tables, Pins: set}, insts, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 0 {
		t.Fatalf("%d errors, first %+v", len(p.Errors), p.Errors[0])
	}
	var want []Language
	for _, name := range sortedKeys(wantLangs) {
		want = append(want, *wantLangs[name])
	}
	if !reflect.DeepEqual(p.Languages, want) {
		t.Errorf("languages\n got %+v\nwant %+v", p.Languages, want)
	}
	if !reflect.DeepEqual(p.X86OnlyRule, wantRule) {
		t.Errorf("x86-only rules: got %v, want %v", p.X86OnlyRule, wantRule)
	}
	// The numbers as written in the README / report.
	written := []Language{
		{Language: "c", Instances: 42, ARM64: 42}, {Language: "go", Instances: 42, ARM64: 42},
		{Language: "java", Instances: 43, ARM64: 43},
		{Language: "js", Instances: 145, ARM64: 130, X86Only: map[string]int{spec.RulePuppeteerChromium: 15}},
		{Language: "php", Instances: 43, ARM64: 43}, {Language: "rb", Instances: 44, ARM64: 44}, {Language: "rs", Instances: 43, ARM64: 43},
	}
	if !reflect.DeepEqual(want, written) {
		t.Errorf("independent counts %+v differ from the written table %+v", want, written)
	}
	// The reference half's own setup_repo.sh of every x86-only instance
	// runs the puppeteer download (the rule's evidence in upstream's output).
	refDir := filepath.Join(shared, "upstream-v4.1.0-multilingual", "instances")
	for id := range wantRule {
		b, err := os.ReadFile(filepath.Join(refDir, id, "arm64", "setup_repo.sh"))
		if err != nil {
			continue // the other half
		}
		if !bytes.Contains(b, []byte("node_modules/puppeteer/install.js")) {
			t.Errorf("%s: x86-only, but upstream's setup_repo.sh does not run puppeteer's download", id)
		}
	}
	for _, pp := range p.Platforms {
		wantInst := len(insts)
		if pp.Platform == core.ARM64 {
			wantInst -= len(wantRule)
		}
		if pp.Totals.Instance != wantInst || len(pp.Skipped) != len(insts)-wantInst {
			t.Errorf("%s: %d instance nodes, %d skipped; want %d, %d", pp.Platform, pp.Totals.Instance, len(pp.Skipped), wantInst, len(insts)-wantInst)
		}
		t.Logf("%s: %+v", pp.Platform, pp.Totals)
	}
	// NOTES.md: 38 distinct base and 38 env keys per arch over the 402
	// records (c 1/1, go 6/6, java 3/3, js 19/19, php 1/1, rb 2/2, rs 6/6);
	// no default pin changes an x86_64 file.
	if amd := p.Platforms[0]; amd.Totals.Base != 38 || amd.Totals.Env != 38 {
		t.Errorf("linux/amd64: %d base, %d env nodes; want 38, 38", amd.Totals.Base, amd.Totals.Env)
	}
	var buf bytes.Buffer
	if err := p.WriteLanguages(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	if !strings.Contains(buf.String(), "js        145        130    15        puppeteer-bundled-chromium=15") {
		t.Errorf("language table:\n%s", buf.String())
	}
}
