package builder

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
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
	Node      *Node
	Ancestors []*Node
	// Log receives the node's build log (already open; the solver must not
	// close it).
	Log io.Writer
}

// Outcome is what a Solver reports for a node it built.
type Outcome struct {
	Builder string // builder address
	Native  bool   // the builder runs the node's platform natively
	Cached  bool   // every build step was a cache hit
	Digest  string // image manifest digest, when exported
	Ref     string // pushed reference (name@digest), when pushed
	// Verified is true when Options.Verify passed the image; nil when it
	// was not verified.
	Verified *bool
}

// Solver builds one node; the scheduler calls it at most workers times at once.
type Solver interface {
	Solve(ctx context.Context, job Job) (Outcome, error)
}

// Result is the outcome of one node of a build.
type Result struct {
	Node    *Node
	Status  string // done, failed or skipped
	Err     error  // why it failed or was skipped
	Outcome Outcome
	Started time.Time
	Elapsed time.Duration
	LogPath string
}

// scheduler runs Solver calls over the node graph.
type scheduler struct {
	nodes []*Node
	// given are images bound to parent keys (Options.Images): a parent
	// that is given is not waited for.
	given   map[string]string
	solver  Solver
	workers int
	// openLog opens the log for a node; nil means io.Discard. The returned
	// path is recorded in the Result.
	openLog func(n *Node) (io.WriteCloser, string, error)
	// now returns the time; tests use the real clock too.
	now func() time.Time
}

// run builds every node once all its parents are done, up to s.workers at a
// time. A node whose parent failed (or is missing, or is in a cycle) is
// skipped with the cause; the others go on. Results come back in the order of
// s.nodes.
func (s *scheduler) run(ctx context.Context) []Result {
	n := len(s.nodes)
	results := make([]Result, n)
	index := make(map[string]int, n)
	for i, node := range s.nodes {
		results[i].Node = node
		if j, dup := index[node.ID()]; dup {
			if node.Kind == KindInstance && s.nodes[j].Kind == KindInstance && node.InstanceID != s.nodes[j].InstanceID {
				continue // two instances, one image: instanceClaims fails both
			}
			results[i].Status = StatusFailed
			results[i].Err = fmt.Errorf("node %s: listed twice", node.ID())
			continue
		}
		index[node.ID()] = i
	}
	for i, err := range instanceClaims(s.nodes, results) {
		results[i].Status, results[i].Err = StatusFailed, err
	}

	// Graph: pending[i] counts unfinished parents; children[i] lists nodes
	// waiting on i.
	pending := make([]int, n)
	children := make([][]int, n)
	finished := make([]bool, n)
	for i, node := range s.nodes {
		if results[i].Status != "" {
			finished[i] = true
			continue
		}
		if err := validateNode(node); err != nil {
			results[i].Status, results[i].Err = StatusFailed, err
			finished[i] = true
			continue
		}
		for _, pk := range node.Parents {
			if _, ok := givenRef(s.given, pk); ok {
				continue
			}
			j, ok := index[pk+"@"+node.Platform.String()]
			if !ok {
				results[i].Status = StatusFailed
				results[i].Err = fmt.Errorf("node %s: parent %s is not in the build graph for %s", node.ID(), pk, node.Platform)
				finished[i] = true
				break
			}
			children[j] = append(children[j], i)
			pending[i]++
		}
	}

	type done struct {
		i   int
		res Result
	}
	doneCh := make(chan done)
	workers := max(s.workers, 1)
	running := 0
	var ready []int

	// skip marks the unfinished descendants of i as skipped, naming root,
	// the node that failed, and its error.
	var skip func(i int, root string, cause error)
	skip = func(i int, root string, cause error) {
		for _, c := range children[i] {
			if finished[c] {
				continue
			}
			finished[c] = true
			results[c].Status = StatusSkipped
			results[c].Err = fmt.Errorf("dependency %s failed: %w", root, cause)
			skip(c, root, cause)
		}
	}
	release := func(i int) {
		for _, c := range children[i] {
			pending[c]--
			if pending[c] == 0 && !finished[c] {
				ready = append(ready, c)
			}
		}
	}

	for i := range s.nodes {
		if results[i].Status == StatusFailed {
			skip(i, s.nodes[i].ID(), results[i].Err)
		}
	}
	for i := range s.nodes {
		if !finished[i] && pending[i] == 0 {
			ready = append(ready, i)
		}
	}

	for {
		for running < workers && len(ready) > 0 && ctx.Err() == nil {
			i := ready[0]
			ready = ready[1:]
			if finished[i] {
				continue
			}
			finished[i] = true
			running++
			job := Job{Node: s.nodes[i], Ancestors: ancestors(s.nodes, index, i)}
			go func() {
				doneCh <- done{i, s.runOne(ctx, job)}
			}()
		}
		if running == 0 {
			break
		}
		d := <-doneCh
		running--
		results[d.i] = d.res
		if d.res.Status == StatusDone {
			release(d.i)
		} else {
			skip(d.i, s.nodes[d.i].ID(), d.res.Err)
		}
	}

	// Whatever is left never became ready: a cycle, or the context ended.
	for i := range s.nodes {
		if results[i].Status != "" {
			continue
		}
		results[i].Status = StatusSkipped
		if err := ctx.Err(); err != nil {
			results[i].Err = fmt.Errorf("node %s: not started: %w", s.nodes[i].ID(), err)
		} else {
			results[i].Err = fmt.Errorf("node %s: dependency cycle", s.nodes[i].ID())
		}
	}
	return results
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
func ancestors(nodes []*Node, index map[string]int, i int) []*Node {
	var out []*Node
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
func instanceClaims(nodes []*Node, results []Result) map[int]error {
	byKey := map[string][]int{}
	byID := map[string][]int{}
	for i, n := range nodes {
		if n.Kind != KindInstance || results[i].Status != "" {
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
