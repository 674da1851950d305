package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/fetch"
	"github.com/swebuild/swebuild/retry"
	"github.com/swebuild/swebuild/sizes"
)

// The offline fixture (testdata/fixture/README.md): seven instances, of
// which fixture__textutil-2 is x86-only (specs.json's x86_only list).
var fixtureIDs = []string{
	"fixture__calc-1", "fixture__calc-2", "fixture__semver-1", "fixture__semver-2",
	"fixture__textutil-1", "fixture__textutil-2", "fixture__textutil-3",
}

const fixtureX86Only = "fixture__textutil-2"

// fixtureInputs are the fixture dataset's inputs, narrowed to ids when given.
func fixtureInputs(t *testing.T, ids ...string) Inputs {
	t.Helper()
	return Inputs{
		Dataset: filepath.Join("..", "testdata", "fixture", "dataset.jsonl"),
		Specs:   filepath.Join("..", "testdata", "fixture", "specs.json"),
		Pins:    "default", CacheDir: t.TempDir(), Offline: true, Instances: ids,
	}
}

func loadFixture(t *testing.T) *Loaded {
	t.Helper()
	l, err := Load(context.Background(), fixtureInputs(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWriteFilesUpstream: render --out of a Verified instance with
// --pins none writes upstream v4.1.0's files byte for byte, for both
// arches (upstream-v4.1.0/instances/<id>/<arch>/).
func TestWriteFilesUpstream(t *testing.T) {
	shared := spectest.SharedDir(t)
	const id = "astropy__astropy-12907" // no download needed (not in instances_partial)
	l, err := Load(context.Background(), Inputs{
		Dataset:   filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
		Instances: []string{id}, Pins: "none", CacheDir: t.TempDir(), Offline: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	n, wanted, failed := l.WriteFiles(context.Background(), FilesOptions{Platforms: core.AllPlatforms(), Out: out, Jobs: 1})
	if n != 2 || wanted != 2 || len(failed) != 0 {
		t.Fatalf("wrote %d of %d, failed %v; want 2 of 2", n, wanted, failed)
	}
	for _, arch := range []string{"x86_64", "arm64"} {
		for _, f := range []string{"Dockerfile.base", "Dockerfile.env", "Dockerfile.instance", "setup_env.sh", "setup_repo.sh", "eval.sh"} {
			want, err := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0", "instances", id, arch, f))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(out, id, arch, f))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s: %v; differs from upstream's:\n got %q\nwant %q", arch, f, err, got, want)
			}
		}
	}
	// An instance id that cannot be a directory fails alone.
	l.Instances[0].InstanceID = "../escape"
	n, _, failed = l.WriteFiles(context.Background(), FilesOptions{Platforms: []core.Platform{core.AMD64}, Out: t.TempDir()})
	if n != 0 || len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), `instance_id "../escape" cannot be used as a directory name`) {
		t.Errorf("bad id: wrote %d, failed %v", n, failed)
	}
}

// TestWriteFilesTaskRepo: a task repo's records are written as their own
// Dockerfile and eval.sh per platform; every fixture task gets both but
// the x86-only one (its task.yaml's x86_only), which gets no arm64 files.
func TestWriteFilesTaskRepo(t *testing.T) {
	repo := fixtureTaskRepo(t)
	l, err := Load(context.Background(), Inputs{TaskRepo: repo, Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	n, wanted, failed := l.WriteFiles(context.Background(), FilesOptions{Platforms: core.AllPlatforms(), Out: out})
	if n != 13 || wanted != 13 || len(failed) != 0 {
		t.Fatalf("wrote %d of %d, failed %v; want 13 of 13", n, wanted, failed)
	}
	for _, id := range fixtureIDs {
		for _, name := range []string{"Dockerfile", "eval.sh"} {
			want, err := os.ReadFile(filepath.Join(repo, "tasks", id, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(out, id, "x86_64", name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s x86_64 %s: %v; not the task's own file", id, name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(out, id, "arm64", "Dockerfile")); (err == nil) == (id == fixtureX86Only) {
			t.Errorf("%s: arm64 Dockerfile: %v (x86-only: %v)", id, err, id == fixtureX86Only)
		}
	}
	// Out under a file: the one failure names it.
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n, wanted, failed = l.WriteFiles(context.Background(), FilesOptions{Platforms: []core.Platform{core.AMD64}, Out: file})
	if n != 0 || wanted != 7 || len(failed) != 1 || failed[0].InstanceID != "*" {
		t.Errorf("out is a file: wrote %d of %d, failed %v", n, wanted, failed)
	}
}

// TestWriteTaskRepo: render --task-repo-out writes the dataset's records
// as a task repo that loads back as the same records (their ids, repos,
// commits, patches and labels) with the same platform decisions (USE_X86's
// django__django-10097 stays x86-only); a dataset file needs a dataset
// name, a hub dataset gives its own, and a task repo is not written again.
func TestWriteTaskRepo(t *testing.T) {
	ctx := context.Background()
	const x86Only = "django__django-10097" // in USE_X86_PY.txt
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	l, err := Load(ctx, Inputs{Dataset: ds, Instances: []string{"astropy__astropy-12907", x86Only}, Pins: "default", CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	err = l.WriteTaskRepo(ctx, TaskRepoOptions{Out: t.TempDir()}, &out, &log)
	if !errors.Is(err, ErrNoTaskRepoDataset) || !strings.Contains(err.Error(), ds) {
		t.Errorf("dataset file, no name: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "tr")
	out.Reset()
	if err := l.WriteTaskRepo(ctx, TaskRepoOptions{Out: dir, Dataset: "SWE-bench/SWE-bench_Verified"}, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if want := fmt.Sprintf("wrote 2 of 2 tasks into the task repo %s\n", dir); out.String() != want {
		t.Errorf("out %q, want %q", out.String(), want)
	}
	back, err := Load(ctx, Inputs{TaskRepo: dir, Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Instances) != len(l.Instances) {
		t.Fatalf("%d tasks read back, want %d", len(back.Instances), len(l.Instances))
	}
	byID := map[string]*core.Instance{}
	for i := range back.Instances {
		byID[back.Instances[i].InstanceID] = &back.Instances[i]
	}
	for i := range l.Instances {
		w := &l.Instances[i]
		g := byID[w.InstanceID]
		switch {
		case g == nil:
			t.Errorf("%s: not in the task repo", w.InstanceID)
		case g.Repo != w.Repo || g.BaseCommit != w.BaseCommit || g.Patch != w.Patch || g.TestPatch != w.TestPatch ||
			!slices.Equal(g.FailToPass, w.FailToPass) || !slices.Equal(g.PassToPass, w.PassToPass):
			t.Errorf("%s: read back differs: %+v", w.InstanceID, g)
		case !slices.Equal(back.Decide(g).Platforms, l.Decide(w).Platforms):
			t.Errorf("%s: platforms %v read back, %v written", w.InstanceID, back.Decide(g).Platforms, l.Decide(w).Platforms)
		}
	}
	if g := byID[x86Only]; g == nil || !slices.Equal(back.Decide(g).Platforms, []core.Platform{core.AMD64}) {
		t.Errorf("%s read back: not linux/amd64 only", x86Only)
	}

	// A hub dataset names the task repo's dataset and split itself.
	hubbed := *l
	hubbed.Source = dataset.Source{Name: "SWE-bench/SWE-bench_Verified", Revision: strings.Repeat("1", 40), Split: "dev"}
	dir2 := filepath.Join(t.TempDir(), "tr")
	if err := hubbed.WriteTaskRepo(ctx, TaskRepoOptions{Out: dir2}, &out, &log); err != nil {
		t.Fatal(err)
	}
	sweb, err := os.ReadFile(filepath.Join(dir2, "sweb.yaml"))
	if err != nil || !strings.Contains(string(sweb), "SWE-bench/SWE-bench_Verified") || !strings.Contains(string(sweb), "dev") {
		t.Errorf("sweb.yaml of a hub dataset: %v\n%s", err, sweb)
	}

	// A task repo input is refused, said on log.
	tr, err := Load(ctx, Inputs{TaskRepo: fixtureTaskRepo(t), Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	log.Reset()
	out.Reset()
	err = tr.WriteTaskRepo(ctx, TaskRepoOptions{Out: t.TempDir(), Dataset: "x/y"}, &out, &log)
	if err == nil || err.Error() != "1 task(s) failed" || !strings.Contains(log.String(), "render: task repo: ") ||
		!strings.Contains(log.String(), "the input is a task repo already") || !strings.Contains(out.String(), "wrote 0 of 7 tasks") {
		t.Errorf("task repo input: err %v, out %q, log %q", err, out.String(), log.String())
	}
}

// TestPlanWrite: `swebuild plan` as a table and as JSON, for a dataset (the
// graph) and a task repo (its tasks); the fixture's x86-only instance is
// in both, and the error of a plan with failures counts them.
func TestPlanWrite(t *testing.T) {
	ctx := context.Background()
	l := loadFixture(t)
	p, err := l.Plan(ctx, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	var table, js, log bytes.Buffer
	if err := p.Write(&table, &log, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), fixtureX86Only) {
		t.Errorf("table does not name the x86-only %s:\n%s", fixtureX86Only, table.String())
	}
	if err := p.Write(&js, &log, true); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || !strings.HasPrefix(js.String(), "{\n  \"") {
		t.Errorf("JSON plan is not indented JSON: %v\n%.300s", err, js.String())
	}
	if log.Len() != 0 {
		t.Errorf("a plan without errors said %q", log.String())
	}
	for _, r := range p.Records {
		want := []core.Platform{core.AMD64, core.ARM64}
		if r.InstanceID == fixtureX86Only {
			want = want[:1]
		}
		if !slices.Equal(r.Platforms, want) || (r.X86Only != "") != (r.InstanceID == fixtureX86Only) {
			t.Errorf("%s: %v, x86-only %q", r.InstanceID, r.Platforms, r.X86Only)
		}
	}
	if of := l.PlatformsOf(); !slices.Equal(of(&l.Instances[5]), []core.Platform{core.AMD64}) || l.Instances[5].InstanceID != fixtureX86Only {
		t.Errorf("PlatformsOf(%s) = %v", l.Instances[5].InstanceID, of(&l.Instances[5]))
	}

	// A task repo's plan lists its tasks.
	tr, err := Load(ctx, Inputs{TaskRepo: fixtureTaskRepo(t), Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Plan(ctx, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	table.Reset()
	js.Reset()
	if err := tp.Write(&table, &log, false); err != nil || table.Len() == 0 {
		t.Errorf("task repo table: %v", err)
	}
	if err := tp.Write(&js, &log, true); err != nil {
		t.Fatal(err)
	}
	for _, id := range fixtureIDs {
		if !strings.Contains(js.String(), `"`+id+`"`) {
			t.Errorf("task repo JSON plan lacks %s", id)
		}
	}

	// Writing to a writer that fails is an error.
	if err := p.Write(failWriter{}, &log, false); err == nil || !strings.Contains(err.Error(), "writing plan") {
		t.Errorf("table to a failing writer: %v", err)
	}
	if err := p.Write(failWriter{}, &log, true); err == nil || !strings.Contains(err.Error(), "writing plan") {
		t.Errorf("JSON to a failing writer: %v", err)
	}

	// Plan.Err: the input's error, the count of records not planned, both.
	loadErr := errors.New("d.jsonl: 1 invalid record(s)")
	if err := p.Err(nil); err != nil {
		t.Errorf("no failures: %v", err)
	}
	if err := p.Err(loadErr); err != loadErr {
		t.Errorf("only the input's error: %v", err)
	}
	bad := *p
	bad.Errors = append(slices.Clip(bad.Errors), planError(fixtureIDs[0], core.ARM64), planError(fixtureIDs[1], core.AMD64))
	if err := bad.Err(nil); err == nil || err.Error() != "2 instance(s) could not be planned" {
		t.Errorf("two failures: %v", err)
	}
	if err := bad.Err(loadErr); !errors.Is(err, loadErr) || !strings.HasSuffix(err.Error(), "; 2 instance(s) could not be planned") {
		t.Errorf("both: %v", err)
	}
	log.Reset()
	if err := bad.Write(&bytes.Buffer{}, &log, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "plan: "+fixtureIDs[0]+" (linux/arm64): ") || strings.Count(log.String(), "\n") != 2 {
		t.Errorf("JSON plan with failures: log %q", log.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestLoadErrors: each input that cannot be loaded is an error naming what
// is wrong, and nothing is loaded.
func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	fx := fixtureInputs(t)
	with := func(f func(*Inputs)) Inputs { in := fx; f(&in); return in }
	badDataset := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(badDataset, []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyDir, notDocDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(notDocDir, "env.json"), []byte(`{"schema": "something else"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   Inputs
		want string
	}{
		{"no input", Inputs{CacheDir: t.TempDir()}, ErrNoDataset.Error()},
		{"specs version", with(func(in *Inputs) { in.SpecsVersion = "3.0" }), "3.0"},
		{"specs file", with(func(in *Inputs) { in.Specs = filepath.Join(t.TempDir(), "absent.json") }), "absent.json"},
		{"pins", with(func(in *Inputs) { in.Pins = "no-such-rule" }), "pin set: "},
		{"freeze directory", with(func(in *Inputs) { in.Freeze = filepath.Join(t.TempDir(), "absent") }), "absent"},
		{"freeze directory of no env document", with(func(in *Inputs) { in.Freeze = emptyDir }), emptyDir + ": no environment documents"},
		{"freeze document not one", with(func(in *Inputs) { in.Freeze = notDocDir }), filepath.Join(notDocDir, "env.json") + ": "},
		{"no cache", with(func(in *Inputs) { in.CacheDir = "" }), "no cache directory given"},
		{"dataset absent", with(func(in *Inputs) { in.Dataset = filepath.Join(t.TempDir(), "absent.jsonl") }), "absent.jsonl"},
		{"unknown instance", with(func(in *Inputs) { in.Instances = []string{"fixture__nothing-1"} }), "fixture__nothing-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Load(ctx, tc.in)
			if l != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loaded %v, err %v; want nothing and an error saying %q", l != nil, err, tc.want)
			}
		})
	}
	// A file of no valid record loads nothing valid: the error says so.
	l, err := Load(ctx, with(func(in *Inputs) { in.Dataset = badDataset }))
	if err == nil || (l != nil && len(l.Instances) != 0) {
		t.Errorf("no valid record: %v, %v", l, err)
	}

	// Select narrows a dataset's input; an id not loaded is refused.
	fl := loadFixture(t)
	if err := fl.Select([]string{fixtureIDs[6], fixtureIDs[0]}); err != nil || len(fl.Instances) != 2 || fl.Instances[0].InstanceID != fixtureIDs[0] {
		t.Errorf("select: %v, %d instances", err, len(fl.Instances))
	}
	if err := fl.Select([]string{fixtureIDs[3]}); err == nil || !strings.Contains(err.Error(), fixtureIDs[3]) {
		t.Errorf("select of an id not loaded: %v", err)
	}
}

// TestWriteNetworkHint: the files no host answered for are listed (at
// most 20, then how many more), with how to do without the network;
// nothing when every download answered.
func TestWriteNetworkHint(t *testing.T) {
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close() // nothing answers there now
	cache := t.TempDir()
	client, err := fetch.New(fetch.Options{CacheDir: filepath.Join(cache, "http"), Budget: retry.Budget{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	l := &Loaded{Fetch: client}
	var w bytes.Buffer
	l.WriteNetworkHint(&w, "render", cache)
	(*Loaded)(nil).WriteNetworkHint(&w, "render", cache)
	(&Loaded{}).WriteNetworkHint(&w, "render", cache)
	if w.Len() != 0 {
		t.Fatalf("hint with nothing unreachable: %q", w.String())
	}
	var urls []string
	for i := range 23 {
		u := fmt.Sprintf("%s/org/repo/%02d/requirements.txt", url, i)
		urls = append(urls, u)
		if _, err := client.Get(context.Background(), u); err == nil {
			t.Fatalf("%s answered", u)
		}
	}
	l.WriteNetworkHint(&w, "render", cache)
	got := w.String()
	for _, want := range append(urls[:20:20],
		"swebuild render: 23 file(s) could not be downloaded",
		"  ... and 3 more\n",
		filepath.Join(cache, "http"),
		"--offline") {
		if !strings.Contains(got, want) {
			t.Errorf("hint lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, urls[20]) {
		t.Errorf("hint lists more than 20 URLs:\n%s", got)
	}
}

// TestPinCounts: `pins list --dataset` of Multimodal dev counts what
// docs/pins.md says (arm64-chrome-apt and arm64-pnpm-binary touch all 102
// on arm64 only, puppeteer-bundled-chromium makes 15 x86-only); a dataset
// with a bad record is counted over the rest, the record said on the log;
// a dataset that cannot be read names it.
func TestPinCounts(t *testing.T) {
	ctx := context.Background()
	shared := spectest.SharedDir(t)
	mm := filepath.Join(shared, "datasets", "SWE-bench_Multimodal", "dev.jsonl")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	mmData, err := os.ReadFile(mm)
	if err != nil {
		t.Fatal(err)
	}
	three := strings.SplitAfterN(string(mmData), "\n", 4)[:3] // the first 3 records
	if err := os.WriteFile(bad, []byte(strings.Join(three, "")+`{"instance_id": "x__y-1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := PinCounts(ctx, nil, Inputs{}); got != nil || err != nil {
		t.Errorf("no dataset: %v, %v", got, err)
	}
	var log bytes.Buffer
	counts, err := PinCounts(ctx, []string{mm, bad}, Inputs{CacheDir: t.TempDir(), Offline: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[0].Dataset != mm || counts[0].Instances != 102 || counts[1].Instances != 3 {
		t.Fatalf("counts %+v", counts)
	}
	rules := map[string]int{}
	for _, c := range counts[0].Touched {
		rules[c.Rule] = c.Instances
		if c.Rule == "arm64-chrome-apt" || c.Rule == "arm64-pnpm-binary" {
			if c.ByPlatform["linux/amd64"] != 0 || c.ByPlatform["linux/arm64"] != 102 {
				t.Errorf("%s by platform %v, want amd64 0, arm64 102", c.Rule, c.ByPlatform)
			}
		}
	}
	if rules["arm64-chrome-apt"] != 102 || rules["arm64-pnpm-binary"] != 102 || rules["puppeteer-bundled-chromium"] != 15 {
		t.Errorf("Multimodal dev: %v", rules)
	}
	if !strings.Contains(log.String(), bad+":4: ") {
		t.Errorf("the bad record is not said: %q", log.String())
	}
	absent := filepath.Join(t.TempDir(), "absent.jsonl")
	if _, err := PinCounts(ctx, []string{absent}, Inputs{}); err == nil || !strings.Contains(err.Error(), "--dataset "+absent) {
		t.Errorf("absent dataset: %v", err)
	}
}

// TestSizesInstances: sizes gets the input's ids, sorted, with their
// repos and versions, and the platform decision (the fixture's x86-only
// instance has no arm64 image); bad records are said and the rest
// measured.
func TestSizesInstances(t *testing.T) {
	ctx := context.Background()
	var cfg sizes.Config
	in := fixtureInputs(t)
	if err := SizesInstances(ctx, in, &cfg); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range cfg.Instances {
		ids = append(ids, i.ID)
		if i.Version != "1.0" || !strings.HasPrefix(i.Repo, "fixture/") {
			t.Errorf("%+v: want version 1.0 of a fixture repo", i)
		}
	}
	if !slices.Equal(ids, fixtureIDs) {
		t.Errorf("ids %v, want %v", ids, fixtureIDs)
	}
	for _, id := range fixtureIDs {
		want := []core.Platform{core.AMD64, core.ARM64}
		if id == fixtureX86Only {
			want = want[:1]
		}
		if got := cfg.Policy(id); !slices.Equal(got, want) {
			t.Errorf("policy(%s) = %v, want %v", id, got, want)
		}
	}

	// A bad record: said, the rest measured.
	data, err := os.ReadFile(in.Dataset)
	if err != nil {
		t.Fatal(err)
	}
	in.Dataset = filepath.Join(t.TempDir(), "d.jsonl")
	if err := os.WriteFile(in.Dataset, append([]byte(`{"instance_id": "x__y-1", "repo": "x/y"}`+"\n"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	in.Log = &log
	cfg = sizes.Config{}
	if err := SizesInstances(ctx, in, &cfg); err != nil || len(cfg.Instances) != 7 {
		t.Errorf("bad record: %v, %d instances", err, len(cfg.Instances))
	}
	if !strings.Contains(log.String(), "swebuild sizes: "+in.Dataset+": 1 invalid record(s)") {
		t.Errorf("log %q", log.String())
	}
	in.Dataset = filepath.Join(t.TempDir(), "absent.jsonl")
	if err := SizesInstances(ctx, in, &sizes.Config{}); err == nil {
		t.Error("absent dataset: no error")
	}
}

func planError(id string, p core.Platform) plan.InstanceError {
	return plan.InstanceError{InstanceID: id, Platform: p, Error: "no spec"}
}
