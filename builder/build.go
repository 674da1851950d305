package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/authn"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/session"
	"github.com/opencontainers/go-digest"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// BuilderSpec names a BuildKit daemon, for one platform or (Platform "") for
// every platform without its own builder.
type BuilderSpec struct {
	Platform core.Platform
	Addr     string
	// TLS is the mutual-TLS material of a tcp:// address (nil: plain).
	TLS *TLS
	// Name is how progress and the summary call it (default ARCH-N).
	Name string
}

// ParseBuilder parses a builder value: "ADDR" or "PLATFORM=ADDR", e.g.
// "unix:///run/swebuild/buildkitd.sock" or "linux/arm64=tcp://arm-host:1234".
// A tcp:// address takes its TLS material as query parameters named after
// buildctl's flags: tcp://HOST:PORT?tlscacert=CA&tlscert=CERT&tlskey=KEY
// &tlsservername=NAME. Any BuildKit address works, including those of its
// connection helpers (ssh://, docker-container://, kube-pod://; pool.go).
func ParseBuilder(v string) (BuilderSpec, error) {
	sp := BuilderSpec{Addr: v}
	if p, addr, ok := strings.Cut(v, "="); ok && !strings.Contains(p, "://") {
		pl, err := core.ParsePlatform(p)
		if err != nil {
			return BuilderSpec{}, fmt.Errorf("builder %q: %w", v, err)
		}
		if addr == "" {
			return BuilderSpec{}, fmt.Errorf("builder %q: empty address", v)
		}
		sp = BuilderSpec{Platform: pl, Addr: addr}
	}
	if sp.Addr == "" {
		return BuilderSpec{}, errors.New("builder: empty address")
	}
	addr, tls, err := splitTLS(sp.Addr)
	if err != nil {
		return BuilderSpec{}, fmt.Errorf("builder %q: %w", v, err)
	}
	sp.Addr, sp.TLS = addr, tls
	return sp, nil
}

// ParseCacheOption parses a --cache-from/--cache-to value in buildctl's
// syntax, "type=registry,ref=HOST/REPO:TAG,mode=max"; a bare value without
// "=" is a registry ref.
func ParseCacheOption(v string) (bkclient.CacheOptionsEntry, error) {
	e := bkclient.CacheOptionsEntry{Attrs: map[string]string{}}
	if !strings.Contains(v, "=") {
		if v == "" {
			return e, errors.New("empty cache option")
		}
		e.Type = "registry"
		e.Attrs["ref"] = v
		return e, nil
	}
	for _, f := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return e, fmt.Errorf("cache option %q: field %q is not key=value", v, f)
		}
		if k == "type" {
			e.Type = val
			continue
		}
		e.Attrs[k] = val
	}
	if e.Type == "" {
		return e, fmt.Errorf("cache option %q: type= is required", v)
	}
	return e, nil
}

// Options configure Build.
type Options struct {
	// Builders are the BuildKit daemons (at least one): a pool of one or
	// more per platform (pool.go).
	Builders []BuilderSpec
	// NotPlanned are the instance images of the run that have no node
	// (x86-only on linux/arm64, planning errors): the summary lists them.
	NotPlanned []NotPlanned
	// Pool tunes node-loss handling and per-daemon slots.
	Pool PoolOptions
	// Workers is the number of solves running at once (default 2).
	Workers int
	// Push is the repository every image is pushed to by digest, e.g.
	// "127.0.0.1:5000/swebuild/build"; empty: no push (BuildKit still makes
	// the image manifest, and reports its digest; layers stay in its cache).
	Push string
	// Output, when set, exports every image into an OCI image layout
	// directory (ParseOutput), named in its index.json by the image key;
	// with Push too, images are both pushed and written.
	Output *Output
	// Insecure allows plain-HTTP registries; always on for localhost and
	// 127.0.0.1.
	Insecure bool
	// NoProvenance: pushed images carry no SLSA provenance attestation
	// (by default each carries BuildKit's, mode=max; see attest.go).
	NoProvenance bool
	// Reproducible, when set, makes the images reproducible: dated
	// SOURCE_DATE_EPOCH, layer timestamps rewritten, deterministic git and
	// Python steps (reproducible.go). nil: BuildKit's defaults.
	Reproducible *Reproducible
	// Keychain gives the credentials of the registry client the builder
	// reads pushed images back (attest.go) and attaches SBOMs with, the same
	// source as Auth; nil means the Docker config (authn.DefaultKeychain).
	Keychain authn.Keychain
	// CacheFrom and CacheTo are cache imports and exports (ParseCacheOption).
	CacheFrom []bkclient.CacheOptionsEntry
	CacheTo   []bkclient.CacheOptionsEntry
	// Progress is the terminal display mode: auto, tty, plain, rawjson or
	// quiet (default auto).
	Progress string
	// ProgressOut receives the progress display (usually stderr); nil: none.
	ProgressOut io.Writer
	// RunDir receives one log file per node under logs/ (required).
	RunDir string
	// Images binds image keys to existing images, as `docker buildx build
	// --build-context NAME=docker-image://REF` does: a node whose key is
	// bound is not built, and its children build FROM the image (a
	// reference BuildKit pulls for the child's platform, e.g.
	// REGISTRY/REPO@sha256:...). Keys match with or without ":latest".
	Images map[string]string
	// Verify, when set, is called for every instance node right after its
	// image is solved, inside the node's build session and before the image
	// is exported or pushed; an error fails the node, so a failed instance
	// is neither pushed nor written to the metadata file. Instance images
	// that pass are marked verified in the metadata file.
	Verify VerifyFunc
	// VerifyMounts are local mounts Verify's solves read (package verify
	// sends a run's input files through one: a file transfer, not the LLB
	// definition, whose gRPC message BuildKit limits to 16 MiB); they are
	// added to the session of every instance node when Verify is set.
	VerifyMounts map[string]fsutil.FS
	// Attest, when set with Verify, is called for every instance image
	// Verify passed, once it is exported: the statement it returns is
	// attached to the image as a referrer where it was exported (push
	// repository, OCI layout) and its record names it
	// (core.Image.Verification; statement.go). A failure fails the node.
	Attest AttestFunc
	// BuilderID is the provenance's runDetails.builder.id: a URI naming
	// the build platform (the workflow run in the nightly); BuildKit's
	// attestation parameter builder-id. Empty: BuildKit writes none.
	BuilderID string
	// Registry is the client the builder reads pushed images back with
	// (attest.go) and attaches SBOMs and verification statements to them
	// with (sbom.go, statement.go); nil: one made from Keychain and
	// Insecure when Push is set.
	Registry *registry.Client
	// Auth, when set, makes the registry login of one solve's session
	// (bkauth.New over registry.Credentials): BuildKit asks it for the
	// credential of every registry the solve pushes to, pulls from (bound
	// images, FROM) or caches with. nil: BuildKit reaches registries
	// anonymously.
	Auth func() SessionAuth
}

// SessionAuth answers BuildKit's registry credential requests in one
// session; bkauth.SessionAuth (package registry/bkauth) is one.
type SessionAuth interface {
	session.Attachable
	// Explain adds to a failed solve's error which credential each
	// registry got, when the error is a registry refusing a login.
	Explain(error) error
}

// VerifyFunc checks a solved instance image before it is exported: image is
// the image's root file system with its config (ENV, WORKDIR) applied, to be
// run in the build session gc. package verify's Runner.BuilderHook is one.
type VerifyFunc func(ctx context.Context, gc gateway.Client, instanceID string, platform core.Platform, image llb.State) error

// Report is the result of Build: one Result per node, in the order given.
type Report struct {
	Results []Result
	// NotPlanned is Options.NotPlanned.
	NotPlanned []NotPlanned
	// Builders says what each BuildKit daemon did.
	Builders []BuilderStat
	// given are the bound images (Options.Images) by context name.
	given map[string]string
}

// Failed counts the nodes that failed or were skipped.
func (r *Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if res.Status != StatusDone {
			n++
		}
	}
	return n
}

// Build builds nodes: every parent before its children, up to opts.Workers
// solves at once, each on the builder for its platform. A failed node skips
// its descendants (naming the cause) and the others go on. Nodes for arm64
// marked X86Only fail without being built. The returned error is non-nil when
// any node failed or was skipped, or when nothing could start (the report is
// then nil); the report is returned in both cases otherwise.
func Build(ctx context.Context, nodes []*graph.Node, opts Options) (*Report, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	var layout *ociLayout
	if opts.Output != nil {
		if opts.Output.Type != OutputOCI {
			return nil, fmt.Errorf("output type %q: only %q is supported", opts.Output.Type, OutputOCI)
		}
		var err error
		if layout, err = openLayout(opts.Output.Dest); err != nil {
			return nil, err
		}
		defer layout.close()
	}
	given, err := givenImages(opts.Images)
	if err != nil {
		return nil, err
	}
	if len(given) > 0 {
		nodes = withoutGiven(nodes, given)
	}
	if layout != nil {
		// The layout names each image's spec key, as the records do.
		layout.specKeys = inputKeys(nodes, given)
	}
	logDir := filepath.Join(opts.RunDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	solver, err := newSolver(nodes, given, layout, opts)
	if err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 2
	}
	pool, err := connectPool(ctx, opts.Builders, opts.Pool.withDefaults(workers))
	if err != nil {
		return nil, err
	}
	defer pool.close()

	hub, err := newProgressHub(ctx, opts.ProgressOut, opts.Progress)
	if err != nil {
		return nil, err
	}
	solver.progress = hub
	s := &scheduler{
		nodes:   nodes,
		given:   given,
		solver:  solver,
		workers: workers,
		pool:    pool,
		openLog: func(n *graph.Node) (io.WriteCloser, string, error) {
			p := filepath.Join(logDir, logName(n))
			f, err := os.Create(p)
			return f, p, err
		},
	}
	report := &Report{Results: s.run(ctx), given: given, NotPlanned: opts.NotPlanned}
	report.Builders = pool.stats()
	hub.close()

	var errs []error
	if n := report.Failed(); n > 0 {
		errs = append(errs, fmt.Errorf("%d of %d nodes failed", n, len(report.Results)))
	}
	if n := report.SBOMFailed(); n > 0 {
		errs = append(errs, fmt.Errorf("%d built image(s) have no SBOM: the capture or its attachment failed (see the summary)", n))
	}
	return report, errors.Join(errs...)
}

// normalize checks the run directory, progress mode and push repository,
// and fills what they imply: the default progress mode, and Insecure for a
// push to a local registry.
func (opts *Options) normalize() error {
	if opts.RunDir == "" {
		return errors.New("a run directory is required")
	}
	switch opts.Progress {
	case "":
		opts.Progress = "auto"
	case "auto", "tty", "plain", "rawjson", "quiet":
	default:
		return fmt.Errorf("progress mode %q: want auto, tty, plain, rawjson or quiet", opts.Progress)
	}
	if opts.Push == "" {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(opts.Push)
	if err != nil {
		return fmt.Errorf("push repository %q: %w", opts.Push, err)
	}
	if _, tagged := named.(reference.NamedTagged); tagged {
		return fmt.Errorf("push repository %q: give a repository without a tag (images are pushed by digest)", opts.Push)
	}
	if isLocalRegistry(reference.Domain(named)) {
		opts.Insecure = true
	}
	return nil
}

// newSolver is the solver of a build of nodes: where it pushes or exports,
// with the SBOMs and referrers opts ask for.
func newSolver(nodes []*graph.Node, given map[string]string, layout *ociLayout, opts Options) (*bkSolver, error) {
	solver := &bkSolver{push: opts.Push, layout: layout, insecure: opts.Insecure, cacheFrom: opts.CacheFrom, cacheTo: opts.CacheTo, byPlatform: map[core.Platform]*remote{}, verify: opts.Verify, given: given, verifyMounts: opts.VerifyMounts, auth: opts.Auth, noProvenance: opts.NoProvenance, keychain: opts.Keychain, reg: opts.Registry, repro: opts.Reproducible, attest: opts.Attest, builderID: opts.BuilderID}
	if opts.Reproducible != nil && opts.Push != "" {
		solver.pushed = &pushedRefs{m: map[string]string{}}
	}
	if strings.ContainsAny(opts.BuilderID, ", \t\n\"") {
		return nil, fmt.Errorf("provenance builder id %q: a URI without commas, quotes or spaces", opts.BuilderID)
	}
	if err := solver.setupSBOM(nodes, given, opts); err != nil {
		return nil, err
	}
	if err := solver.setupReferrers(opts, opts.Attest != nil && opts.Verify != nil); err != nil {
		return nil, err
	}
	return solver, nil
}

func isLocalRegistry(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// logName is the file name of a node's log: its key and arch, with
// characters unsafe in file names replaced.
func logName(n *graph.Node) string {
	r := strings.NewReplacer("/", "_", ":", "_", "@", "_", " ", "_")
	return r.Replace(n.Key) + "." + n.Platform.Arch() + ".log"
}

// Records describes every node as a core.Image record, in summary order:
// built nodes with their digest, pushed ref, spec key and verify verdict;
// failed and skipped nodes with their error.
func (r *Report) Records() []core.Image {
	out := []core.Image{}
	keys := inputKeys(r.nodes(), r.given)
	for _, res := range r.sorted() {
		n := res.Node
		if n.Kind == graph.KindInstance && n.InstanceID == "" {
			// Failed validation (see the summary): a record never
			// carries an empty instance id.
			continue
		}
		specKey := n.SpecKey
		if specKey == "" {
			specKey = keys[n.ID()]
		}
		im := core.Image{
			Kind:       core.Kind(n.Kind),
			InstanceID: n.InstanceID,
			Key:        n.Key,
			Platform:   n.Platform,
			SpecKey:    specKey,
			BaseCommit: n.BaseCommit,
			Pins:       n.Pins,
			Status:     core.StatusBuilt,
		}
		if res.Status == StatusDone {
			im.Digest = digest.Digest(res.Outcome.Digest)
			im.Ref = res.Outcome.Ref
			im.OCILayout = res.Outcome.OCILayout
			im.Attestation, im.AttestationSize = digest.Digest(res.Outcome.Attestation), res.Outcome.AttestationSize
			im.Verified = res.Outcome.Verified
			im.SBOM, im.SBOMSize = digest.Digest(res.Outcome.SBOMArtifact), res.Outcome.SBOMArtifactSize
			im.SBOMError = res.Outcome.SBOMError
			im.Verification, im.VerificationSize = digest.Digest(res.Outcome.Verification), res.Outcome.VerificationSize
		} else {
			im.Status = core.StatusFailed
			im.Error = res.Status
			if res.Err != nil {
				im.Error = res.Status + ": " + res.Err.Error()
			}
			im.Verified = res.Outcome.Verified
		}
		out = append(out, im)
	}
	return out
}

// sorted returns the results ordered by kind (base, env, instance), key and
// platform, the order of the summary and the metadata file.
func (r *Report) sorted() []Result {
	out := append([]Result(nil), r.Results...)
	rank := map[graph.Kind]int{graph.KindBase: 0, graph.KindEnv: 1, graph.KindInstance: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Node, out[j].Node
		if rank[a.Kind] != rank[b.Kind] {
			return rank[a.Kind] < rank[b.Kind]
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Platform.Compare(b.Platform) < 0
	})
	return out
}

// WriteSummary writes the summary table: node, platform, native/emulated,
// cached, seconds, status (and the error of failed nodes below the table).
func (r *Report) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKIND\tPLATFORM\tMODE\tCACHED\tSECONDS\tSTATUS")
	var failures []string
	for _, res := range r.sorted() {
		n := res.Node
		mode, cached, secs := "-", "-", "-"
		if !res.Started.IsZero() && res.Outcome.Builder != "" {
			mode = "emulated"
			if res.Outcome.Native {
				mode = "native"
			}
			cached = "no"
			if res.Outcome.Cached {
				cached = "yes"
			}
		}
		if !res.Started.IsZero() {
			secs = fmt.Sprintf("%.1f", res.Elapsed.Seconds())
		}
		status := res.Status
		if host := UnreachableHost(res.Err); host != "" && res.Status == StatusFailed {
			status += ": cannot reach " + host
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Key, n.Kind, n.Platform, mode, cached, secs, status)
		if res.Err != nil {
			failures = append(failures, fmt.Sprintf("%s: %s: %v", n.ID(), res.Status, res.Err))
			if res.LogPath != "" {
				failures[len(failures)-1] += " (log: " + res.LogPath + ")"
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	if err := writeBuilders(w, r.Builders); err != nil {
		return err
	}
	done, cached := 0, 0
	for _, res := range r.Results {
		if res.Status == StatusDone {
			done++
			if res.Outcome.Cached {
				cached++
			}
		}
	}
	fmt.Fprintf(w, "%d nodes: %d built (%d fully cached), %d failed or skipped; wall time %.1fs\n",
		len(r.Results), done, cached, len(r.Results)-done, r.Elapsed().Seconds())
	for _, f := range failures {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
	}
	if err := r.writeSBOMs(w); err != nil {
		return err
	}
	return r.writeNotDone(w)
}

// NotPlanned is an instance image a run has no node for, and why.
type NotPlanned struct {
	InstanceID string
	Platform   core.Platform
	// Reason is e.g. "x86-only (USE_X86)" or "could not be planned".
	Reason string
}

// writeNotDone lists, per instance, what the run did not make: images
// with no node (NotPlanned, by reason), instance images that failed and
// those skipped because a parent failed. Nothing when all were made.
func (r *Report) writeNotDone(w io.Writer) error {
	type group struct {
		title string
		ids   []string
	}
	var groups []*group
	byTitle := map[string]*group{}
	add := func(title, item string) {
		g := byTitle[title]
		if g == nil {
			g = &group{title: title}
			byTitle[title] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, item)
	}
	for _, np := range r.NotPlanned {
		add(fmt.Sprintf("not built for %s, %s", np.Platform, np.Reason), np.InstanceID)
	}
	for _, res := range r.sorted() {
		n := res.Node
		if n.Kind != graph.KindInstance || n.InstanceID == "" {
			continue
		}
		switch res.Status {
		case StatusFailed:
			add("failed on "+n.Platform.String(), n.InstanceID)
		case StatusSkipped:
			add("skipped on "+n.Platform.String()+" (a parent image failed)", n.InstanceID)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("instances not done:\n")
	for _, g := range groups {
		slices.Sort(g.ids)
		fmt.Fprintf(&sb, "  %s: %d: %s\n", g.title, len(g.ids), strings.Join(g.ids, " "))
	}
	if _, err := io.WriteString(w, sb.String()); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

func (r *Report) nodes() []*graph.Node {
	out := make([]*graph.Node, len(r.Results))
	for i, res := range r.Results {
		out[i] = res.Node
	}
	return out
}

// Elapsed is the wall time from the first node started to the last finished.
func (r *Report) Elapsed() time.Duration {
	var first, last time.Time
	for _, res := range r.Results {
		if res.Started.IsZero() {
			continue
		}
		if first.IsZero() || res.Started.Before(first) {
			first = res.Started
		}
		if end := res.Started.Add(res.Elapsed); end.After(last) {
			last = end
		}
	}
	return last.Sub(first)
}
