package builder

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	bkclient "github.com/moby/buildkit/client"
	// BuildKit's own connection helpers, registered by import as buildctl
	// and buildx do: ssh://[USER@]HOST[:PORT][/SOCKET] (runs `buildctl
	// dial-stdio` on the host), docker-container://CONTAINER and
	// kube-pod://POD?namespace=NS&context=CTX (run `buildctl dial-stdio`
	// in the container or pod with docker/kubectl).
	_ "github.com/moby/buildkit/client/connhelper/dockercontainer"
	_ "github.com/moby/buildkit/client/connhelper/kubepod"
	_ "github.com/moby/buildkit/client/connhelper/ssh"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// A pool of BuildKit nodes
//
// Every builder given (--builder, or a pool file) is one daemon; a daemon
// given with a platform serves that platform, one given without serves every
// platform its workers run that has no daemon of its own. The scheduler
// places each plan node on one daemon of its platform (pool.place) by
// affinity group (affinityKeys): an instance goes where its env was placed,
// so an env is solved on one daemon of the pool, and the instances that
// re-solve it as their ancestor find it in that daemon's cache. A group is
// bound to a daemon the first time one of its nodes is placed, on the daemon
// with the fewest groups (then the fewest running solves, then the order
// given), preferring the daemon that holds the node's parent on a tie.
//
// Health: every daemon is asked for its workers every ProbeEvery while the
// build runs. A daemon that has not answered for DownAfter is marked down:
// its running solves are cancelled and retried on another daemon of their
// platform (at most Retries times per node), and its groups move to the
// others the next time one of their nodes is placed. A solve that fails with
// a transport error (the connection refused or reset) is checked the same
// way before it is called a failure. With no daemon left for a platform,
// that platform's remaining nodes fail naming each daemon and why it went
// down; the other platforms go on.

// NodeState is the state of a BuildKit daemon of the pool.
type NodeState string

// Daemon states.
const (
	NodeUp   NodeState = "up"
	NodeDown NodeState = "down"
)

// Pool defaults (Options.Pool zero values).
const (
	DefaultDownAfter  = 30 * time.Second
	DefaultProbeEvery = 2 * time.Second
	DefaultRetries    = 2
)

// PoolOptions tune node-loss handling; zero values take the defaults.
type PoolOptions struct {
	// DownAfter is how long a daemon may fail to answer (connection
	// refused, or no answer within the probe's time) before it is marked
	// down.
	DownAfter time.Duration
	// ProbeEvery is the interval of the health probe (ListWorkers).
	ProbeEvery time.Duration
	// Retries is how many times one node may be started again after the
	// daemon running it was lost.
	Retries int
	// Slots is the most solves one daemon runs at once (default: Workers).
	Slots int
}

func (o PoolOptions) withDefaults(workers int) PoolOptions {
	if o.DownAfter <= 0 {
		o.DownAfter = DefaultDownAfter
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = DefaultProbeEvery
	}
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.Slots <= 0 {
		o.Slots = max(workers, 1)
	}
	return o
}

// TLS is the mutual-TLS material of a tcp:// builder, as buildctl takes it
// (--tlscacert, --tlscert, --tlskey, --tlsservername): file paths and the
// name the server's certificate must carry.
type TLS struct {
	CACert     string
	Cert       string
	Key        string
	ServerName string
}

func (t *TLS) empty() bool { return t == nil || *t == TLS{} }

// tlsParams are the query parameters of a builder address that carry TLS
// material; they are removed from the address BuildKit dials.
var tlsParams = []string{"tlscacert", "tlscert", "tlskey", "tlsservername"}

// splitTLS takes the TLS query parameters off a tcp:// address.
func splitTLS(addr string) (string, *TLS, error) {
	if !strings.HasPrefix(addr, "tcp://") || !strings.Contains(addr, "?") {
		return addr, nil, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", nil, fmt.Errorf("address %q: %w", addr, err)
	}
	q := u.Query()
	t := &TLS{CACert: q.Get("tlscacert"), Cert: q.Get("tlscert"), Key: q.Get("tlskey"), ServerName: q.Get("tlsservername")}
	for _, p := range tlsParams {
		q.Del(p)
	}
	if len(q) > 0 {
		var names []string
		for k := range q {
			names = append(names, k)
		}
		slices.Sort(names)
		return "", nil, fmt.Errorf("address %q: unknown query parameter %s (want %s)", addr, strings.Join(names, ", "), strings.Join(tlsParams, ", "))
	}
	if (t.Cert == "") != (t.Key == "") {
		return "", nil, fmt.Errorf("address %q: tlscert and tlskey go together", addr)
	}
	u.RawQuery = ""
	return u.String(), t, nil
}

// ClientOpts are the BuildKit client options for t (none for nil).
func (t *TLS) ClientOpts() []bkclient.ClientOpt {
	if t.empty() {
		return nil
	}
	var opts []bkclient.ClientOpt
	if t.CACert != "" || t.ServerName != "" {
		opts = append(opts, bkclient.WithServerConfig(t.ServerName, t.CACert))
	}
	if t.Cert != "" {
		opts = append(opts, bkclient.WithCredentials(t.Cert, t.Key))
	}
	return opts
}

// ReadPoolFile reads a pool file: one builder per line in --builder's
// syntax ([PLATFORM=]ADDR, TLS as query parameters of a tcp:// address),
// blank lines and lines starting with # ignored. Errors name the file and
// line.
func ReadPoolFile(path string) ([]BuilderSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading pool file: %w", err)
	}
	defer f.Close()
	return parsePool(path, f)
}

func parsePool(name string, r io.Reader) ([]BuilderSpec, error) {
	var out []BuilderSpec
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		v := strings.TrimSpace(sc.Text())
		if v == "" || strings.HasPrefix(v, "#") {
			continue
		}
		sp, err := ParseBuilder(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, sp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no builder in the pool file", name)
	}
	return out, nil
}

// daemon is one BuildKit daemon of the pool with its health.
type daemon struct {
	*remote
	name string
	// platform is the platform it was given for ("" for every platform
	// its workers run that has no daemon of its own).
	platform core.Platform

	mu           sync.Mutex
	state        NodeState
	reason       error
	downAt       time.Time
	failingSince time.Time
	inflight     map[int]context.CancelCauseFunc

	// Scheduler-side counts (only the scheduler goroutine touches them).
	running, groups, solves, lost int
}

// BuilderStat is what one daemon of the pool did in a build.
type BuilderStat struct {
	Name      string
	Addr      string
	Platforms []core.Platform
	State     NodeState
	// Reason is why it went down.
	Reason string
	// Solves counts the solves started on it; Lost those cut off when it
	// went down.
	Solves, Lost int
}

// errNodeDown is the cause of a solve cancelled because its daemon went
// down.
var errNodeDown = errors.New("BuildKit node down")

func (d *daemon) isDown() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state == NodeDown
}

func (d *daemon) downError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Errorf("%s (%s) down since %s: %w", d.name, d.addr, d.downAt.UTC().Format(time.TimeOnly), d.reason)
}

// markDown marks d down (once) and cancels its running solves.
func (d *daemon) markDown(reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == NodeDown {
		return
	}
	d.state, d.reason, d.downAt = NodeDown, reason, time.Now()
	for _, cancel := range d.inflight {
		cancel(fmt.Errorf("%w: %s: %w", errNodeDown, d.name, reason))
	}
}

// probeResult records one probe; it marks d down once it has failed for
// downAfter.
func (d *daemon) probeResult(err error, downAfter time.Duration) {
	d.mu.Lock()
	if err == nil {
		d.failingSince = time.Time{}
		d.mu.Unlock()
		return
	}
	now := time.Now()
	if d.failingSince.IsZero() {
		d.failingSince = now
	}
	since := d.failingSince
	d.mu.Unlock()
	if now.Sub(since) >= downAfter {
		d.markDown(fmt.Errorf("no answer for %s: %w", downAfter, err))
	}
}

func (d *daemon) track(i int, cancel context.CancelCauseFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight == nil {
		d.inflight = map[int]context.CancelCauseFunc{}
	}
	d.inflight[i] = cancel
	if d.state == NodeDown {
		cancel(fmt.Errorf("%w: %s: %w", errNodeDown, d.name, d.reason))
	}
}

func (d *daemon) untrack(i int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inflight, i)
}

// pool is the BuildKit daemons of a build by platform, the affinity groups
// bound to them, and their health.
type pool struct {
	daemons []*daemon
	byPlat  map[core.Platform][]*daemon
	groups  map[string]*daemon // affinity key -> daemon
	opts    PoolOptions
	// probe asks a daemon whether it is alive; tests replace it.
	probe func(ctx context.Context, d *daemon) error
}

func newPoolOf(daemons []*daemon, opts PoolOptions) *pool {
	p := &pool{daemons: daemons, byPlat: map[core.Platform][]*daemon{}, groups: map[string]*daemon{}, opts: opts, probe: probeWorkers}
	// Daemons given for a platform serve it; the others serve every
	// platform their workers run that no daemon was given for.
	for _, d := range daemons {
		if !d.platform.IsZero() {
			p.byPlat[d.platform] = append(p.byPlat[d.platform], d)
		}
	}
	for _, pl := range core.AllPlatforms() {
		if len(p.byPlat[pl]) > 0 {
			continue
		}
		for _, d := range daemons {
			if d.platform.IsZero() && (d.remote == nil || slices.Contains(d.platforms, pl)) {
				p.byPlat[pl] = append(p.byPlat[pl], d)
			}
		}
	}
	return p
}

// probeWorkers is the health probe: the daemon lists its workers within
// the probe interval (at least 5 s).
func probeWorkers(ctx context.Context, d *daemon) error {
	if d.remote == nil || d.c == nil {
		return errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := d.c.ListWorkers(ctx)
	return err
}

// connectPool dials every builder. A daemon that cannot be reached is kept,
// down, as long as another daemon answers; with none answering, or a
// builder given twice, or a platform its workers cannot run, it is an
// error.
func connectPool(ctx context.Context, specs []BuilderSpec, opts PoolOptions) (*pool, error) {
	if len(specs) == 0 {
		return nil, errors.New("no BuildKit builder given")
	}
	var daemons []*daemon
	closeAll := func() {
		for _, d := range daemons {
			if d.remote != nil && d.c != nil {
				d.c.Close()
			}
		}
	}
	seen := map[string]bool{}
	count := map[string]int{}
	var errs []error
	up := 0
	for _, sp := range specs {
		key := sp.Platform.String() + "=" + sp.Addr
		if seen[key] {
			closeAll()
			return nil, fmt.Errorf("builder %s given twice", key)
		}
		seen[key] = true
		prefix := "builder"
		if !sp.Platform.IsZero() {
			prefix = sp.Platform.Arch()
			if sp.Platform == core.AMD64 {
				prefix = "amd64"
			}
		}
		count[prefix]++
		d := &daemon{name: fmt.Sprintf("%s-%d", prefix, count[prefix]), platform: sp.Platform, state: NodeUp}
		if sp.Name != "" {
			d.name = sp.Name
		}
		r, err := connect(ctx, sp.Addr, sp.TLS.ClientOpts()...)
		if err != nil {
			if !sp.TLS.empty() {
				err = fmt.Errorf("%w (TLS: the daemon must trust the client certificate's CA in its --tlscacert, and its certificate must be signed by tlscacert for tlsservername)", err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
			d.remote = &remote{addr: sp.Addr}
			d.state, d.reason, d.downAt = NodeDown, err, time.Now()
		} else {
			d.remote = r
			up++
			if !sp.Platform.IsZero() && !slices.Contains(r.platforms, sp.Platform) {
				daemons = append(daemons, d)
				closeAll()
				return nil, fmt.Errorf("builder %s=%s cannot build %s (its workers run %s; is binfmt/QEMU set up?)", sp.Platform, sp.Addr, sp.Platform, strings.Join(r.workers, ","))
			}
		}
		daemons = append(daemons, d)
	}
	if up == 0 {
		closeAll()
		return nil, errors.Join(errs...)
	}
	return newPoolOf(daemons, opts), nil
}

func (p *pool) close() {
	for _, d := range p.daemons {
		if d.remote != nil && d.c != nil {
			d.c.Close()
		}
	}
}

// watch probes every daemon that is up every ProbeEvery until ctx ends.
func (p *pool) watch(ctx context.Context) {
	for _, d := range p.daemons {
		go func() {
			t := time.NewTicker(p.opts.ProbeEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if d.isDown() {
					return
				}
				d.probeResult(p.probe(ctx, d), p.opts.DownAfter)
			}
		}()
	}
}

// confirm decides whether d is lost after a solve on it failed with err:
// true when d is (or becomes) down, probing it until it answers or
// DownAfter passes.
func (p *pool) confirm(ctx context.Context, d *daemon, err error) bool {
	if d.isDown() {
		return true
	}
	if !transportError(err) {
		return false
	}
	deadline := time.Now().Add(p.opts.DownAfter)
	for {
		perr := p.probe(ctx, d)
		if perr == nil {
			return false
		}
		if ctx.Err() != nil {
			return d.isDown()
		}
		if time.Now().After(deadline) {
			d.markDown(fmt.Errorf("a solve lost its connection and no answer for %s: %w", p.opts.DownAfter, perr))
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.opts.ProbeEvery):
		}
	}
}

// transportError reports whether err looks like a lost connection rather
// than a build that failed.
func transportError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errNodeDown) {
		return true
	}
	if s, ok := status.FromError(err); ok && (s.Code() == codes.Unavailable) {
		return true
	}
	msg := err.Error()
	for _, m := range []string{"connection refused", "transport is closing", "error reading from server", "connection reset by peer", "broken pipe", "no such file or directory\" . make sure buildkitd is running", "code = Unavailable"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// place chooses the daemon for node n of affinity group key: the daemon
// the group is bound to when it is up, else (binding the group) the least
// loaded daemon of the platform, the one holding the parent's group first
// on a tie. It returns nil when the daemon chosen has no free slot, and an
// error when no daemon of the platform is up.
func (p *pool) place(n *graph.Node, key, parentKey string) (*daemon, error) {
	if d := p.groups[key]; d != nil && !d.isDown() {
		if d.running >= p.opts.Slots {
			return nil, nil
		}
		return d, nil
	}
	var up []*daemon
	var downs []string
	for _, d := range p.byPlat[n.Platform] {
		if d.isDown() {
			downs = append(downs, d.downError().Error())
			continue
		}
		up = append(up, d)
	}
	if len(up) == 0 {
		if len(downs) == 0 {
			var ws []string
			for _, d := range p.daemons {
				if d.remote != nil && len(d.workers) > 0 {
					ws = append(ws, fmt.Sprintf("%s's workers run %s", d.addr, strings.Join(d.workers, ",")))
				}
			}
			return nil, fmt.Errorf("node %s: no builder for %s (%s; is binfmt/QEMU set up?)", n.ID(), n.Platform, strings.Join(ws, "; "))
		}
		return nil, fmt.Errorf("node %s: no BuildKit node left for %s: %s", n.ID(), n.Platform, strings.Join(downs, "; "))
	}
	best := up[0]
	less := func(a, b *daemon) bool {
		if a.groups != b.groups {
			return a.groups < b.groups
		}
		return a.running < b.running
	}
	for _, d := range up[1:] {
		if less(d, best) {
			best = d
		}
	}
	if pd := p.groups[parentKey]; pd != nil && pd != best && slices.Contains(up, pd) && !less(best, pd) {
		best = pd
	}
	if old := p.groups[key]; old != nil {
		old.groups--
	}
	p.groups[key] = best
	best.groups++
	if best.running >= p.opts.Slots {
		return nil, nil
	}
	return best, nil
}

// stats reports every daemon for the summary.
func (p *pool) stats() []BuilderStat {
	var out []BuilderStat
	for _, d := range p.daemons {
		st := BuilderStat{Name: d.name, Addr: d.addr, Solves: d.solves, Lost: d.lost}
		for _, pl := range core.AllPlatforms() {
			if slices.Contains(p.byPlat[pl], d) {
				st.Platforms = append(st.Platforms, pl)
			}
		}
		d.mu.Lock()
		st.State = d.state
		if d.reason != nil {
			st.Reason = d.reason.Error()
		}
		d.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// writeBuilders writes the pool table under the summary (nothing for one
// daemon that stayed up).
func writeBuilders(w io.Writer, stats []BuilderStat) error {
	if len(stats) < 2 && (len(stats) == 0 || stats[0].State == NodeUp) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILDER\tADDRESS\tPLATFORMS\tSOLVES\tLOST\tSTATE")
	for _, s := range stats {
		var pl []string
		for _, p := range s.Platforms {
			pl = append(pl, p.String())
		}
		state := string(s.State)
		if s.Reason != "" {
			state += ": " + s.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", s.Name, s.Addr, strings.Join(pl, ","), s.Solves, s.Lost, state)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}
