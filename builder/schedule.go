package builder

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/builder/graph"
)

// Status of a node after a build.
const (
	StatusDone    = "done"
	StatusFailed  = "failed"
	StatusSkipped = "skipped" // a dependency failed; never started
)

// Job is one node handed to a Solver, with the ancestors it builds FROM in
// dependency order (every ancestor comes after its own parents).
type Job struct {
	Node      *graph.Node
	Ancestors []*graph.Node
	// Log receives the node's build log (already open; the solver must not
	// close it).
	Log io.Writer
	// daemon is the pool's daemon the scheduler placed the node on; nil
	// without a pool.
	daemon *daemon
	// lost are the earlier attempts of the node whose daemon was lost.
	lost []string
	// cacheGroup is the flat prefix group of a root instance ("" for
	// others); cacheLead: this node exports the group's registry cache
	// (cache.go).
	cacheGroup string
	cacheLead  bool
}

// Outcome is what a Solver reports for a node it built.
type Outcome struct {
	Builder string // builder address
	Native  bool   // the builder runs the node's platform natively
	Cached  bool   // every build step was a cache hit
	// Steps are the Dockerfile steps that completed (the chain's, counted
	// once), CachedSteps those of them that were cache hits.
	Steps, CachedSteps int
	Digest             string // image manifest digest, when exported
	Ref                string // pushed reference (name@digest), when pushed
	// OCILayout is the OCI layout directory the image was exported into.
	OCILayout string
	// Attestation is the digest of the image's attestation manifest
	// (provenance), pushed beside it, when there is one.
	Attestation     string
	AttestationSize int64
	// Verified is true when Options.Verify passed the image; nil when it
	// was not verified.
	Verified *bool
	// SBOM is the image's resolved environment, CycloneDX JSON (sbom.go),
	// when its node has an Inventory; SBOMFile where it was written.
	// SBOMArtifact and SBOMArtifactSize name the OCI artifact carrying it,
	// attached to the pushed image. SBOMError says why there is none (the
	// image is exported all the same); SBOMSeconds is the capture's time.
	SBOM             []byte
	SBOMFile         string
	SBOMArtifact     string
	SBOMArtifactSize int64
	SBOMError        string
	SBOMSeconds      float64
	// Verification and VerificationSize name the OCI artifact carrying
	// the image's verification statement (statement.go), when attached.
	Verification     string
	VerificationSize int64
	// manifest is the pushed image manifest's descriptor, when
	// resolveAttested read it from the exported index.
	manifest *v1.Descriptor
}

// Solver builds one node; the scheduler calls it at most workers times at once.
type Solver interface {
	Solve(ctx context.Context, job Job) (Outcome, error)
}

// Result is the outcome of one node of a build.
type Result struct {
	Node    *graph.Node
	Status  string // done, failed or skipped
	Err     error  // why it failed or was skipped
	Outcome Outcome
	Started time.Time
	Elapsed time.Duration
	LogPath string
	// Lost lists the earlier attempts cut off because their BuildKit node
	// was lost (node loss), each naming the node; the node was then
	// started again on another node of its platform.
	Lost []string
}

// scheduler runs Solver calls over the node graph.
type scheduler struct {
	nodes []*graph.Node
	// given are images bound to parent keys (Options.Images): a parent
	// that is given is not waited for.
	given   map[string]string
	solver  Solver
	workers int
	// openLog opens the log for a node; nil means io.Discard. The returned
	// path is recorded in the Result.
	openLog func(n *graph.Node) (io.WriteCloser, string, error)
	// now returns the time; tests use the real clock too.
	now func() time.Time
	// pool places nodes on BuildKit daemons and watches their health; nil:
	// the solver picks (tests).
	pool *pool
}

// run builds every node once all its parents are done, up to s.workers at a
// time, each on the daemon of the pool its affinity group is bound to. A node
// whose parent failed (or is missing, or is in a cycle) is skipped with the
// cause; the others go on. A node whose daemon was lost is started again on
// another daemon of its platform, at most the pool's Retries times. Results
// come back in the order of s.nodes.
func (s *scheduler) run(ctx context.Context) []Result {
	g := newGraph(s.nodes, s.given)
	keys, parentKeys := affinityKeys(s.nodes, g.index, s.given)
	st := &runState{s: s, g: g, doneCh: make(chan doneRun), keys: keys, parentKeys: parentKeys,
		lead: map[string]int{}, lost: map[int][]string{}}
	workers := max(s.workers, 1)
	if s.pool != nil {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		s.pool.watch(wctx)
	}
	var waiting []int // ready, not started
	for {
		for {
			i, ok := g.next()
			if !ok {
				break
			}
			waiting = append(waiting, i)
		}
		waiting = st.startWaiting(ctx, waiting, workers)
		if st.running == 0 {
			if len(waiting) == 0 || ctx.Err() != nil {
				break
			}
			continue // nodes failed at placement may have made others ready
		}
		if i, retry := st.finishOne(ctx); retry {
			waiting = append(waiting, i)
		}
	}
	g.neverReady(ctx)
	return g.results
}

// runState is one run of the scheduler: the graph, the affinity keys of
// each node, the node that exports each prefix group's cache, the daemons
// each node was lost with, and how many solves are running.
type runState struct {
	s                *scheduler
	g                *depGraph
	doneCh           chan doneRun
	keys, parentKeys []string
	lead             map[string]int
	lost             map[int][]string
	running          int
}

// doneRun is a finished solve of node i: its result, the daemon it ran on
// (nil without a pool), and whether that daemon was lost during it.
type doneRun struct {
	i    int
	res  Result
	d    *daemon
	lost bool
}

// startWaiting starts the waiting nodes while fewer than workers run, and
// gives back those still waiting (not started, or their daemon busy).
func (st *runState) startWaiting(ctx context.Context, waiting []int, workers int) []int {
	kept := waiting[:0]
	for k, i := range waiting {
		if st.running >= workers || ctx.Err() != nil {
			kept = append(kept, waiting[k:]...)
			break
		}
		if !st.start(ctx, i) {
			kept = append(kept, i) // its daemon is busy
		}
	}
	return kept
}

// start starts the solve of node i on the daemon the pool places it on;
// false when that daemon is busy. A node the pool cannot place is finished
// as failed.
func (st *runState) start(ctx context.Context, i int) bool {
	s, lost := st.s, st.lost
	job := Job{Node: s.nodes[i], Ancestors: ancestors(s.nodes, st.g.index, i), lost: lost[i]}
	if k := st.keys[i]; strings.HasPrefix(k, "prefix:") && s.nodes[i].Kind == graph.KindInstance {
		if _, ok := st.lead[k]; !ok {
			st.lead[k] = i
		}
		job.cacheGroup, job.cacheLead = k, st.lead[k] == i
	}
	jctx, cancel := ctx, context.CancelCauseFunc(func(error) {})
	if s.pool != nil {
		d, err := s.pool.place(job.Node, st.keys[i], st.parentKeys[i])
		if err != nil {
			res := Result{Node: job.Node, Status: StatusFailed, Err: err, Lost: lost[i]}
			if len(lost[i]) > 0 {
				res.Err = fmt.Errorf("%w (%d earlier attempt(s) lost with their node; see the node's log)", err, len(lost[i]))
			}
			st.g.finish(i, res)
			return true
		}
		if d == nil {
			return false
		}
		job.daemon = d
		d.running++
		d.solves++
		jctx, cancel = context.WithCancelCause(ctx)
		d.track(i, cancel)
	}
	st.running++
	go func() {
		res := s.runOne(jctx, job)
		d, isLost := job.daemon, false
		if d != nil {
			d.untrack(i)
			isLost = res.Status == StatusFailed && s.pool.confirm(ctx, d, res.Err)
		}
		cancel(nil)
		st.doneCh <- doneRun{i, res, d, isLost}
	}()
	return true
}

// finishOne waits for a solve to end and finishes its node, unless its
// daemon was lost and it may be retried: then retry is true and i is the
// node to start again.
func (st *runState) finishOne(ctx context.Context) (i int, retry bool) {
	d := <-st.doneCh
	st.running--
	if d.d != nil {
		d.d.running--
	}
	if d.lost {
		d.d.lost++
		st.lost[d.i] = append(st.lost[d.i], fmt.Sprintf("%s: %v", d.d.name, d.res.Err))
		if len(st.lost[d.i]) <= st.s.pool.opts.Retries && ctx.Err() == nil {
			return d.i, true
		}
		d.res.Err = fmt.Errorf("%w (BuildKit node lost %d times: %s)", d.res.Err, len(st.lost[d.i]), strings.Join(st.lost[d.i], "; "))
	}
	d.res.Lost = st.lost[d.i]
	st.g.finish(d.i, d.res)
	return d.i, false
}

// depGraph is the scheduler's view of the nodes: which are finished, how many
// unfinished parents each waits on, and which are ready to start.
type depGraph struct {
	nodes    []*graph.Node
	index    map[string]int // node id -> position in nodes
	results  []Result       // in the order of nodes; Status "" until finished
	pending  []int          // unfinished parents of each node
	children [][]int        // nodes waiting on each node
	finished []bool
	ready    []int
}

// newGraph indexes the nodes, fails those listed twice, claiming another
// instance's image, invalid, or naming a parent that is neither in the
// graph nor given, skips their descendants, and queues the nodes with no
// parent to wait for.
func newGraph(nodes []*graph.Node, given map[string]string) *depGraph {
	n := len(nodes)
	g := &depGraph{
		nodes: nodes, index: make(map[string]int, n), results: make([]Result, n),
		pending: make([]int, n), children: make([][]int, n), finished: make([]bool, n),
	}
	for i, node := range nodes {
		g.results[i].Node = node
		if j, dup := g.index[node.ID()]; dup {
			if node.Kind == graph.KindInstance && nodes[j].Kind == graph.KindInstance && node.InstanceID != nodes[j].InstanceID {
				continue // two instances, one image: instanceClaims fails both
			}
			g.fail(i, fmt.Errorf("node %s: listed twice", node.ID()))
			continue
		}
		g.index[node.ID()] = i
	}
	for i, err := range instanceClaims(nodes, g.results) {
		g.fail(i, err)
	}
	for i, node := range nodes {
		if g.finished[i] {
			continue
		}
		if err := validateNode(node); err != nil {
			g.fail(i, err)
			continue
		}
		for _, pk := range node.Parents {
			if _, ok := givenRef(given, pk); ok {
				continue
			}
			j, ok := g.index[pk+"@"+node.Platform.String()]
			if !ok {
				g.fail(i, fmt.Errorf("node %s: parent %s is not in the build graph for %s", node.ID(), pk, node.Platform))
				break
			}
			g.children[j] = append(g.children[j], i)
			g.pending[i]++
		}
	}
	for i := range nodes {
		if g.results[i].Status == StatusFailed {
			g.skip(i, nodes[i].ID(), g.results[i].Err)
		}
	}
	for i := range nodes {
		if !g.finished[i] && g.pending[i] == 0 {
			g.ready = append(g.ready, i)
		}
	}
	return g
}

// fail marks node i failed before it started.
func (g *depGraph) fail(i int, err error) {
	g.results[i].Status, g.results[i].Err = StatusFailed, err
	g.finished[i] = true
}

// next takes a ready node off the queue and marks it started.
func (g *depGraph) next() (int, bool) {
	for len(g.ready) > 0 {
		i := g.ready[0]
		g.ready = g.ready[1:]
		if !g.finished[i] {
			g.finished[i] = true
			return i, true
		}
	}
	return 0, false
}

// finish records node i's result: its children move towards ready when it
// is done; they are skipped when it is not.
func (g *depGraph) finish(i int, res Result) {
	g.results[i] = res
	if res.Status != StatusDone {
		g.skip(i, g.nodes[i].ID(), res.Err)
		return
	}
	for _, c := range g.children[i] {
		g.pending[c]--
		if g.pending[c] == 0 && !g.finished[c] {
			g.ready = append(g.ready, c)
		}
	}
}

// skip marks the unfinished descendants of i as skipped, naming root, the
// node that failed, and its error.
func (g *depGraph) skip(i int, root string, cause error) {
	for _, c := range g.children[i] {
		if g.finished[c] {
			continue
		}
		g.finished[c] = true
		g.results[c].Status = StatusSkipped
		g.results[c].Err = fmt.Errorf("dependency %s failed: %w", root, cause)
		g.skip(c, root, cause)
	}
}

// neverReady skips what never became ready: a cycle, or the context ended.
func (g *depGraph) neverReady(ctx context.Context) {
	for i := range g.nodes {
		if g.results[i].Status != "" {
			continue
		}
		g.results[i].Status = StatusSkipped
		if err := ctx.Err(); err != nil {
			g.results[i].Err = fmt.Errorf("node %s: not started: %w", g.nodes[i].ID(), err)
		} else {
			g.results[i].Err = fmt.Errorf("node %s: dependency cycle", g.nodes[i].ID())
		}
	}
}

// runOne opens the node's log and calls the solver.
func (s *scheduler) runOne(ctx context.Context, job Job) Result {
	now := s.now
	if now == nil {
		now = time.Now
	}
	res := Result{Node: job.Node, Started: now()}
	var log io.Writer = io.Discard
	if s.openLog != nil {
		w, p, err := s.openLog(job.Node)
		if err != nil {
			res.Status, res.Err = StatusFailed, fmt.Errorf("node %s: opening log: %w", job.Node.ID(), err)
			return res
		}
		res.LogPath = p
		log = w
		defer func() {
			if err := w.Close(); err != nil && res.Err == nil {
				res.Status, res.Err = StatusFailed, fmt.Errorf("node %s: closing log: %w", job.Node.ID(), err)
			}
		}()
	}
	job.Log = log
	for k, l := range job.lost {
		fmt.Fprintf(log, "attempt %d lost with its BuildKit node: %s\n", k+1, l)
	}
	if job.daemon != nil {
		fmt.Fprintf(log, "attempt %d on %s (%s)\n", len(job.lost)+1, job.daemon.name, job.daemon.addr)
	}
	out, err := s.solver.Solve(ctx, job)
	res.Elapsed = now().Sub(res.Started)
	res.Outcome = out
	if err != nil {
		res.Status, res.Err = StatusFailed, err
		fmt.Fprintf(log, "\nFAILED after %.1fs: %v\n", res.Elapsed.Seconds(), err)
		return res
	}
	res.Status = StatusDone
	fmt.Fprintf(log, "\nDONE in %.1fs digest=%s cached=%t native=%t\n", res.Elapsed.Seconds(), out.Digest, out.Cached, out.Native)
	return res
}

// ancestors lists the transitive parents of node i, each after its own
// parents, without duplicates.
func ancestors(nodes []*graph.Node, index map[string]int, i int) []*graph.Node {
	var out []*graph.Node
	seen := map[int]bool{}
	var visit func(j int)
	visit = func(j int) {
		for _, pk := range nodes[j].Parents {
			k, ok := index[pk+"@"+nodes[j].Platform.String()]
			if !ok || seen[k] {
				continue
			}
			seen[k] = true
			visit(k)
			out = append(out, nodes[k])
		}
	}
	visit(i)
	return out
}

// instanceClaims fails every instance node that would share its image with
// another instance on the same platform: the same key (two records whose
// ids differ only in case get one key, since keys lower-case the id, as
// upstream's do) or the same instance id ignoring case (published names
// lower-case it too). Neither is built: which one the image would hold is
// not for the builder to guess. Nodes already failed (listed twice) are left
// out. The result maps node index to its error.
func instanceClaims(nodes []*graph.Node, results []Result) map[int]error {
	byKey := map[string][]int{}
	byID := map[string][]int{}
	for i, n := range nodes {
		if n.Kind != graph.KindInstance || results[i].Status != "" {
			continue
		}
		byKey[n.ID()] = append(byKey[n.ID()], i)
		if n.InstanceID != "" {
			k := strings.ToLower(n.InstanceID) + "@" + n.Platform.String()
			byID[k] = append(byID[k], i)
		}
	}
	out := map[int]error{}
	claim := func(groups map[string][]int) {
		for _, g := range groups {
			if len(g) < 2 {
				continue
			}
			var ids, keys []string
			for _, i := range g {
				ids = append(ids, strconv.Quote(nodes[i].InstanceID))
				keys = append(keys, nodes[i].Key)
			}
			slices.Sort(ids)
			slices.Sort(keys)
			keys = slices.Compact(keys)
			for _, i := range g {
				if _, ok := out[i]; ok {
					continue
				}
				out[i] = fmt.Errorf("node %s: instances %s would write one image name (%s on %s); neither is built",
					nodes[i].ID(), strings.Join(ids, " and "), strings.Join(keys, ", "), nodes[i].Platform)
			}
		}
	}
	claim(byKey)
	claim(byID)
	return out
}
