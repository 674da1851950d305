package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/authn"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/solver/pb"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/ctxdigest"
	"github.com/swebuild/swebuild/registry"
)

// How parents reach their children
//
// A child's Dockerfile says FROM <parent key>, an image that is in no registry
// while the graph builds. Each node is built by one gateway build
// (bkclient.Client.Build) that re-solves the node's ancestors through the
// Dockerfile frontend in the same session, parents first, and hands each
// parent's result to the next solve as a frontend input, named in the
// frontend attributes as context:<parent>=input:<name> with the parent's image
// config in input-metadata:<name>. The scheduler only starts a node once its
// parents are built, so re-solving the ancestors costs a cache lookup: every
// vertex is content-addressed in the one daemon, and the child's layers sit on
// exactly the parent's layers (no registry round trip, no image export and
// re-import, no digest pinning). A second run of the same graph is a cache hit
// for every step of every node. The alternatives were worse for this: a
// docker-image:// context needs every parent pushed and pulled back (a
// registry even when not publishing), and an oci-layout:// context needs every
// parent exported to the client and streamed back in.
//
// A parent bound to an existing image (Options.Images) is not solved: the
// child's frontend gets context:<parent>=docker-image://<ref> and pulls it
// for the child's platform itself.
//
// A context or parent that is empty (upstream's base Dockerfiles copy
// nothing; an image FROM scratch with only metadata has no layers) is still
// handed over as a real definition (emptyDir): BuildKit rejects a definition
// with no operations as a nil input.
//
// Contexts hold only what the Dockerfile copies: in-memory files become LLB
// mkfile operations (fixed mode and timestamp, so the same bytes give the same
// cache key and layer), and files on disk are sent from their directory by a
// local source that includes only the named files, through an fsutil filter
// on the client side as well, so no copy of a big rootfs tarball is made and no
// temporary directory is needed.

// epoch is the timestamp of in-memory context files.
func epoch() time.Time { return time.Unix(0, 0).UTC() }

// sharedKey is the session shared key: with a stable key BuildKit reuses the
// previous sync of a local context and only transfers changed files.
const sharedKey = "swebuild"

// remote is one BuildKit daemon.
type remote struct {
	addr string
	c    *bkclient.Client
	// native is the platform of the first worker, when it is one swebuild
	// builds for ("" otherwise: every node is then emulated).
	native core.Platform
	// platforms are the platforms swebuild builds for that some worker
	// runs, natively or under emulation.
	platforms []core.Platform
	// workers lists every platform of every worker, for messages.
	workers []string
}

// connect dials addr and reads its workers' platforms.
func connect(ctx context.Context, addr string, opts ...bkclient.ClientOpt) (*remote, error) {
	c, err := bkclient.New(ctx, addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to BuildKit at %s: %w", addr, err)
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, err := c.ListWorkers(lctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("listing workers of BuildKit at %s: %w", addr, err)
	}
	r := &remote{addr: addr, c: c}
	for _, w := range ws {
		for _, wp := range w.Platforms {
			// BuildKit's API speaks OCI platforms; they become
			// core.Platform here, once.
			s := platforms.Format(platforms.Normalize(wp))
			r.workers = append(r.workers, s)
			p, err := core.ParsePlatform(s)
			if err != nil {
				continue // a platform swebuild does not build for, e.g. linux/amd64/v2
			}
			if len(r.workers) == 1 { // the first worker's first platform is its native one
				r.native = p
			}
			if !slices.Contains(r.platforms, p) {
				r.platforms = append(r.platforms, p)
			}
		}
	}
	if len(r.workers) == 0 {
		c.Close()
		return nil, fmt.Errorf("BuildKit at %s has no worker platforms", addr)
	}
	return r, nil
}

// bkSolver builds nodes on BuildKit daemons, one per platform.
type bkSolver struct {
	byPlatform map[core.Platform]*remote
	fallback   *remote // for other platforms; may be nil
	push       string  // repository to push by digest to; "" = none
	insecure   bool
	cacheFrom  []bkclient.CacheOptionsEntry
	cacheTo    []bkclient.CacheOptionsEntry
	progress   *progressHub
	verify     VerifyFunc
	given      map[string]string // bound images by context name (Options.Images)
	// verifyMounts are added to an instance node's session with verify.
	verifyMounts map[string]fsutil.FS
	auth         func() SessionAuth // one registry login per session; nil = anonymous
	// layout is the OCI layout every image is exported into; nil: none.
	layout *ociLayout
	// noProvenance: pushed images carry no provenance attestation.
	noProvenance bool
	keychain     authn.Keychain // the registry client's credentials; nil = the Docker config
	// reg is the registry client the solver reads pushed images back and
	// attaches SBOMs with: Options.Registry, else one made once from
	// keychain and insecure (client).
	reg     *registry.Client
	regOnce sync.Once
	regErr  error
	// specKeys are the nodes' derived spec keys by ID (for SBOMs);
	// sbomDir receives each SBOM; referrers attach them to pushed images
	// (nil: not attached).
	specKeys  map[string]string
	sbomDir   string
	referrers *attest.Referrers
	attest    AttestFunc    // the verification statement of a verified image (statement.go); nil: none
	builderID string        // the provenance's builder id; "": none
	repro     *Reproducible // nil: BuildKit's defaults (reproducible.go)
	pushed    *pushedRefs   // reproducible pushes: what children start FROM; nil: none
}

func (s *bkSolver) remoteFor(p core.Platform) (*remote, error) {
	r := s.byPlatform[p]
	if r == nil {
		r = s.fallback
	}
	if r == nil {
		return nil, fmt.Errorf("no builder for %s", p)
	}
	if !slices.Contains(r.platforms, p) {
		return nil, fmt.Errorf("builder %s cannot build %s (its workers run %s; is binfmt/QEMU set up?)", r.addr, p, strings.Join(r.workers, ","))
	}
	return r, nil
}

// Solve builds job.Node (re-solving its ancestors from cache) and exports it.
func (s *bkSolver) Solve(ctx context.Context, job Job) (Outcome, error) {
	n := job.Node
	p := n.Platform
	label := n.ID()
	var r *remote
	var err error
	if d := job.daemon; d != nil { // placed by the pool (pool.go)
		r, label = d.remote, n.ID()+" on "+d.name
	} else if r, err = s.remoteFor(p); err != nil {
		return Outcome{}, fmt.Errorf("node %s: %w", n.ID(), err)
	}
	out := Outcome{Builder: r.addr, Native: p == r.native}
	mode := "emulated"
	if out.Native {
		mode = "native"
	}
	fmt.Fprintf(job.Log, "node %s kind=%s builder=%s (%s, worker platforms %s)\n\n", n.ID(), n.Kind, r.addr, mode, strings.Join(r.workers, ","))

	cb := &chainBuild{s: s, job: job, chain: append(slices.Clone(job.Ancestors), n), done: map[string]solvedNode{}}
	cb.from, cb.bound = s.pushed.bindAncestors(cb.chain)
	so, err := cb.prepare()
	if err != nil {
		return out, err
	}
	var auth SessionAuth
	if s.auth != nil {
		auth = s.auth()
		so.Session = append(so.Session, auth)
	}
	build := func(ctx context.Context, gc gateway.Client) (*gateway.Result, error) {
		res, err := cb.solveChain(ctx, gc)
		if err != nil {
			return nil, err
		}
		if cb.captures() {
			cb.capture(ctx, gc)
		}
		if cb.verifies() {
			if err := cb.verify(ctx, gc); err != nil {
				return nil, err
			}
			ok := true
			out.Verified = &ok
		}
		return res, nil
	}

	tr := newTracker()
	ch := make(chan *bkclient.SolveStatus)
	fwd := s.progress.attach(ctx, label, job.Log, tr, ch)
	resp, err := r.c.Build(ctx, so, "swebuild", build, ch)
	if werr := fwd(); werr != nil && err == nil {
		err = fmt.Errorf("writing log: %w", werr)
	}
	out.Cached = tr.cached()
	out.Steps, out.CachedSteps = tr.steps()
	if err != nil {
		raw := err
		err = explain(err, tr)
		// Only BuildKit's own error decides whether a registry refused a
		// login (a RUN step's output may mention a 401 of its own).
		if auth != nil && auth.Explain(raw) != raw {
			err = auth.Explain(err)
		}
		return out, fmt.Errorf("node %s: %w", n.ID(), err)
	}
	if err := s.resolveAttested(ctx, resp, p, &out); err != nil {
		return out, fmt.Errorf("node %s: %w", n.ID(), err)
	}
	if s.push != "" {
		out.Ref = s.push + "@" + out.Digest
		s.pushed.add(n.ID(), out.Ref)
	}
	s.finishSBOM(ctx, cb, resp, &out, job.Log)
	if err := s.finishStatement(ctx, cb, resp, &out, job.Log); err != nil {
		return out, fmt.Errorf("node %s: %w", n.ID(), err)
	}
	if s.layout != nil {
		if err := s.layout.add(n, resp.ExporterResponse, &out); err != nil {
			return out, fmt.Errorf("node %s: %w", n.ID(), err)
		}
		out.OCILayout = s.layout.dir
	}
	return out, nil
}

// chainBuild is one Solve: the node's chain of ancestors (base first) and
// the node, solved in order inside one build session, each through the
// Dockerfile frontend with its parents as named contexts.
type chainBuild struct {
	s        *bkSolver
	job      Job
	chain    []*graph.Node
	contexts []llb.State // build context of chain[i]
	done     map[string]solvedNode
	sbom     *capture // the node's SBOM capture (sbom.go); nil: none
	// from is the first chain member solved; the ones before it are
	// not needed: bound (by key) to the images this build pushed of
	// them (reproducible.go, pushedRefs).
	from  int
	bound map[string]string
}

// solvedNode is a solved chain member: its filesystem (nil for an image
// with no layers) and its image config.
type solvedNode struct {
	ref    gateway.Reference
	config []byte
}

func (cb *chainBuild) node() *graph.Node { return cb.job.Node }

func (cb *chainBuild) verifies() bool {
	return cb.s.verify != nil && cb.node().Kind == graph.KindInstance
}

// prepare makes each chain member's build context and the session's solve
// options: local mounts (context files, and the verify hook's inputs for an
// instance), cache imports and exports, and the image exports (pushed by
// digest, written into the OCI layout, or both; else kept in BuildKit's
// cache).
func (cb *chainBuild) prepare() (bkclient.SolveOpt, error) {
	n := cb.node()
	mounts := map[string]fsutil.FS{}
	cb.contexts = make([]llb.State, len(cb.chain))
	for i, c := range cb.chain {
		st, err := contextState(c, mounts)
		if err != nil {
			return bkclient.SolveOpt{}, fmt.Errorf("node %s: preparing build context of %s: %w", n.ID(), c.ID(), err)
		}
		cb.contexts[i] = st
	}
	if cb.verifies() {
		maps.Copy(mounts, cb.s.verifyMounts)
	}
	so := bkclient.SolveOpt{
		LocalMounts:  mounts,
		SharedKey:    sharedKey,
		CacheImports: cacheImports(cb.s.cacheFrom, cb.chain, cb.job.cacheGroup),
		CacheExports: cacheExports(cb.s.cacheTo, n, cb.job),
		// The platform of the whole build request, which BuildKit's
		// exporter checks the result against (exporter/verifier): without
		// it the request defaults to the daemon's platform, and every
		// arm64 image on an amd64 daemon drew "Requested platform
		// linux/amd64 does not match result platform linux/arm64".
		// (Never nil either: BuildKit's client copies the cache imports'
		// attributes into a clone of this map, and a clone of nil is nil,
		// a panic for any --cache-from.)
		FrontendAttrs: map[string]string{"platform": n.Platform.String()},
	}
	// No name and no push: BuildKit makes the image manifest and reports
	// its digest; the layers stay in its cache.
	attrs := map[string]string{}
	if cb.s.push != "" {
		attrs = map[string]string{
			"name":           cb.s.push,
			"push":           "true",
			"push-by-digest": "true",
			"name-canonical": "true",
		}
		if cb.s.insecure {
			attrs["registry.insecure"] = "true"
		}
	}
	if cb.s.push != "" || cb.s.layout == nil {
		so.Exports = []bkclient.ExportEntry{{Type: bkclient.ExporterImage, Attrs: attrs}}
	}
	if cb.s.layout != nil {
		so.Exports = append(so.Exports, cb.s.layout.export())
	}
	cb.s.provenanceAttrs(&so)
	cb.s.repro.solveOpt(&so)
	return so, nil
}

// solveChain solves every chain member in order and returns the node's
// result (evaluated; the ancestors come from the cache when they can).
func (cb *chainBuild) solveChain(ctx context.Context, gc gateway.Client) (*gateway.Result, error) {
	p := cb.node().Platform
	var last *gateway.Result
	for i, c := range cb.chain {
		if i < cb.from {
			continue
		}
		attrs := map[string]string{
			"platform": p.String(),
			"filename": "Dockerfile",
		}
		cb.s.repro.frontendAttrs(attrs)
		inputs, err := cb.inputs(ctx, gc, i, attrs)
		if err != nil {
			return nil, err
		}
		res, err := gc.Solve(ctx, gateway.SolveRequest{
			Frontend:       "dockerfile.v0",
			FrontendOpt:    attrs,
			FrontendInputs: inputs,
			Evaluate:       c == cb.node(),
		})
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", c.ID(), err)
		}
		ref, err := res.SingleRef()
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", c.ID(), err)
		}
		cfgKey := exptypes.ExporterImageConfigKey
		cfg := res.Metadata[cfgKey]
		if cfg == nil {
			cfgKey += "/" + p.String()
			cfg = res.Metadata[cfgKey]
		}
		if cb.s.repro != nil && cfg != nil {
			// The build-time variables its parent's config carried
			// are not part of the image.
			if cfg, err = cb.s.repro.withoutBuildEnv(cfg); err != nil {
				return nil, fmt.Errorf("building %s: %w", c.ID(), err)
			}
			res.AddMeta(cfgKey, cfg)
		}
		cb.done[c.Key] = solvedNode{ref: ref, config: cfg}
		last = res
	}
	return last, nil
}

// inputs are chain[i]'s frontend inputs: its context, its Dockerfile and
// its parents (solved earlier in the chain, or bound to existing images),
// each named in attrs.
func (cb *chainBuild) inputs(ctx context.Context, gc gateway.Client, i int, attrs map[string]string) (map[string]*pb.Definition, error) {
	c := cb.chain[i]
	ocip := cb.node().Platform.OCI() // BuildKit's own platform type, for LLB
	inputs := map[string]*pb.Definition{}
	ctxDef, err := cb.contexts[i].Marshal(ctx, llb.Platform(ocip))
	if err != nil {
		return nil, fmt.Errorf("marshaling context of %s: %w", c.ID(), err)
	}
	inputs["context"] = ctxDef.ToPB()
	df := llb.Scratch().File(llb.Mkfile("/Dockerfile", 0o644, c.Dockerfile, llb.WithCreatedTime(epoch())), llb.WithCustomName("[internal] swebuild dockerfile "+c.Key))
	dfDef, err := df.Marshal(ctx, llb.Platform(ocip))
	if err != nil {
		return nil, fmt.Errorf("marshaling Dockerfile of %s: %w", c.ID(), err)
	}
	inputs["dockerfile"] = dfDef.ToPB()
	if c.ContextDir != "" {
		// A flat Dockerfile names its base images itself: every bound
		// image is offered to it as a named context (unused ones are
		// ignored by the frontend).
		for cn, ref := range cb.s.given {
			attrs["context:"+cn] = "docker-image://" + ref
		}
	}
	for j, pk := range c.Parents {
		cn, err := contextName(pk)
		if err != nil {
			return nil, err
		}
		ref, ok := givenRef(cb.s.given, pk)
		if !ok {
			ref, ok = cb.bound[pk]
		}
		if ok {
			if cb.s.repro != nil {
				// Reproducible: the image with the build-time
				// variables in its config (reproducible.go).
				def, md, err := cb.s.repro.boundParent(ctx, gc, ref, ocip)
				if err != nil {
					return nil, fmt.Errorf("parent %s of %s: %w", pk, c.ID(), err)
				}
				name := fmt.Sprintf("parent%d", j)
				inputs[name] = def
				attrs["context:"+cn] = "input:" + name
				attrs["input-metadata:"+name] = md
				continue
			}
			// The frontend resolves and pulls it for the platform, as
			// for buildx --build-context.
			attrs["context:"+cn] = "docker-image://" + ref
			continue
		}
		parent, ok := cb.done[pk]
		if !ok {
			return nil, fmt.Errorf("parent %s of %s was not solved first", pk, c.ID())
		}
		name := fmt.Sprintf("parent%d", j)
		// An image with no layers (FROM scratch and only metadata) has no
		// ref: its children start from an empty directory.
		st := emptyDir("[internal] swebuild empty image " + pk)
		if parent.ref != nil {
			if st, err = parent.ref.ToState(); err != nil {
				return nil, fmt.Errorf("parent %s of %s: %w", pk, c.ID(), err)
			}
		}
		def, err := st.Marshal(ctx, llb.Platform(ocip))
		if err != nil {
			return nil, fmt.Errorf("marshaling parent %s of %s: %w", pk, c.ID(), err)
		}
		inputs[name] = def.ToPB()
		attrs["context:"+cn] = "input:" + name
		if parent.config != nil {
			cfg, err := cb.s.repro.withBuildEnv(parent.config)
			if err != nil {
				return nil, fmt.Errorf("image config of %s: %w", pk, err)
			}
			md, err := json.Marshal(map[string][]byte{exptypes.ExporterImageConfigKey: cfg})
			if err != nil {
				return nil, fmt.Errorf("encoding image config of %s: %w", pk, err)
			}
			attrs["input-metadata:"+name] = string(md)
		}
	}
	return inputs, nil
}

// verify runs the verify hook on the solved instance image (its filesystem
// and config, tagged with the fingerprint of its context files); an error
// means the image is not exported.
func (cb *chainBuild) verify(ctx context.Context, gc gateway.Client) error {
	n := cb.node()
	sv := cb.done[n.Key]
	st := emptyDir("[internal] swebuild empty image " + n.Key)
	var err error
	if sv.ref != nil {
		if st, err = sv.ref.ToState(); err != nil {
			return fmt.Errorf("verifying %s: %w", n.ID(), err)
		}
	}
	if sv.config != nil {
		if st, err = st.WithImageConfig(sv.config); err != nil {
			return fmt.Errorf("verifying %s: reading image config: %w", n.ID(), err)
		}
	}
	fp, err := contextFingerprint(cb.chain)
	if err != nil {
		return fmt.Errorf("verifying %s: %w", n.ID(), err)
	}
	st = ctxdigest.With(st, fp)
	fmt.Fprintf(cb.job.Log, "verifying %s on %s\n", n.InstanceID, n.Platform)
	if err := cb.s.verify(ctx, gc, n.InstanceID, n.Platform, st); err != nil {
		return fmt.Errorf("not exported: %w", err)
	}
	return nil
}

// contextState returns the LLB state of n's build context: its in-memory files
// and its files on disk, nothing else. Local mounts it needs are added to
// mounts.
func contextState(n *graph.Node, mounts map[string]fsutil.FS) (llb.State, error) {
	if n.ContextDir != "" {
		return contextDirState(n, mounts)
	}
	var parts []llb.State
	if len(n.Context) > 0 {
		names := slices.Sorted(maps.Keys(n.Context))
		st := llb.Scratch()
		dirs := map[string]bool{}
		for _, name := range names {
			if d := filepath.Dir(name); d != "." && !dirs[d] {
				dirs[d] = true
				st = st.File(llb.Mkdir("/"+d, 0o755, llb.WithParents(true), llb.WithCreatedTime(epoch())))
			}
			st = st.File(llb.Mkfile("/"+name, 0o644, n.Context[name], llb.WithCreatedTime(epoch())),
				llb.WithCustomName("[internal] swebuild context "+n.Key+" "+name))
		}
		parts = append(parts, st)
	}

	// Files on disk, grouped by directory: one local source per directory
	// and file set.
	byDir := map[string][]string{}  // dir -> context names
	resolved := map[string]string{} // context name -> path, symlinks resolved
	for name, p := range n.ContextFiles {
		// A symlink would be sent as a link to a target outside the context.
		p, err := filepath.EvalSymlinks(p)
		if err != nil {
			return llb.State{}, fmt.Errorf("context file %s: %w", name, err)
		}
		resolved[name] = p
		fi, err := os.Stat(p)
		if err != nil {
			return llb.State{}, fmt.Errorf("context file %s: %w", name, err)
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() {
			return llb.State{}, fmt.Errorf("context file %s: %s is not a regular file or directory", name, p)
		}
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], name)
	}
	dirs := slices.Sorted(maps.Keys(byDir))
	for _, dir := range dirs {
		names := byDir[dir]
		sort.Strings(names)
		var bases []string
		renamed := false
		for _, name := range names {
			b := filepath.Base(resolved[name])
			bases = append(bases, b)
			if b != name {
				renamed = true
			}
		}
		h := sha256.Sum256([]byte(dir + "\x00" + strings.Join(bases, "\x00")))
		localName := "swebuild-" + hex.EncodeToString(h[:8])
		if _, ok := mounts[localName]; !ok {
			fs, err := fsutil.NewFS(dir)
			if err != nil {
				return llb.State{}, fmt.Errorf("opening context directory %s: %w", dir, err)
			}
			fs, err = fsutil.NewFilterFS(fs, &fsutil.FilterOpt{IncludePatterns: bases})
			if err != nil {
				return llb.State{}, fmt.Errorf("filtering context directory %s: %w", dir, err)
			}
			mounts[localName] = fs
		}
		local := llb.Local(localName,
			llb.IncludePatterns(bases),
			llb.SharedKeyHint(localName),
			llb.WithCustomName("[internal] swebuild load "+strings.Join(bases, ",")+" from "+dir))
		if !renamed {
			parts = append(parts, local)
			continue
		}
		st := llb.Scratch()
		for i, name := range names {
			st = st.File(llb.Copy(local, "/"+bases[i], "/"+name, &llb.CopyInfo{CreateDestPath: true}),
				llb.WithCustomName("[internal] swebuild context "+n.Key+" "+name))
		}
		parts = append(parts, st)
	}
	switch len(parts) {
	case 0:
		return emptyDir("[internal] swebuild empty context " + n.Key), nil
	case 1:
		return parts[0], nil
	default:
		return llb.Merge(parts, llb.WithCustomName("[internal] swebuild context "+n.Key)), nil
	}
}

// emptyDir is an empty directory as an LLB state that marshals to a real
// definition. llb.Scratch() marshals to a definition with no operations,
// which BuildKit takes for a missing one: handed to the Dockerfile frontend
// as its context it fails the solve with "failed to get frontend inputs:
// invalid nil input definition to definition op" (a base image whose
// Dockerfile copies nothing, as upstream's base does). A mkdir of "/" on
// scratch is a no-op on an empty directory (BuildKit's file op ignores an
// existing directory when no parents are asked for), so the state is the
// same empty directory, with a stable cache key.
func emptyDir(name string) llb.State {
	return llb.Scratch().File(llb.Mkdir("/", 0o755, llb.WithCreatedTime(epoch())), llb.WithCustomName(name))
}

// cacheTag is the suffix a node adds to registry cache refs: each node
// exports its cache to its own tag (one ref written by every node would keep
// only the last), and imports from its own and its ancestors' tags.
func cacheTag(n *graph.Node) string {
	h := sha256.Sum256([]byte(n.ID()))
	return hex.EncodeToString(h[:6])
}

// perNode returns e with a registry ref suffixed by n's cache tag
// (REPO:TAG -> REPO:TAG-<tag>, REPO -> REPO:<tag>); other types unchanged.
func perNode(e bkclient.CacheOptionsEntry, n *graph.Node) bkclient.CacheOptionsEntry {
	return withTag(e, cacheTag(n))
}
