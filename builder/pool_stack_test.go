package builder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/bkdaemon"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pipeline"
)

// The tests in this file start their own BuildKit daemons (the stack's
// cached buildkitd, each with its own state directory and socket under
// /tmp) and a registry of their own, build the offline fixture across them,
// and read what each daemon did from its own cache records. They need what
// the stack needs (BUILDKIT_HOST and SWEBUILD_REGISTRY name it; QEMU binfmt
// for the arm64 daemon) and skip without it unless CI is set.

// envRun and repoRun are the descriptions BuildKit gives the cache record
// of the fixture's env and instance setup steps (`buildctl du -v`): one
// record per daemon that ran the step (a cache hit makes none).
const (
	envRun  = "exec /bin/sh -c /bin/bash /root/setup_env.sh"
	repoRun = "/bin/bash /root/setup_repo.sh"
)

// fixtureNodes plans the fixture for platforms (ids: all when empty).
func fixtureNodes(t *testing.T, platforms []core.Platform, ids ...string) []*graph.Node {
	t.Helper()
	stacktest.Require(t)
	ctx := context.Background()
	fx := stacktest.RequireBuildFixture(ctx, t)
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{
		Dataset: fx.Dataset, Instances: ids, Specs: fx.Specs, Pins: "default",
		CacheDir: t.TempDir(), Offline: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, platforms)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := pipeline.Nodes(p, loaded.Instances, fx.ContextDirs)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func count(nodes []*graph.Node, kind graph.Kind, p core.Platform) int {
	n := 0
	for _, x := range nodes {
		if x.Kind == kind && x.Platform == p {
			n++
		}
	}
	return n
}

func summary(t *testing.T, rep *builder.Report) string {
	var sb strings.Builder
	if err := rep.WriteSummary(&sb); err != nil {
		t.Error(err)
	}
	return sb.String()
}

// records counts cache records containing sub on each daemon.
func records(t *testing.T, sub string, ds ...*bkdaemon.Daemon) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, d := range ds {
		n, err := d.CountRecords(context.Background(), sub)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Name] = n
	}
	return out
}

// manifests lists the manifest digests a test registry stores for repo.
func manifests(t *testing.T, reg *regtest.Registry, repo string) []string {
	t.Helper()
	dir := filepath.Join(reg.Storage, "docker", "registry", "v2", "repositories", repo, "_manifests", "revisions", "sha256")
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, "sha256:"+e.Name())
	}
	return out
}

// TestPoolFixtureAcrossDaemons builds the fixture (both platforms) on three
// daemons: two for linux/amd64, one for linux/arm64 only (QEMU). Every env is
// solved on exactly one daemon (counted from the daemons' own cache records:
// the env's setup step ran once in the pool), every instance step once, the
// amd64 envs went to different daemons, and every image was pushed once.
func TestPoolFixtureAcrossDaemons(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, core.AllPlatforms())
	reg, a1, a2, r1 := threeDaemons(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}, {Platform: core.ARM64, Addr: r1.Addr}},
		Workers:  3, Push: reg.Host + "/pool/build", Progress: "quiet", RunDir: t.TempDir(),
	})
	wall := time.Since(start)
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("wall %.1fs\n%s", wall.Seconds(), summary(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	envs := records(t, envRun, a1, a2, r1)
	repos := records(t, repoRun, a1, a2, r1)
	t.Logf("env setup runs per daemon: %v; instance setup runs per daemon: %v", envs, repos)
	if got, want := envs["amd64-1"]+envs["amd64-2"], count(nodes, graph.KindEnv, core.AMD64); got != want {
		t.Errorf("amd64 env setup ran %d times over the pool, want %d (once per env)", got, want)
	}
	if envs["amd64-1"] == 0 || envs["amd64-2"] == 0 {
		t.Errorf("amd64 envs all on one daemon: %v", envs)
	}
	if got, want := envs["arm64-1"], count(nodes, graph.KindEnv, core.ARM64); got != want {
		t.Errorf("arm64 env setup ran %d times, want %d", got, want)
	}
	if got, want := repos["amd64-1"]+repos["amd64-2"]+repos["arm64-1"], count(nodes, graph.KindInstance, core.AMD64)+count(nodes, graph.KindInstance, core.ARM64); got != want {
		t.Errorf("instance setup ran %d times over the pool, want %d", got, want)
	}
	checkPushedOnce(t, rep, reg, "pool/build")
	byBuilder := map[string][]string{}
	for _, res := range rep.Results {
		byBuilder[res.Outcome.Builder] = append(byBuilder[res.Outcome.Builder], res.Node.ID())
	}
	for _, d := range []*bkdaemon.Daemon{a1, a2, r1} {
		t.Logf("%s ran %d nodes", d.Name, len(byBuilder[d.Addr]))
	}
}

func withPlatforms(o bkdaemon.Options, p ...core.Platform) bkdaemon.Options {
	o.Platforms = p
	return o
}

// threeDaemons starts a registry and three daemons that may push to it, two
// for linux/amd64 (amd64-1, amd64-2) and one for linux/arm64 only (arm64-1,
// QEMU), two solves at once each.
func threeDaemons(t *testing.T) (reg *regtest.Registry, a1, a2, r1 *bkdaemon.Daemon) {
	t.Helper()
	reg = regtest.Start(t, regtest.Options{})
	dopts := bkdaemon.Options{Registries: []string{reg.Host}, MaxParallelism: 2}
	a1 = bkdaemon.Start(t, "amd64-1", withPlatforms(dopts, core.AMD64))
	a2 = bkdaemon.Start(t, "amd64-2", withPlatforms(dopts, core.AMD64))
	r1 = bkdaemon.Start(t, "arm64-1", withPlatforms(dopts, core.ARM64))
	return reg, a1, a2, r1
}

// checkPushedOnce: every done node's digest is in the registry, and the
// registry holds no image manifest beyond them (nothing pushed twice under
// two digests, nothing half-built pushed). A push with provenance also
// stores the image's attestation manifest and the index holding both (the
// builder reads the image's digest back from it): those are allowed, one
// index per pushed image at most.
func checkPushedOnce(t *testing.T, rep *builder.Report, reg *regtest.Registry, repo string) {
	t.Helper()
	stored := manifests(t, reg, repo)
	want := map[string]bool{} // image manifests and their attestation manifests
	images := 0
	for _, res := range rep.Results {
		if res.Status == builder.StatusDone {
			images++
			want[res.Outcome.Digest] = true
			if res.Outcome.Attestation != "" {
				want[res.Outcome.Attestation] = true
			}
			if !slices.Contains(stored, res.Outcome.Digest) {
				t.Errorf("%s: %s not in the registry", res.Node.ID(), res.Outcome.Digest)
			}
		}
	}
	indexes := 0
	for _, d := range stored {
		if isIndex(t, reg, d) {
			indexes++
			continue
		}
		if !want[d] {
			t.Errorf("the registry holds manifest %s, which is no image (or attestation) the build made: pushed twice?", d)
		}
	}
	if indexes > images {
		t.Errorf("the registry holds %d indexes for %d pushed images", indexes, images)
	}
	t.Logf("registry: %d manifests (%d indexes) for %d images", len(stored), indexes, images)
}

// isIndex reads manifest d from the registry's storage and says whether it
// is an image index (OCI or Docker manifest list).
func isIndex(t *testing.T, reg *regtest.Registry, d string) bool {
	t.Helper()
	hex := strings.TrimPrefix(d, "sha256:")
	b, err := os.ReadFile(filepath.Join(reg.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest %s: %v", d, err)
	}
	return m.MediaType == "application/vnd.oci.image.index.v1+json" || m.MediaType == "application/vnd.docker.distribution.manifest.list.v2+json"
}

// busyBoth is how long two daemons each had a solve running at once.
func busyBoth(rep *builder.Report, a, b string) time.Duration {
	type iv struct{ s, e time.Time }
	spans := map[string][]iv{}
	for _, r := range rep.Results {
		if !r.Started.IsZero() {
			spans[r.Outcome.Builder] = append(spans[r.Outcome.Builder], iv{r.Started, r.Started.Add(r.Elapsed)})
		}
	}
	var both time.Duration
	// Sample every 100 ms: enough for a figure in a log.
	first, last := time.Time{}, time.Time{}
	for _, r := range rep.Results {
		if r.Started.IsZero() {
			continue
		}
		if first.IsZero() || r.Started.Before(first) {
			first = r.Started
		}
		if e := r.Started.Add(r.Elapsed); e.After(last) {
			last = e
		}
	}
	in := func(ivs []iv, t time.Time) bool {
		for _, v := range ivs {
			if !t.Before(v.s) && t.Before(v.e) {
				return true
			}
		}
		return false
	}
	for t := first; t.Before(last); t = t.Add(100 * time.Millisecond) {
		if in(spans[a], t) && in(spans[b], t) {
			both += 100 * time.Millisecond
		}
	}
	return both
}

// TestPoolWallTime builds the fixture's amd64 images cold on one fresh
// daemon, then cold on two fresh daemons, with the same two workers, and
// logs both wall times and how long both daemons were busy at once.
func TestPoolWallTime(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, []core.Platform{core.AMD64})
	dopts := bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, MaxParallelism: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	run := func(ds ...*bkdaemon.Daemon) (*builder.Report, time.Duration) {
		var specs []builder.BuilderSpec
		for _, d := range ds {
			specs = append(specs, builder.BuilderSpec{Platform: core.AMD64, Addr: d.Addr})
		}
		start := time.Now()
		rep, err := builder.Build(ctx, nodes, builder.Options{Builders: specs, Workers: 2, Progress: "quiet", RunDir: t.TempDir()})
		wall := time.Since(start)
		if rep == nil || err != nil {
			t.Fatalf("%d daemon(s): %v", len(ds), err)
		}
		t.Logf("%d daemon(s): wall %.1fs\n%s", len(ds), wall.Seconds(), summary(t, rep))
		for _, d := range ds {
			d.Stop()
		}
		return rep, wall
	}
	_, one := run(bkdaemon.Start(t, "solo", dopts))
	b1, b2 := bkdaemon.Start(t, "amd64-1", dopts), bkdaemon.Start(t, "amd64-2", dopts)
	rep, two := run(b1, b2)
	both := busyBoth(rep, b1.Addr, b2.Addr)
	t.Logf("fixture linux/amd64 (%d nodes), 2 workers, cold: one daemon %.1fs, two daemons %.1fs (%.2fx); both daemons busy at once for %.1fs",
		len(nodes), one.Seconds(), two.Seconds(), one.Seconds()/two.Seconds(), both.Seconds())
	if both == 0 {
		t.Errorf("the two daemons never ran solves at the same time")
	}
}

// TestPoolMutualTLS: a daemon on tcp:// with mutual TLS (a CA, server and
// client certificates made in Go). A client with no certificate, or with one
// from another CA, is refused; with the right one the fixture instance
// builds.
func TestPoolMutualTLS(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, []core.Platform{core.AMD64}, "fixture__calc-1")
	good, err := bkdaemon.MakeCerts(t.TempDir(), "buildkit-tls-test")
	if err != nil {
		t.Fatal(err)
	}
	other, err := bkdaemon.MakeCerts(t.TempDir(), "buildkit-tls-test")
	if err != nil {
		t.Fatal(err)
	}
	d := bkdaemon.Start(t, "tls", bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, TLS: good.Server(), MaxParallelism: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addr := func(c *bkdaemon.Certs, withClient bool) string {
		q := url.Values{"tlscacert": {good.CA}, "tlsservername": {"buildkit-tls-test"}}
		if withClient {
			q.Set("tlscert", c.ClientCert)
			q.Set("tlskey", c.ClientKey)
		}
		return "linux/amd64=" + d.Addr + "?" + q.Encode()
	}
	spec := func(v string) builder.BuilderSpec {
		sp, err := builder.ParseBuilder(v)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	// The daemon is up once the right client gets an answer.
	if err := d.WaitReady(ctx, 60*time.Second, spec(addr(good, true)).TLS.ClientOpts()...); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		v    string
	}{{"no client certificate", addr(good, false)}, {"a client certificate from another CA", addr(other, true)}} {
		rep, err := builder.Build(ctx, nodes, builder.Options{Builders: []builder.BuilderSpec{spec(c.v)}, Workers: 1, Progress: "quiet", RunDir: t.TempDir()})
		if err == nil || rep != nil {
			t.Errorf("%s: build not refused (err %v)", c.name, err)
			continue
		}
		t.Logf("%s: refused: %v", c.name, err)
	}
	rep, err := builder.Build(ctx, nodes, builder.Options{Builders: []builder.BuilderSpec{spec(addr(good, true))}, Workers: 2, Progress: "quiet", RunDir: t.TempDir()})
	if rep == nil || err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	t.Logf("with the client certificate:\n%s", summary(t, rep))
	for _, r := range rep.Results {
		if r.Status != builder.StatusDone || r.Outcome.Builder != d.Addr {
			t.Errorf("%s: %s on %q", r.Node.ID(), r.Status, r.Outcome.Builder)
		}
	}
}

// TestPoolKillDaemons kills (SIGKILL, the whole process group) one of two
// amd64 daemons while it runs an instance, and the only arm64 daemon while
// it runs an env. The amd64 daemon's queued and running nodes finish on the
// other one: every amd64 image is built and pushed once. Every arm64 node
// fails, naming the lost daemon.
func TestPoolKillDaemons(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, core.AllPlatforms())
	reg, a1, a2, r1 := threeDaemons(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	runDir := t.TempDir()
	downAfter := 10 * time.Second

	stop := onSolve(t, runDir,
		trigger{a1, "sweb.eval.", "killed", a1.Kill},
		trigger{r1, "sweb.env.", "killed", r1.Kill})
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}, {Platform: core.ARM64, Addr: r1.Addr}},
		Workers:  3, Push: reg.Host + "/pool/loss", Progress: "quiet", RunDir: runDir,
		Pool: builder.PoolOptions{DownAfter: downAfter, ProbeEvery: time.Second},
	})
	killed := stop()
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("build error: %v\n%s", err, summary(t, rep))
	if len(killed) != 2 {
		t.Fatalf("killed %v; the test needs both daemons killed mid-solve", killed)
	}
	retried := 0
	for _, r := range rep.Results {
		id := r.Node.ID()
		if r.Node.Platform == core.ARM64 {
			if r.Status == builder.StatusDone && r.Node.Kind != graph.KindBase {
				t.Errorf("%s done after the only arm64 daemon was killed", id)
			}
			if r.Status != builder.StatusDone && (r.Err == nil || !strings.Contains(r.Err.Error(), "no BuildKit node left for linux/arm64: arm64-1 ("+r1.Addr+") down")) {
				t.Errorf("%s: %s: %v; want it to say no node is left for linux/arm64, naming arm64-1", id, r.Status, r.Err)
			}
			continue
		}
		if r.Status != builder.StatusDone {
			t.Errorf("%s: %s %v", id, r.Status, r.Err)
		}
		if len(r.Lost) > 0 {
			retried++
			if r.Outcome.Builder != a2.Addr {
				t.Errorf("%s retried on %s", id, r.Outcome.Builder)
			}
		}
	}
	if retried == 0 {
		t.Error("no amd64 node was retried after amd64-1 was killed")
	}
	for _, st := range rep.Builders {
		want := builder.NodeDown
		if st.Name == "amd64-2" {
			want = builder.NodeUp
		}
		if st.State != want {
			t.Errorf("%s: %s, want %s", st.Name, st.State, want)
		}
	}
	checkPushedOnce(t, rep, reg, "pool/loss")
	var names []string
	for n, at := range killed {
		names = append(names, fmt.Sprintf("%s at %s", n, at.Format(time.TimeOnly)))
	}
	sort.Strings(names)
	t.Logf("killed: %s; %d amd64 nodes retried on amd64-2", strings.Join(names, ", "), retried)
}

// trigger is what onSolve does to a daemon: when a node log whose file name
// starts with prefix says the node's first attempt started on d, wait a
// second (mid-solve) and call do.
type trigger struct {
	d      *bkdaemon.Daemon
	prefix string
	what   string
	do     func()
}

// onSolve watches the node logs of a build (the scheduler writes "attempt
// 1 on NAME (ADDR)" before a solve starts) and fires each trigger once.
// The returned stop ends the watch and says when each fired.
func onSolve(t *testing.T, runDir string, triggers ...trigger) (stop func() map[string]time.Time) {
	var mu sync.Mutex
	fired := map[string]time.Time{}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
			logs, _ := filepath.Glob(filepath.Join(runDir, "logs", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				base := filepath.Base(l)
				for _, k := range triggers {
					mu.Lock()
					_, done := fired[k.d.Name]
					mu.Unlock()
					if done || !strings.HasPrefix(base, k.prefix) || !strings.Contains(string(b), "attempt 1 on "+k.d.Name+" ") {
						continue
					}
					time.Sleep(time.Second) // mid-solve
					k.do()
					mu.Lock()
					fired[k.d.Name] = time.Now()
					mu.Unlock()
					t.Logf("%s %s while it ran %s", k.what, k.d.Name, base)
				}
			}
		}
	}()
	return func() map[string]time.Time {
		close(quit)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return fired
	}
}

// TestPoolFrozenDaemon freezes (SIGSTOP) one of two amd64 daemons while it
// runs an env: it holds its connections and never answers, as a hung
// machine would. It is marked down after DownAfter, its solve is cancelled
// and started again on the other daemon, and every image is built.
func TestPoolFrozenDaemon(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, []core.Platform{core.AMD64}, "fixture__calc-1", "fixture__semver-1")
	dopts := bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, MaxParallelism: 2}
	a1 := bkdaemon.Start(t, "amd64-1", dopts)
	a2 := bkdaemon.Start(t, "amd64-2", dopts)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	runDir := t.TempDir()
	downAfter := 10 * time.Second
	stop := onSolve(t, runDir, trigger{a1, "sweb.env.", "froze", a1.Freeze})
	start := time.Now()
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}},
		Workers:  2, Progress: "quiet", RunDir: runDir,
		Pool: builder.PoolOptions{DownAfter: downAfter, ProbeEvery: time.Second},
	})
	wall := time.Since(start)
	froze := stop()
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("wall %.1fs, build error %v\n%s", wall.Seconds(), err, summary(t, rep))
	if len(froze) != 1 {
		t.Fatalf("amd64-1 never ran an env")
	}
	if err != nil {
		t.Errorf("build: %v", err)
	}
	retried := 0
	for _, r := range rep.Results {
		if r.Status != builder.StatusDone {
			t.Errorf("%s: %s %v", r.Node.ID(), r.Status, r.Err)
		}
		if len(r.Lost) > 0 {
			retried++
			if r.Outcome.Builder != a2.Addr || !strings.Contains(r.Lost[0], "amd64-1") {
				t.Errorf("%s: retried on %s after %v", r.Node.ID(), r.Outcome.Builder, r.Lost)
			}
		}
	}
	if retried == 0 {
		t.Error("nothing was retried after amd64-1 froze")
	}
	for _, st := range rep.Builders {
		if st.Name == "amd64-1" && (st.State != builder.NodeDown || !strings.Contains(st.Reason, "no answer for 10s")) {
			t.Errorf("amd64-1: %s %q", st.State, st.Reason)
		}
	}
	if since := time.Since(froze["amd64-1"]); since > wall {
		t.Errorf("froze at %s, after the build", froze["amd64-1"])
	}
}

// TestPoolFlatPrefix builds the fixture's flat (v5) Dockerfiles, one per
// task and no env image, on two amd64 daemons. The five Python tasks share
// their first steps (the rootfs, the venv) and the two JavaScript tasks
// theirs: each group lands on one daemon, so the shared steps run once in
// the pool (counted from the daemons' cache records).
func TestPoolFlatPrefix(t *testing.T) {
	stacktest.Thorough(t)
	stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	nodes := flatNodes(ctx, t)
	lang := map[string]string{} // node ID -> profile language
	for _, n := range nodes {
		lang[n.ID()] = "py"
		if strings.Contains(string(n.Dockerfile), "rootfs-js-") {
			lang[n.ID()] = "js"
		}
	}
	dopts := bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, MaxParallelism: 2}
	a1, a2 := bkdaemon.Start(t, "amd64-1", dopts), bkdaemon.Start(t, "amd64-2", dopts)
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}},
		Workers:  2, Progress: "quiet", RunDir: t.TempDir(),
	})
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("%s", summary(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]map[string]bool{} // language -> daemons
	for _, r := range rep.Results {
		l := lang[r.Node.ID()]
		if where[l] == nil {
			where[l] = map[string]bool{}
		}
		where[l][r.Outcome.Builder] = true
	}
	if len(where["py"]) != 1 || len(where["js"]) != 1 {
		t.Errorf("Python tasks ran on %v, JavaScript tasks on %v; want one daemon each", where["py"], where["js"])
	}
	// The venv step is in the Python prefix only; the rootfs ADD of each
	// flavour in its own.
	venv := records(t, `echo "source /opt/testbed/bin/activate" > /root/.bashrc`, a1, a2)
	t.Logf("shared Python prefix step ran per daemon: %v", venv)
	if venv["amd64-1"]+venv["amd64-2"] != 1 {
		t.Errorf("the shared Python prefix step ran %v times, want once in the pool", venv)
	}
}
