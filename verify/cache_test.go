package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
)

func TestCacheKeyInputs(t *testing.T) {
	base := CacheKeyInputs{
		Definition: "sha256:aa", ContextFiles: "ff", InstanceID: "o__r-1", Platform: core.ARM64,
		Patch: "diff --git a/x b/x\n", EvalScript: "#!/bin/bash\npytest\n", Parser: "parse_log_pytest",
		Timeout: 30 * time.Minute, Mode: ModeGold,
	}
	if base.Key() != base.Key() {
		t.Fatal("same inputs, different keys")
	}
	copied := base
	if copied.Key() != base.Key() {
		t.Fatal("copied inputs, different keys")
	}
	tests := []struct {
		name string
		edit func(*CacheKeyInputs)
	}{
		{"definition", func(in *CacheKeyInputs) { in.Definition = "sha256:ab" }},
		{"context files", func(in *CacheKeyInputs) { in.ContextFiles = "" }},
		{"instance", func(in *CacheKeyInputs) { in.InstanceID = "o__r-2" }},
		{"platform", func(in *CacheKeyInputs) { in.Platform = core.AMD64 }},
		{"patch", func(in *CacheKeyInputs) { in.Patch += " " }},
		{"eval.sh", func(in *CacheKeyInputs) { in.EvalScript = "#!/bin/bash\npytest -x\n" }},
		{"parser", func(in *CacheKeyInputs) { in.Parser = "parse_log_django" }},
		{"timeout", func(in *CacheKeyInputs) { in.Timeout = 30*time.Minute + time.Second }},
		{"mode", func(in *CacheKeyInputs) { in.Mode = ModeControl }},
		// Field boundaries: moving bytes from one field to the next must
		// not give the same encoding.
		{"boundary", func(in *CacheKeyInputs) { in.Patch, in.EvalScript = in.Patch+"#", in.EvalScript[1:] }},
	}
	seen := map[string]string{base.Key(): "base"}
	for _, tc := range tests {
		in := base
		tc.edit(&in)
		k := in.Key()
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key equals the key of %s", tc.name, prev)
		}
		seen[k] = tc.name
		if len(k) != 64 {
			t.Errorf("%s: key %q is not a hex sha256", tc.name, k)
		}
	}
}

func TestDefinitionDigest(t *testing.T) {
	ctx := context.Background()
	img := func(content string) llb.State {
		return llb.Image("docker.io/library/debian@sha256:0000000000000000000000000000000000000000000000000000000000000001").
			File(llb.Mkfile("/f", 0o644, []byte(content)))
	}
	a1, l1, err := definitionDigest(ctx, img("a"), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	a2, _, err := definitionDigest(ctx, img("a"), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 || l1 {
		t.Errorf("same state: digests %s, %s (local %t)", a1, a2, l1)
	}
	// A custom name is progress metadata, not a build step.
	named, _, err := definitionDigest(ctx, img("a").File(llb.Mkdir("/d", 0o755), llb.WithCustomName("x")), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	named2, _, err := definitionDigest(ctx, img("a").File(llb.Mkdir("/d", 0o755), llb.WithCustomName("y")), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if named != named2 {
		t.Errorf("custom name changed the digest")
	}
	b, _, err := definitionDigest(ctx, img("b"), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	arm, _, err := definitionDigest(ctx, img("a"), core.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"other content": b, "other platform": arm, "extra step": named} {
		if d == a1 {
			t.Errorf("%s: same digest %s", name, d)
		}
	}
	_, local, err := definitionDigest(ctx, img("a").File(llb.Copy(llb.Local("ctx"), "/x", "/x")), core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if !local {
		t.Error("a definition with llb.Local: local source not detected")
	}
	// llb.Local's random per-client id is not a build input; the include
	// patterns are.
	withLocal := func(unique string, patterns ...string) string {
		t.Helper()
		src := llb.Local("ctx", llb.LocalUniqueID(unique), llb.IncludePatterns(patterns))
		d, _, err := definitionDigest(ctx, img("a").File(llb.Copy(src, "/x", "/x")).File(llb.Mkdir("/y", 0o755)), core.AMD64)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if withLocal("u1", "x") != withLocal("u2", "x") {
		t.Error("local.unique changed the digest")
	}
	if withLocal("u1", "x") == withLocal("u1", "x", "z") {
		t.Error("other include patterns, same digest")
	}
	if _, _, err := definitionDigest(ctx, img("a"), core.Platform{}); err == nil {
		t.Error("no platform: no error")
	}
}

func TestCacheStoreLoad(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "verify")}
	key := strings.Repeat("ab", 32)
	if rec, err := c.Load(key); rec != nil || err != nil {
		t.Fatalf("empty cache: %v, %v", rec, err)
	}
	want := &CacheRecord{Key: key, InstanceID: "o__r-1", Platform: core.AMD64, Mode: ModeGold, Resolved: true,
		F2P: Counts{1, 1}, P2P: Counts{3, 3}, Dir: "/runs/x", Report: json.RawMessage(`{"o__r-1":{"resolved":true}}`),
		Verified: time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)}
	if err := c.Store(want); err != nil {
		t.Fatal(err)
	}
	got, err := c.Load(key)
	if err != nil || got == nil {
		t.Fatalf("load after store: %v, %v", got, err)
	}
	if got.InstanceID != want.InstanceID || got.F2P != want.F2P || got.P2P != want.P2P || !got.Verified.Equal(want.Verified) || !jsonEqual(got.Report, want.Report) {
		t.Errorf("load: got %+v, want %+v", got, want)
	}
	ents, err := os.ReadDir(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != key+".json" {
		t.Errorf("cache dir holds %v, want only %s.json", ents, key)
	}
	if err := c.Store(&CacheRecord{}); err == nil {
		t.Error("record without key: no error")
	}

	for _, tc := range []struct{ name, content string }{
		{"truncated", `{"key": "` + key},
		{"not json", "\x00\x01garbage"},
		{"empty", ""},
		{"other key", `{"key": "cd", "resolved": true}`},
		{"unresolved", `{"key": "` + key + `", "resolved": false}`},
	} {
		if err := os.WriteFile(filepath.Join(c.Dir, key+".json"), []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := c.Load(key)
		if rec != nil || err == nil {
			t.Errorf("%s: got %v, %v; want a miss with a reason", tc.name, rec, err)
		}
	}
}

// fakeEngine counts runs and answers with the tests passing or not.
type fakeEngine struct {
	mu   sync.Mutex
	runs int
	pass bool
}

func (f *fakeEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	f.mu.Lock()
	f.runs++
	f.mu.Unlock()
	status := "FAILED"
	if f.pass {
		status = "PASSED"
	}
	return &RunOutput{
		Applied: true, TestRan: true, TestSeconds: 1,
		TestOutput: grading.StartTestOutput + "\n" + status + " tests/test_a.py::test_fix\nPASSED tests/test_a.py::test_old\n" + grading.EndTestOutput + "\n",
		Leak:       LeakDump{BaseTime: "100", Head: "abc tree1\n", Base: "abc tree1\n"},
	}, nil
}

func (f *fakeEngine) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

func TestBuilderHookCache(t *testing.T) {
	ctx := context.Background()
	inst := core.Instance{Repo: "o/r", InstanceID: "o__r-1", BaseCommit: "abc", Patch: "diff --git a/x b/x\n",
		FailToPass: []string{"tests/test_a.py::test_fix"}, PassToPass: []string{"tests/test_a.py::test_old"}}
	target := Target{Instance: inst, Platform: core.AMD64, EvalScript: "#!/bin/bash\npytest\n", Parser: "parse_log_pytest"}
	img := func(content string) llb.State {
		return llb.Image("docker.io/library/debian@sha256:0000000000000000000000000000000000000000000000000000000000000001").
			File(llb.Mkfile("/f", 0o644, []byte(content)))
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	// hook runs one build's verification of images and returns its summary
	// and the number of engine runs.
	hook := func(pass, reverify bool, images ...llb.State) (*Summary, int, []error) {
		eng := &fakeEngine{pass: pass}
		r := &Runner{RunDir: t.TempDir(), Cache: &Cache{Dir: cacheDir}, Reverify: reverify,
			hookEngine: func(gateway.Client, llb.State) Engine { return eng }}
		sum := &Summary{}
		h := r.BuilderHook([]Target{target}, sum)
		var errs []error
		for _, im := range images {
			errs = append(errs, h(ctx, nil, inst.InstanceID, target.Platform, im))
		}
		return sum, eng.count(), errs
	}

	// A failure is not cached: the next build runs again.
	_, runs, errs := hook(false, false, img("a"))
	if runs != 1 || errs[0] == nil {
		t.Fatalf("failing run: %d runs, err %v", runs, errs[0])
	}
	sum, runs, errs := hook(true, false, img("a"))
	if runs != 1 || errs[0] != nil || sum.Results[0].Cached {
		t.Fatalf("after a failure: %d runs, err %v, cached %t; want the check to run", runs, errs[0], sum.Results[0].Cached)
	}

	// Now a success is cached: same definition, no run, a cached result.
	sum, runs, errs = hook(false, false, img("a"))
	if runs != 0 || errs[0] != nil {
		t.Fatalf("same image again: %d runs, err %v; want a cache hit", runs, errs[0])
	}
	res := sum.Results[0]
	if !res.Cached || !res.OK() || !res.Resolved || res.F2P != (Counts{1, 1}) || res.P2P != (Counts{1, 1}) || res.CacheKey == "" {
		t.Errorf("cached result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "report.json")); err != nil {
		t.Errorf("cached result: no report.json in %s: %v", res.Dir, err)
	}
	var table, js bytes.Buffer
	if err := sum.WriteTable(&table, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "ok (cached)") {
		t.Errorf("table lacks ok (cached):\n%s", table.String())
	}
	if err := sum.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"cached": true`) {
		t.Errorf("JSON lacks \"cached\": true:\n%s", js.String())
	}

	// --reverify, another image definition, another timeout: runs.
	if _, runs, _ := hook(true, true, img("a")); runs != 1 {
		t.Errorf("reverify: %d runs, want 1", runs)
	}
	if _, runs, _ := hook(true, false, img("b")); runs != 1 {
		t.Errorf("other image: %d runs, want 1", runs)
	}
	// An image reading local files the builder did not fingerprint is
	// never cached.
	local := img("a").File(llb.Copy(llb.Local("ctx"), "/x", "/x"))
	if _, runs, _ := hook(true, false, local, local); runs != 2 {
		t.Errorf("unfingerprinted local source: %d runs, want 2", runs)
	}
	// A corrupt record is a miss, not a crash.
	ents, err := filepath.Glob(filepath.Join(cacheDir, "*.json"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no cache records: %v", err)
	}
	for _, e := range ents {
		if err := os.WriteFile(e, []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, runs, errs := hook(true, false, img("a")); runs != 1 || errs[0] != nil {
		t.Errorf("corrupt record: %d runs, err %v; want a run", runs, errs[0])
	}
}

func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && ca.String() == cb.String()
}
