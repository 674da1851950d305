package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
)

// TestMatrixSkipsBySpecKeyAndRegistry: the nightly's matrix reuses a
// ledger image only when it was built from the inputs the build would use
// now (spec key) and lives in the repository the run publishes to. Two
// Verified instances, linux/amd64: a ledger written with the keys of
// --pins none is reused by a --pins none matrix, not by a default-pins one
// (conda-channels-tos changes every Python base Dockerfile, so every spec
// key); a record naming another registry is rebuilt.
func TestMatrixSkipsBySpecKeyAndRegistry(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	ids := []string{"astropy__astropy-12907", "django__django-11099"}
	const repo = "127.0.0.1:5000/swebench"
	dir := t.TempDir()
	opts := func(pins string) MatrixOptions {
		return MatrixOptions{
			Inputs:   Inputs{Dataset: ds, Instances: ids, Pins: pins, CacheDir: dir, Offline: true},
			Matrix:   ci.MatrixOptions{Platforms: []core.Platform{core.AMD64}, Shards: 2},
			Ledger:   filepath.Join(dir, "ledger.jsonl"),
			SkipRepo: repo,
		}
	}
	// What a build with --pins none records (the keys compared).
	o := opts("none")
	loaded, _, _, _, err := o.instances(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := o.graph(context.Background(), loaded, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := g.instanceKeys(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("spec keys %v", keys)
	}
	var ledger []core.Image
	var refs []string
	for i, id := range ids {
		d := digest.FromString(id)
		ref := repo + "/sweb.eval.x86_64." + id + "@" + d.String()
		if i == 1 {
			ref = "ghcr.io/elsewhere/sweb.eval.x86_64." + id + "@" + d.String()
		}
		refs = append(refs, ref)
		ledger = append(ledger, core.Image{Kind: core.KindInstance, InstanceID: id, Platform: core.AMD64, Digest: d, Ref: ref,
			SpecKey: keys[ci.Key{InstanceID: id, Platform: core.AMD64}], Verified: core.Bool(true), Status: core.StatusPublished})
	}
	if err := core.WriteFile(o.Ledger, ledger); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pins    string
		skipped int
	}{
		{"none", 1},    // the first; the second names another registry
		{"default", 0}, // spec keys changed
	} {
		o := opts(tc.pins)
		o.Checker = ci.NewMapChecker(refs...) // the registry holds every digest
		var log bytes.Buffer
		o.Log = &log
		m, _, err := Matrix(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Counts) != 1 || m.Counts[0].Skipped != tc.skipped || m.Counts[0].ToBuild != 2-tc.skipped {
			t.Errorf("--pins %s: counts %+v, want %d skipped", tc.pins, m.Counts, tc.skipped)
		}
		if strings.Contains(log.String(), "not compared") {
			t.Errorf("--pins %s: %s", tc.pins, log.String())
		}
	}
}

// TestMatrixEnvStage: with the env stage, the matrix plans each env image
// the instances to build need once per platform (three Verified instances,
// two of them django 3.0 sharing one env: two envs, one job, as all share
// the Python base), records which env each shard target starts from, and
// on the next night reuses an env the env ledger shows built from the same
// inputs and the registry holds: no env job, and instance images recorded
// as built FROM that env's digest are skipped, those recorded with the
// unbound key (a shard that built its env itself) are not.
func TestMatrixEnvStage(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	ids := []string{"astropy__astropy-12907", "django__django-11099", "django__django-11133"}
	const repo = "127.0.0.1:5000/swebench"
	amd := core.AMD64
	dir := t.TempDir()
	opts := func() MatrixOptions {
		return MatrixOptions{
			Inputs:    Inputs{Dataset: ds, Instances: ids, Pins: "default", CacheDir: dir, Offline: true},
			Matrix:    ci.MatrixOptions{Platforms: []core.Platform{amd}, Shards: 2},
			Ledger:    filepath.Join(dir, "ledger.jsonl"),
			SkipRepo:  repo,
			EnvStage:  true,
			EnvLedger: filepath.Join(dir, "envs.jsonl"),
			EnvShards: 4,
			PlanOut:   filepath.Join(dir, "plan.json"),
		}
	}
	ctx := context.Background()

	// Night one: nothing in any ledger.
	o := opts()
	o.Checker = ci.NewMapChecker()
	m, _, err := Matrix(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Include) != 2 || len(m.Envs.Include) != 1 {
		t.Fatalf("%d shards, %d env jobs; want 2 and 1", len(m.Include), len(m.Envs.Include))
	}
	job := m.Envs.Include[0]
	if job.Platform != amd || job.Count != 2 || job.Name != "envs-amd64-0" {
		t.Fatalf("env job %+v", job)
	}
	plan, err := ci.ReadPlan(o.PlanOut)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Envs) != 2 {
		t.Fatalf("plan envs %+v", plan.Envs)
	}
	envOf := map[string]string{}
	for _, in := range plan.Instances {
		for _, tg := range in.Targets {
			if tg.Action != ci.ActionBuild || tg.Env == "" {
				t.Fatalf("%s: target %+v", in.InstanceID, tg)
			}
			envOf[in.InstanceID] = tg.Env
		}
	}
	if envOf[ids[1]] != envOf[ids[2]] || envOf[ids[0]] == envOf[ids[1]] || !strings.HasPrefix(envOf[ids[0]], "sweb.env.py.x86_64.") {
		t.Errorf("envs of the instances: %v", envOf)
	}
	for _, e := range plan.Envs {
		if e.Action != ci.ActionBuild || e.Shard != job.Name || e.Base != "sweb.base.py.x86_64:latest" || !strings.HasPrefix(e.SpecKey, "sha256:") {
			t.Errorf("env target %+v", e)
		}
	}
	// The env job's records for those envs, as its build writes them.
	var envRecs []core.Image
	var refs []string
	for _, e := range plan.Envs {
		d := digest.FromString(e.Key)
		ref := repo + "/build-cache@" + d.String()
		refs = append(refs, ref)
		envRecs = append(envRecs, core.Image{Kind: core.KindEnv, Key: e.Key, Platform: core.AMD64, Digest: d, Ref: ref, SpecKey: e.SpecKey, Status: core.StatusBuilt})
	}
	for _, id := range ids {
		key, ref, err := plan.EnvBinding(envRecs, id, amd)
		if err != nil || key != envOf[id] || !strings.HasPrefix(ref, repo+"/build-cache@sha256:") {
			t.Errorf("EnvBinding(%s) = %q %q %v", id, key, ref, err)
		}
	}
	if err := core.WriteFile(o.EnvLedger, envRecs); err != nil {
		t.Fatal(err)
	}

	// What the shards record: astropy built FROM the env's digest (the
	// key SpecKeysBound predicts), django-11099 with the unbound key.
	g, err := o.graph(ctx, mustLoad(t, o), nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := ci.LatestEnvs(envRecs)
	boundKeys, err := g.instanceKeys(bound)
	if err != nil {
		t.Fatal(err)
	}
	unboundKeys, _ := g.instanceKeys(nil)
	var ledger []core.Image
	for i, id := range ids[:2] {
		k := ci.Key{InstanceID: id, Platform: amd}
		sk := boundKeys[k]
		if i == 1 {
			sk = unboundKeys[k]
		}
		if boundKeys[k] == unboundKeys[k] {
			t.Fatalf("%s: bound and unbound keys are equal", id)
		}
		d := digest.FromString("inst " + id)
		ref := repo + "/sweb.eval.x86_64." + id + "@" + d.String()
		refs = append(refs, ref)
		ledger = append(ledger, core.Image{Kind: core.KindInstance, InstanceID: id, Platform: core.AMD64, Digest: d, Ref: ref,
			SpecKey: sk, Verified: core.Bool(true), Status: core.StatusPublished})
	}
	if err := core.WriteFile(o.Ledger, ledger); err != nil {
		t.Fatal(err)
	}

	// Night two: both envs reused, astropy skipped, the djangos built.
	o = opts()
	o.Checker = ci.NewMapChecker(refs...)
	if m, _, err = Matrix(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(m.Envs.Include) != 0 || m.Counts[0].Skipped != 1 || m.Counts[0].ToBuild != 2 {
		t.Fatalf("night two: %d env jobs, counts %+v; want 0 jobs, 1 skipped", len(m.Envs.Include), m.Counts)
	}
	if plan, err = ci.ReadPlan(o.PlanOut); err != nil {
		t.Fatal(err)
	}
	if len(plan.Envs) != 1 || plan.Envs[0].Action != ci.ActionExisting || plan.Envs[0].Key != envOf[ids[1]] || plan.Envs[0].Ref == "" {
		t.Fatalf("night two envs %+v: want django's env reused", plan.Envs)
	}

	// Night three: the registry lost django's env: it is built again for
	// django-11133; astropy (FROM its env's digest, still held) and
	// django-11099 (recorded with the unbound key, which is now the key
	// again) are skipped.
	var kept []string
	for i, r := range refs {
		if i >= len(envRecs) || envRecs[i].Key != envOf[ids[1]] {
			kept = append(kept, r)
		}
	}
	o = opts()
	o.Checker = ci.NewMapChecker(kept...)
	if m, _, err = Matrix(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(m.Envs.Include) != 1 || m.Envs.Include[0].Keys != envOf[ids[1]] || m.Counts[0].Skipped != 2 {
		t.Fatalf("night three env jobs %+v, counts %+v: want django's env %s built, two skipped", m.Envs.Include, m.Counts, envOf[ids[1]])
	}
	// Forced: nothing reused, every env built.
	o = opts()
	o.Force = true
	if m, _, err = Matrix(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(m.Envs.Include) != 1 || m.Envs.Include[0].Count != 2 || len(m.Include) != 2 {
		t.Fatalf("forced: env jobs %+v, %d shards", m.Envs.Include, len(m.Include))
	}
}

func mustLoad(t *testing.T, o MatrixOptions) *Loaded {
	t.Helper()
	loaded, _, _, _, err := o.instances(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

// TestMatrixTaskRepo: ci matrix takes a task repo as build does: each task
// on the platforms its plan gives it (task.yaml's x86_only keeps one off
// linux/arm64), no env stage (flat Dockerfiles have no env image).
func TestMatrixTaskRepo(t *testing.T) {
	repo := fixtureTaskRepo(t)
	var log bytes.Buffer
	m, _, err := Matrix(context.Background(), MatrixOptions{
		Inputs:   Inputs{TaskRepo: repo, Pins: "default", CacheDir: t.TempDir()},
		Matrix:   ci.MatrixOptions{Platforms: core.AllPlatforms(), Shards: 2},
		EnvStage: true,
		Log:      &log,
	})
	if err != nil {
		t.Fatalf("Matrix: %v\n%s", err, log.String())
	}
	count := map[core.Platform]int{}
	for _, j := range m.Include {
		for _, id := range j.InstanceIDs() {
			count[j.Platform]++
			if id == fixtureX86Only && j.Platform == core.ARM64 {
				t.Errorf("fixture__textutil-2 (x86_only in task.yaml) in an arm64 job")
			}
		}
	}
	if count[core.AMD64] != 7 || count[core.ARM64] != 6 || len(m.Envs.Include) != 0 {
		t.Errorf("jobs per platform %v, env jobs %d; want 7 amd64, 6 arm64, no env stage\n%s", count, len(m.Envs.Include), log.String())
	}
}

// TestMatrixFailsClosedWithoutSpecKeys: the fixture's profiles ADD rootfs
// tarballs found through --context-dir. Without them the spec keys the
// build would record cannot be computed; a ledger recording every image
// verified and a registry holding every digest must then not make the
// matrix count anything "already in the registry": it stops, naming the
// missing file and what to do. With the context dir it skips them (the
// ledger's keys match); with --force it plans every image.
func TestMatrixFailsClosedWithoutSpecKeys(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	const repo = "127.0.0.1:5000/swebench"
	dir := t.TempDir()
	ctxDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(ctxDir, "mirror"), 0o755); err != nil { // the projects' git mirrors
		t.Fatal(err)
	}
	for _, f := range []string{"rootfs-amd64.tar", "rootfs-js-amd64.tar"} {
		// Stand-ins: the spec key hashes the file's bytes.
		if err := os.WriteFile(filepath.Join(ctxDir, f), []byte("rootfs stand-in "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := func(contextDirs ...string) MatrixOptions {
		return MatrixOptions{
			Inputs:      Inputs{Dataset: filepath.Join(root, "dataset.jsonl"), Specs: filepath.Join(root, "specs.json"), CacheDir: dir, Offline: true},
			Matrix:      ci.MatrixOptions{Platforms: []core.Platform{core.AMD64}, Shards: 2},
			Ledger:      filepath.Join(dir, "ledger.jsonl"),
			SkipRepo:    repo,
			ContextDirs: contextDirs,
		}
	}
	// The ledger of a night that built every image from these inputs.
	o := opts(ctxDir)
	g, err := o.graph(context.Background(), mustLoad(t, o), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := g.instanceKeys(nil)
	if err != nil || len(keys) == 0 {
		t.Fatalf("spec keys %v %v", keys, err)
	}
	var ledger []core.Image
	var refs []string
	for k, sk := range keys {
		d := digest.FromString(k.InstanceID)
		ref := repo + "/sweb.eval.x86_64." + k.InstanceID + "@" + d.String()
		refs = append(refs, ref)
		ledger = append(ledger, core.Image{Kind: core.KindInstance, InstanceID: k.InstanceID, Platform: core.AMD64, Digest: d, Ref: ref,
			SpecKey: sk, Verified: core.Bool(true), Status: core.StatusPublished})
	}
	if err := core.WriteFile(o.Ledger, ledger); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		o           MatrixOptions
		err         []string
		skipped     int
		wantToBuild int
	}{
		{"context dir missing", opts(), []string{"nothing counted as already in " + repo, "context file ", "not found", "--context-dir", "--force"}, 0, 0},
		{"context dir given", opts(ctxDir), nil, len(keys), 0},
		{"context dir missing, --force", func() MatrixOptions { o := opts(); o.Force = true; return o }(), nil, 0, len(keys)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Checker = ci.NewMapChecker(refs...) // the registry holds every digest
			var log bytes.Buffer
			tc.o.Log = &log
			m, _, err := Matrix(context.Background(), tc.o)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("the matrix went ahead: %+v\n%s", m.Counts, log.String())
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if strings.Contains(log.String(), "already in the registry") {
					t.Errorf("log counts images as in the registry:\n%s", log.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			if len(m.Counts) != 1 || m.Counts[0].Skipped != tc.skipped || m.Counts[0].ToBuild != tc.wantToBuild {
				t.Errorf("counts %+v, want %d skipped, %d to build", m.Counts, tc.skipped, tc.wantToBuild)
			}
		})
	}
}
