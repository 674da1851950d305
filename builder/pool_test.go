package builder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// poolSolver is a Solver for pool tests: it records the daemon each node
// ran on, fails with a lost connection on daemons listed dead, and hangs
// (until its context ends) on daemons listed hung.
type poolSolver struct {
	mu    sync.Mutex
	ran   map[string][]string // node ID -> daemon names, in order
	dead  map[string]bool     // daemon name -> connection refused
	hung  map[string]bool     // daemon name -> never answers
	done  map[string]bool
	delay time.Duration
	// onStart is called when a node starts (outside the lock).
	onStart func(node, daemon string)
}

func (f *poolSolver) Solve(ctx context.Context, job Job) (Outcome, error) {
	d := job.daemon
	f.mu.Lock()
	f.ran[job.Node.ID()] = append(f.ran[job.Node.ID()], d.name)
	for _, a := range job.Ancestors {
		if !f.done[a.ID()] {
			f.mu.Unlock()
			return Outcome{}, fmt.Errorf("%s started before its ancestor %s", job.Node.ID(), a.ID())
		}
	}
	dead, hung := f.dead[d.name], f.hung[d.name]
	f.mu.Unlock()
	if f.onStart != nil {
		f.onStart(job.Node.ID(), d.name)
	}
	if hung {
		<-ctx.Done()
		return Outcome{}, fmt.Errorf("node %s: %w", job.Node.ID(), context.Cause(ctx))
	}
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return Outcome{}, context.Cause(ctx)
	}
	f.mu.Lock()
	dead = dead || f.dead[d.name]
	f.mu.Unlock()
	if dead {
		return Outcome{}, fmt.Errorf("node %s: rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial unix /tmp/x.sock: connect: connection refused\"", job.Node.ID())
	}
	f.mu.Lock()
	f.done[job.Node.ID()] = true
	f.mu.Unlock()
	return Outcome{Builder: d.addr, Digest: "sha256:" + job.Node.Key}, nil
}

func (f *poolSolver) setDead(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[name] = true
}

// fakePool is a pool of daemons that need no BuildKit: spec is
// "PLATFORM=NAME" per daemon; the probe answers unless the solver lists the
// daemon dead or hung.
func fakePool(f *poolSolver, opts PoolOptions, specs ...string) *pool {
	var ds []*daemon
	for _, s := range specs {
		pl, name, _ := strings.Cut(s, "=")
		var p core.Platform // "=NAME": a daemon given for no platform
		if pl != "" {
			p = map[string]core.Platform{"linux/amd64": core.AMD64, "linux/arm64": core.ARM64}[pl]
		}
		ds = append(ds, &daemon{name: name, platform: p, state: NodeUp,
			remote: &remote{addr: "fake://" + name, native: p, platforms: []core.Platform{p}}})
	}
	pl := newPoolOf(ds, opts.withDefaults(2))
	pl.probe = func(ctx context.Context, d *daemon) error {
		f.mu.Lock()
		dead, hung := f.dead[d.name], f.hung[d.name]
		f.mu.Unlock()
		switch {
		case dead:
			return errors.New("connection refused")
		case hung:
			return context.DeadlineExceeded
		}
		return nil
	}
	return pl
}

func newPoolSolver() *poolSolver {
	return &poolSolver{ran: map[string][]string{}, dead: map[string]bool{}, hung: map[string]bool{}, done: map[string]bool{}, delay: 5 * time.Millisecond}
}

// wideGraph: per platform one base, three envs with three instances each.
func wideGraph(platforms ...core.Platform) []*graph.Node {
	var nodes []*graph.Node
	for _, p := range platforms {
		nodes = append(nodes, node("base", graph.KindBase, p))
		for _, e := range []string{"a", "b", "c"} {
			nodes = append(nodes, node("env."+e, graph.KindEnv, p, "base"))
			for k := 1; k <= 3; k++ {
				nodes = append(nodes, node(fmt.Sprintf("inst.%s%d", e, k), graph.KindInstance, p, "env."+e))
			}
		}
	}
	return nodes
}

func results(t *testing.T, res []Result) map[string]Result {
	t.Helper()
	out := map[string]Result{}
	for _, r := range res {
		out[r.Node.ID()] = r
	}
	return out
}

// TestPoolAffinity: two amd64 daemons, one arm64. Every env runs on exactly
// one daemon and each of its instances on that daemon; the envs of amd64 are
// spread over both amd64 daemons; nothing of arm64 runs on an amd64 daemon.
func TestPoolAffinity(t *testing.T) {
	f := newPoolSolver()
	p := fakePool(f, PoolOptions{}, "linux/amd64=amd64-1", "linux/amd64=amd64-2", "linux/arm64=arm64-1")
	nodes := wideGraph(core.AMD64, core.ARM64)
	s := &scheduler{nodes: nodes, solver: f, workers: 3, pool: p}
	res := results(t, s.run(context.Background()))
	used := map[string]bool{}
	for _, n := range nodes {
		r := res[n.ID()]
		if r.Status != StatusDone {
			t.Fatalf("%s: %s %v", n.ID(), r.Status, r.Err)
		}
		ran := f.ran[n.ID()]
		if len(ran) != 1 {
			t.Fatalf("%s ran on %v, want exactly one daemon", n.ID(), ran)
		}
		if !strings.HasPrefix(ran[0], n.Platform.Arch()) && !(n.Platform == core.AMD64 && strings.HasPrefix(ran[0], "amd64")) {
			t.Errorf("%s ran on %s", n.ID(), ran[0])
		}
		if n.Kind == graph.KindInstance {
			env := n.Parents[0] + "@" + n.Platform.String()
			if f.ran[env][0] != ran[0] {
				t.Errorf("%s ran on %s, its env %s on %s", n.ID(), ran[0], env, f.ran[env][0])
			}
		}
		if n.Kind == graph.KindEnv {
			used[ran[0]] = true
		}
	}
	if !used["amd64-1"] || !used["amd64-2"] {
		t.Errorf("envs ran on %v, want both amd64 daemons", used)
	}
	st := p.stats()
	total := 0
	for _, s := range st {
		total += s.Solves
	}
	if total != len(nodes) {
		t.Errorf("stats count %d solves, want %d: %+v", total, len(nodes), st)
	}
}

// TestPoolNodeLoss: an amd64 daemon whose connection is refused mid-build
// is marked down after DownAfter; its nodes (running and queued) finish on
// the other amd64 daemon. The only arm64 daemon hangs: it is marked down
// after DownAfter, its running solve is cancelled, and every arm64 node
// fails (or is skipped) naming it, while amd64 completes.
func TestPoolNodeLoss(t *testing.T) {
	f := newPoolSolver()
	f.hung["arm64-1"] = true
	var once sync.Once
	f.onStart = func(node, d string) {
		if d == "amd64-1" && strings.HasPrefix(node, "inst.") {
			once.Do(func() { f.setDead("amd64-1") })
		}
	}
	opts := PoolOptions{DownAfter: 300 * time.Millisecond, ProbeEvery: 50 * time.Millisecond}
	p := fakePool(f, opts, "linux/amd64=amd64-1", "linux/amd64=amd64-2", "linux/arm64=arm64-1")
	nodes := wideGraph(core.AMD64, core.ARM64)
	s := &scheduler{nodes: nodes, solver: f, workers: 3, pool: p}
	start := time.Now()
	res := results(t, s.run(context.Background()))
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("run took %s; a lost daemon must be given up after DownAfter (%s)", el, opts.DownAfter)
	}
	lostSeen := 0
	for _, n := range nodes {
		r := res[n.ID()]
		if n.Platform == core.ARM64 {
			if r.Status == StatusDone {
				t.Errorf("%s done on a hung daemon", n.ID())
			}
			if !strings.Contains(r.Err.Error(), "no BuildKit node left for linux/arm64") || !strings.Contains(r.Err.Error(), "arm64-1") {
				t.Errorf("%s: %s: %v; want the error to say no node is left for linux/arm64, naming arm64-1", n.ID(), r.Status, r.Err)
			}
			continue
		}
		if r.Status != StatusDone {
			t.Errorf("%s: %s %v", n.ID(), r.Status, r.Err)
			continue
		}
		ran := f.ran[n.ID()]
		if ran[len(ran)-1] != "amd64-2" && n.Kind == graph.KindInstance {
			// An instance whose env ran on amd64-1 must have moved.
			if env := f.ran[n.Parents[0]+"@"+n.Platform.String()]; env[len(env)-1] != ran[len(ran)-1] {
				t.Errorf("%s finished on %v, its env on %v", n.ID(), ran, env)
			}
		}
		if len(r.Lost) > 0 {
			lostSeen++
			if len(ran) != len(r.Lost)+1 || ran[len(ran)-1] != "amd64-2" {
				t.Errorf("%s: attempts %v, lost %v", n.ID(), ran, r.Lost)
			}
		}
	}
	if lostSeen == 0 {
		t.Errorf("no node was retried after amd64-1 went down: %v", f.ran)
	}
	st := map[string]BuilderStat{}
	for _, s := range p.stats() {
		st[s.Name] = s
	}
	if st["amd64-1"].State != NodeDown || st["arm64-1"].State != NodeDown || st["amd64-2"].State != NodeUp {
		t.Errorf("states: %+v", st)
	}
	if !strings.Contains(st["arm64-1"].Reason, "no answer for 300ms") {
		t.Errorf("arm64-1 down for %q", st["arm64-1"].Reason)
	}
	// What was built on amd64-1 before it went down is not built again
	// unless a child needs it there: every amd64 node has one done result.
	t.Logf("attempts: %v", f.ran)
}

// TestPoolRetriesBounded: every daemon dies when a solve starts on it; a
// node is tried 1 + Retries times, then fails naming every lost attempt,
// though a third daemon is still up.
func TestPoolRetriesBounded(t *testing.T) {
	f := newPoolSolver()
	f.onStart = func(_, d string) { f.setDead(d) }
	opts := PoolOptions{DownAfter: 100 * time.Millisecond, ProbeEvery: 20 * time.Millisecond, Retries: 1}
	p := fakePool(f, opts, "linux/amd64=a", "linux/amd64=b", "linux/amd64=c")
	nodes := []*graph.Node{node("base", graph.KindBase, core.AMD64)}
	s := &scheduler{nodes: nodes, solver: f, workers: 1, pool: p}
	res := s.run(context.Background())
	if got := f.ran["base@linux/amd64"]; len(got) != 2 {
		t.Errorf("tried on %v, want 2 attempts (1 + Retries)", got)
	}
	if res[0].Status != StatusFailed || !strings.Contains(res[0].Err.Error(), "BuildKit node lost 2 times") {
		t.Errorf("%s: %v", res[0].Status, res[0].Err)
	}
}

// TestPoolFailureIsNotLoss: a build error on a daemon that answers is a
// failure, not a node loss: no retry, the daemon stays up.
func TestPoolFailureIsNotLoss(t *testing.T) {
	p := fakePool(newPoolSolver(), PoolOptions{DownAfter: 50 * time.Millisecond, ProbeEvery: 10 * time.Millisecond}, "linux/amd64=a", "linux/amd64=b")
	fs := &fakeSolver{fail: map[string]bool{"env.a": true}, done: map[string]bool{}}
	s := &scheduler{nodes: fixtureGraph()[:4], solver: fs, workers: 2, pool: p}
	res := results(t, s.run(context.Background()))
	if r := res["env.a@linux/amd64"]; r.Status != StatusFailed || len(r.Lost) != 0 {
		t.Errorf("env.a: %s lost %v", r.Status, r.Lost)
	}
	for _, st := range p.stats() {
		if st.State != NodeUp {
			t.Errorf("%s: %s", st.Name, st.State)
		}
	}
}

func TestAffinityKeysFlat(t *testing.T) {
	flat := func(id, checkout string) *graph.Node {
		return &graph.Node{Key: "flat." + id, Kind: graph.KindInstance, InstanceID: id, Platform: core.AMD64, Dockerfile: []byte(
			"FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y git\nRUN git clone https://github.com/o/r /testbed\nWORKDIR /testbed\n" +
				"RUN git checkout " + checkout + "\nCOPY eval.sh /eval.sh\n")}
	}
	other := &graph.Node{Key: "flat.other", Kind: graph.KindInstance, InstanceID: "other", Platform: core.AMD64, Dockerfile: []byte(
		"FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y curl\n")}
	lone := &graph.Node{Key: "flat.lone", Kind: graph.KindInstance, InstanceID: "lone", Platform: core.AMD64, Dockerfile: []byte("FROM scratch\nARG X\n")}
	lone2 := &graph.Node{Key: "flat.lone2", Kind: graph.KindInstance, InstanceID: "lone2", Platform: core.AMD64, Dockerfile: []byte("FROM scratch\nARG X\nENV Y=1\n")}
	arm := flat("r-1", "aaa")
	arm.Key, arm.Platform = "flat.r-1.arm", core.ARM64
	nodes := []*graph.Node{flat("r-1", "aaa"), flat("r-2", "bbb"), flat("r-3", "ccc"), other, lone, lone2, arm}
	index := map[string]int{}
	for i, n := range nodes {
		index[n.ID()] = i
	}
	keys, _ := affinityKeys(nodes, index, nil)
	if keys[0] != keys[1] || keys[1] != keys[2] {
		t.Errorf("tasks sharing the clone have keys %v", keys[:3])
	}
	if keys[3] == keys[0] {
		t.Errorf("a task sharing only FROM ubuntu with them has their key")
	}
	if !strings.HasPrefix(keys[3], "node:") || !strings.HasPrefix(keys[4], "node:") || keys[4] == keys[5] {
		t.Errorf("roots sharing no RUN/COPY/ADD step must be their own groups: %v", keys[3:6])
	}
	if keys[6] == keys[0] || !strings.HasPrefix(keys[6], "node:") {
		t.Errorf("another platform's task shares a key: %q", keys[6])
	}
	// Two of the tasks differ at the checkout: the group is cut after
	// the clone, the last layer step they share.
	nodes[1].Dockerfile = []byte(strings.Replace(string(nodes[1].Dockerfile), "install -y git", "install -y git curl", 1))
	keys2, _ := affinityKeys(nodes, index, nil)
	if keys2[0] != keys2[2] || keys2[1] == keys2[0] {
		t.Errorf("after changing r-2's first RUN: keys %v", keys2[:3])
	}
}

func TestAffinityKeysLayered(t *testing.T) {
	nodes := wideGraph(core.AMD64)
	index := map[string]int{}
	for i, n := range nodes {
		index[n.ID()] = i
	}
	keys, parents := affinityKeys(nodes, index, nil)
	byID := map[string]string{}
	for i, n := range nodes {
		byID[n.Key] = keys[i]
		if n.Kind == graph.KindEnv && parents[i] != keys[0] {
			t.Errorf("%s: parent key %q, want the base's %q", n.Key, parents[i], keys[0])
		}
	}
	for _, e := range []string{"a", "b", "c"} {
		for k := 1; k <= 3; k++ {
			if byID[fmt.Sprintf("inst.%s%d", e, k)] != byID["env."+e] {
				t.Errorf("inst.%s%d not in env.%s's group", e, k, e)
			}
		}
	}
	if byID["env.a"] == byID["env.b"] || byID["env.a"] == byID["base"] {
		t.Errorf("keys %v", byID)
	}
}

func TestParseBuilderTLS(t *testing.T) {
	tests := []struct {
		in      string
		want    BuilderSpec
		wantErr string
	}{
		{in: "linux/arm64=tcp://arm-1:1234", want: BuilderSpec{Platform: core.ARM64, Addr: "tcp://arm-1:1234"}},
		{in: "linux/amd64=unix:///run/a.sock", want: BuilderSpec{Platform: core.AMD64, Addr: "unix:///run/a.sock"}},
		{in: "linux/arm64=tcp://arm-1:1234?tlscacert=/c/ca.pem&tlscert=/c/cert.pem&tlskey=/c/key.pem&tlsservername=arm-1",
			want: BuilderSpec{Platform: core.ARM64, Addr: "tcp://arm-1:1234", TLS: &TLS{CACert: "/c/ca.pem", Cert: "/c/cert.pem", Key: "/c/key.pem", ServerName: "arm-1"}}},
		{in: "tcp://h:1?tlscacert=/ca.pem", want: BuilderSpec{Addr: "tcp://h:1", TLS: &TLS{CACert: "/ca.pem"}}},
		{in: "ssh://me@arm-1", want: BuilderSpec{Addr: "ssh://me@arm-1"}},
		{in: "linux/amd64=docker-container://buildx_buildkit_default", want: BuilderSpec{Platform: core.AMD64, Addr: "docker-container://buildx_buildkit_default"}},
		{in: "linux/arm64=kube-pod://buildkitd-0?namespace=ci", want: BuilderSpec{Platform: core.ARM64, Addr: "kube-pod://buildkitd-0?namespace=ci"}},
		{in: "tcp://h:1?tlscert=/c.pem", wantErr: "tlscert and tlskey go together"},
		{in: "tcp://h:1?tlsca=/c.pem", wantErr: "unknown query parameter tlsca"},
		{in: "linux/s390x=tcp://h:1", wantErr: "not supported"},
		{in: "linux/amd64=", wantErr: "empty address"},
	}
	for _, tt := range tests {
		got, err := ParseBuilder(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseBuilder(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseBuilder(%q): %v", tt.in, err)
			continue
		}
		if got.Platform != tt.want.Platform || got.Addr != tt.want.Addr || (got.TLS == nil) != (tt.want.TLS == nil) || (got.TLS != nil && *got.TLS != *tt.want.TLS) {
			t.Errorf("ParseBuilder(%q) = %+v (tls %+v), want %+v (tls %+v)", tt.in, got, got.TLS, tt.want, tt.want.TLS)
		}
	}
}

func TestParsePoolFile(t *testing.T) {
	specs, err := parsePool("pool.txt", strings.NewReader("# the nightly pool\nlinux/amd64=unix:///run/a.sock\n\n  linux/amd64=tcp://amd-2:1234  \nlinux/arm64=ssh://arm-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[1].Addr != "tcp://amd-2:1234" || specs[2].Platform != core.ARM64 {
		t.Errorf("specs %+v", specs)
	}
	_, err = parsePool("pool.txt", strings.NewReader("linux/amd64=unix:///a\nlinux/mips=tcp://x:1\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "pool.txt:2: builder \"linux/mips=tcp://x:1\"") {
		t.Errorf("error %v, want pool.txt:2 naming the line", err)
	}
	if _, err := parsePool("empty.txt", strings.NewReader("# nothing\n")); err == nil || !strings.Contains(err.Error(), "empty.txt: no builder") {
		t.Errorf("error %v", err)
	}
}

// TestPoolNoBuilderForPlatform: a daemon given without a platform serves
// only the platforms its workers run; a node of another platform fails
// naming what the workers run.
func TestPoolNoBuilderForPlatform(t *testing.T) {
	f := newPoolSolver()
	d := &daemon{name: "builder-1", state: NodeUp, remote: &remote{addr: "fake://b", native: core.AMD64, platforms: []core.Platform{core.AMD64}, workers: []string{"linux/amd64", "linux/amd64/v2"}}}
	p := newPoolOf([]*daemon{d}, PoolOptions{}.withDefaults(1))
	s := &scheduler{nodes: []*graph.Node{node("base", graph.KindBase, core.AMD64), node("base", graph.KindBase, core.ARM64)}, solver: f, workers: 1, pool: p}
	res := results(t, s.run(context.Background()))
	if r := res["base@linux/amd64"]; r.Status != StatusDone {
		t.Errorf("amd64: %s %v", r.Status, r.Err)
	}
	want := "no builder for linux/arm64 (fake://b's workers run linux/amd64,linux/amd64/v2; is binfmt/QEMU set up?)"
	if r := res["base@linux/arm64"]; r.Status != StatusFailed || !strings.Contains(r.Err.Error(), want) {
		t.Errorf("arm64: %s %v; want %q", r.Status, r.Err, want)
	}
}
