package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	gatewaypb "github.com/moby/buildkit/frontend/gateway/pb"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/solver/pb"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"
)

// BuildKitEngine runs jobs as BuildKit solves: an exec on the instance image
// with no network, the wrapper's inputs as a read-only mount of a session
// file transfer (InputsMount), a scratch output mount read back through the
// gateway, and the exec never cached (llb.IgnoreCache plus the job's nonce).
// Nothing is exported.
type BuildKitEngine struct {
	Client *bkclient.Client
	// Auth, when set, makes each run's registry login
	// (bkauth.New over registry.Credentials): BuildKit asks it for the
	// credential of the registry the image is pulled from. nil: anonymous.
	Auth func() SessionAuth
}

// SessionAuth answers BuildKit's registry credential requests in one
// session; bkauth.SessionAuth (package registry/bkauth) is one.
type SessionAuth interface {
	session.Attachable
	// Explain adds to a failed run's error which credential each registry
	// got, when the error is a registry refusing a login.
	Explain(error) error
}

// Run pulls job.Image (resolving its config for ENV, WORKDIR and USER), or
// reads it from an OCI layout (LayoutRef), and runs the job on it.
func (e *BuildKitEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	if job.Image == "" {
		return nil, errors.New("running verification: no image reference")
	}
	p := job.Platform
	if p.IsZero() {
		return nil, errors.New("running verification: no platform (want linux/amd64 or linux/arm64)")
	}
	inputs := NewInputFS()
	var out *RunOutput
	start := time.Now()
	so := bkclient.SolveOpt{LocalMounts: map[string]fsutil.FS{InputsMount: inputs}}
	var auth SessionAuth
	if e.Auth != nil {
		auth = e.Auth()
		so.Session = append(so.Session, auth)
	}
	var fromLayout *layoutSource
	if dir, h, ok, err := parseLayoutRef(job.Image); ok {
		if err != nil {
			return nil, fmt.Errorf("running verification: %w", err)
		}
		if fromLayout, err = openLayoutImage(dir, h, &so); err != nil {
			return nil, fmt.Errorf("running verification: %w", err)
		}
	}
	_, err := e.Client.Build(ctx, so, "swebuild-verify", func(ctx context.Context, gc gateway.Client) (*gateway.Result, error) {
		img := llb.Image(job.Image, llb.Platform(p.OCI()), llb.WithMetaResolver(gc), llb.WithCustomName("[verify] "+job.Image))
		if fromLayout != nil {
			var err error
			if img, err = fromLayout.state(p, job.Image); err != nil {
				return nil, fmt.Errorf("reading the image config: %w", err)
			}
		}
		o, err := RunInGateway(ctx, gc, img, job, inputs)
		if err != nil {
			return nil, err
		}
		out = o
		return gateway.NewResult(), nil
	}, nil)
	if err != nil {
		if auth != nil {
			err = auth.Explain(err)
		}
		return nil, fmt.Errorf("running verification of %s (%s): %w", job.Image, job.Platform, err)
	}
	out.Wall = time.Since(start)
	return out, nil
}

// runIDs numbers the runs of this process, for their input directories.
var runIDs atomic.Uint64

// RunInGateway runs job on image inside an existing gateway build session:
// what BuildKitEngine does after resolving the image, and what the builder's
// verify hook calls with the instance image it has just solved (image must
// then carry the image config, e.g. llb.State.WithImageConfig). The
// session's InputsMount must be inputs (Runner.InputMounts). Wall is the
// time of this call.
//
// The prepare container is an exec of the image (its root, with the patch
// applied, is the exec's output); the test container is a gateway container
// on that root, with the run's inputs mounted read-only at inDir, whose one
// process the engine starts with its own writers on stdout and stderr.
func RunInGateway(ctx context.Context, gc gateway.Client, image llb.State, job Job, inputs *InputFS) (*RunOutput, error) {
	start := time.Now()
	p := job.Platform
	if p.IsZero() {
		return nil, errors.New("running verification: no platform (want linux/amd64 or linux/arm64)")
	}
	if inputs == nil {
		return nil, errors.New("running verification: no input file system for the session")
	}
	// BuildKit's tracing variables the image does not set itself go (the
	// image's own ENV stays as upstream runs it).
	for _, v := range tracingEnv {
		if _, set, err := image.GetEnv(ctx, v); err != nil {
			return nil, fmt.Errorf("running verification: reading the image's environment: %w", err)
		} else if !set {
			job.UnsetEnv = append(job.UnsetEnv, v)
		}
	}
	id := fmt.Sprintf("run-%d-%d", os.Getpid(), runIDs.Add(1))
	if err := inputs.add(id, inputFiles(job)); err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	defer inputs.remove(id)

	args := []string{"/bin/bash", inDir + "/" + fileRun}
	opts := []llb.RunOption{
		llb.Args(args),
		llb.AddMount(inDir, inputs.state(id), llb.SourcePath("/"+id), llb.Readonly),
		llb.IgnoreCache,
		llb.WithCustomName("[verify] leak check, apply the patch, git diff"),
	}
	opts = append(opts, coverTracingSocket()...)
	root := image.Network(pb.NetMode_NONE).AddEnv(nonceEnv, job.Nonce).Run(opts...).Root()
	def, err := root.Marshal(ctx, llb.Platform(p.OCI()))
	if err != nil {
		return nil, fmt.Errorf("running verification: marshaling the run: %w", err)
	}
	meta, err := execMeta(def.ToPB(), args)
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, job.prepareTimeout())
	res, err := gc.Solve(pctx, gateway.SolveRequest{Definition: def.ToPB(), Evaluate: true})
	// Read before cancel: after it pctx.Err() is always set, and every
	// failure (a full disk, say) would read as the limit running out.
	timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if ctx.Err() == nil && timedOut {
			return nil, fmt.Errorf("running verification: the prepare container (leak check, patch, diff) ran longer than %s", job.prepareTimeout())
		}
		return nil, fmt.Errorf("running verification: %w", err)
	}
	ref, err := res.SingleRef()
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	files, _, err := readOutputs(ctx, ref, outDir, job.maxOutput())
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	out, ready, err := parseOutputs(job, files)
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	if ready {
		t, err := runTestsInGateway(ctx, gc, ref, inputs.state(id), id, meta, job)
		if err != nil {
			return nil, fmt.Errorf("running verification: %w", err)
		}
		out.addTests(t)
	}
	out.Wall = time.Since(start)
	return out, nil
}

// execMeta is the Meta (environment, working directory, user) of the exec
// op in def whose arguments are args: what BuildKit runs the prepare
// container with, from the image's config, and so what the test container
// gets too (less the nonce).
func execMeta(def *pb.Definition, args []string) (*pb.Meta, error) {
	for _, dt := range def.Def {
		var op pb.Op
		if err := op.UnmarshalVT(dt); err != nil {
			return nil, fmt.Errorf("reading the run's definition: %w", err)
		}
		if e := op.GetExec(); e != nil && e.Meta != nil && slices.Equal(e.Meta.Args, args) {
			return e.Meta, nil
		}
	}
	return nil, errors.New("reading the run's definition: no exec of the prepare script in it")
}

// solveRef solves st (on platform p) and returns its one reference.
func solveRef(ctx context.Context, gc gateway.Client, st llb.State, p llb.ConstraintsOpt) (gateway.Reference, error) {
	def, err := st.Marshal(ctx, p)
	if err != nil {
		return nil, err
	}
	res, err := gc.Solve(ctx, gateway.SolveRequest{Definition: def.ToPB(), Evaluate: true})
	if err != nil {
		return nil, err
	}
	return res.SingleRef()
}

// runTestsInGateway runs the test container: a gateway container on root
// (the prepare exec's output) with the run's input directory id of in
// mounted read-only at inDir and BuildKit's tracing socket covered, no
// network, and one process, testArgs, started with the prepare exec's
// environment (less the nonce), working directory and user.
func runTestsInGateway(ctx context.Context, gc gateway.Client, root gateway.Reference, in llb.State, id string, meta *pb.Meta, job Job) (testResult, error) {
	plat := llb.Platform(job.Platform.OCI())
	inRef, err := solveRef(ctx, gc, in, plat)
	if err != nil {
		return testResult{}, fmt.Errorf("mounting the inputs of the tests: %w", err)
	}
	mounts := []gateway.Mount{
		{Dest: "/", MountType: pb.MountType_BIND, Ref: root},
		{Dest: inDir, MountType: pb.MountType_BIND, Ref: inRef, Selector: "/" + id, Readonly: true},
	}
	for _, c := range tracingCovers {
		ref, err := solveRef(ctx, gc, c.state(), plat)
		if err != nil {
			return testResult{}, fmt.Errorf("covering BuildKit's tracing socket: %w", err)
		}
		mounts = append(mounts, gateway.Mount{Dest: c.dest, MountType: pb.MountType_BIND, Ref: ref, Selector: "/" + c.name, Readonly: true})
	}
	op := job.Platform.OCI()
	ctr, err := gc.NewContainer(ctx, gateway.NewContainerRequest{
		Mounts:   mounts,
		NetMode:  pb.NetMode_NONE,
		Platform: &pb.Platform{OS: op.OS, Architecture: op.Architecture, Variant: op.Variant},
	})
	if err != nil {
		return testResult{}, fmt.Errorf("creating the test container: %w", err)
	}
	defer func() {
		// Released even when ctx is done; Release waits for the
		// container's processes, which the kill has ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		defer cancel()
		_ = ctr.Release(rctx)
	}()
	var env []string
	for _, e := range meta.Env {
		if !strings.HasPrefix(e, nonceEnv+"=") {
			env = append(env, e)
		}
	}
	capture := newOutputCapture(job.maxOutput())
	stderr := &limitedBuffer{max: 64 << 10}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := time.Now()
	proc, err := ctr.Start(sctx, gateway.StartRequest{
		Args: testArgs(job), Env: env, Cwd: meta.Cwd, User: meta.User,
		Stdout: capture, Stderr: stderr,
	})
	if err != nil {
		return testResult{}, fmt.Errorf("starting the tests: %w", err)
	}
	exit, timedOut, secs, err := superviseTests(ctx, gatewayProcess{proc: proc, cancel: cancel}, job.timeout(), killGrace, started)
	if err != nil {
		return testResult{}, fmt.Errorf("running the tests: %w", err)
	}
	return testResult{exit: exit, timedOut: timedOut, seconds: secs, output: capture, refused: launcherRefusal(exit, stderr.String())}, nil
}

// gatewayProcess is a gateway container process as superviseTests sees it.
type gatewayProcess struct {
	proc   gateway.ContainerProcess
	cancel context.CancelFunc
}

func (g gatewayProcess) wait() (int, error) {
	err := g.proc.Wait()
	if err == nil {
		return 0, nil
	}
	var ee *gatewaypb.ExitError
	if errors.As(err, &ee) {
		return int(ee.ExitCode), nil
	}
	return 0, err
}

// kill sends SIGKILL to the process (pid 1 of the container); if the
// container still holds it, the caller cancels the stream and releases the
// container.
func (g gatewayProcess) kill(ctx context.Context) error {
	err := g.proc.Signal(ctx, syscall.SIGKILL)
	go func() {
		<-ctx.Done()
		g.cancel()
	}()
	return err
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := min(len(p), l.max-l.b.Len()); k > 0 {
		l.b.Write(p[:k])
	}
	return len(p), nil
}

func (l *limitedBuffer) Close() error { return nil }

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// coverTracingSocket are two mounts that leave TracingSocket covered by an
// empty read-only file. BuildKit adds its socket mount after the exec's own
// mounts and, for an equal destination, in the place of the earlier one
// (executor/oci dedupMounts); LLB sorts an exec's mounts by destination. So
// a first mount at TracingSocket pulls BuildKit's socket forward to its
// place, and a second at TracingSocket+"/" (another string, the same path
// once runc cleans it) is mounted after it, on top. The two sources must
// differ: BuildKit releases a source mounted twice twice. The wrapper checks
// the result and refuses to run if a socket is still there, and checks again
// before the tests.
//
// The cover is mounted on the socket's own dentry, and removing a file
// detaches every mount stacked on it in all mount namespaces: when the
// socket's path on the host is removed (a buildkitd sharing the default
// --otel-socket-path starting or stopping), the cover goes and BuildKit's
// socket is reachable again. Nothing in an unprivileged container can
// prevent or undo that; the daemons must each have a socket path of their
// own (scripts/stack.sh, internal/bkdaemon; docs/verify.md).
func coverTracingSocket() []llb.RunOption {
	var opts []llb.RunOption
	for _, c := range tracingCovers {
		opts = append(opts, llb.AddMount(c.dest, c.state(), llb.SourcePath("/"+c.name), llb.Readonly))
	}
	return opts
}

// tracingCover is one of the two mounts of coverTracingSocket: an empty
// read-only file name in a scratch state of its own, mounted at dest.
type tracingCover struct{ dest, name string }

var tracingCovers = [...]tracingCover{
	{TracingSocket, "tracing-socket-placeholder"},
	{TracingSocket + "/", "tracing-socket-cover"},
}

func (c tracingCover) state() llb.State {
	return llb.Scratch().File(llb.Mkfile("/"+c.name, 0o444, nil, llb.WithCreatedTime(time.Unix(0, 0).UTC())),
		llb.WithCustomName("[verify] cover BuildKit's tracing socket"))
}

// readChunk is the largest piece read back at once: well below BuildKit's
// 16 MiB gRPC message limit.
const readChunk = 4 << 20

// cutInfo is what the wrapper cut from a capped output.
type cutInfo struct {
	size, omitted int64
}

// cappedOutputs are the outputs the prepare script runs through capped:
// they may come as NAME (the head), NAME.tail and NAME.size.
func cappedOutput(name string) bool {
	if name == "diff_before" {
		return true
	}
	return strings.HasPrefix(name, "apply.") && strings.HasSuffix(name, ".out")
}

// maxWrapperFile bounds the wrapper's own output files (exit codes, clock
// readings, the history listings of the leak check): the listing of a
// repository with 30,000 commits is about 2 MB.
const maxWrapperFile = 64 << 20

// wrapperOutput reports whether name is one of the files the prepare
// script writes; nothing else in the output directory is read.
func wrapperOutput(name string) bool {
	switch name {
	case "wrap_start", "wrap_end", "infra_error", "sandbox_error", "cut_err", "apply_skipped", "prepared":
		return true
	}
	if strings.HasPrefix(name, "leak_") {
		return true
	}
	if rest, ok := strings.CutPrefix(name, "apply."); ok {
		n, ext, _ := strings.Cut(rest, ".")
		if _, err := strconv.Atoi(n); err == nil && ext == "rc" {
			return true
		}
	}
	return false
}

// readOutputs reads the prepare script's output files from directory dir
// of ref. A capped output
// longer than max comes back as its first and last max/2 bytes, cut at line
// ends and joined by a line saying what was left out (the wrapper has cut it
// already; if it could not, only those ranges are read). The wrapper's
// other files are small: one larger than maxWrapperFile is an error. Files
// the wrapper does not write are not read. Reads go in pieces of readChunk,
// concurrently: each is a round trip to the daemon.
func readOutputs(ctx context.Context, ref gateway.Reference, dir string, max int64) (map[string]string, map[string]cutInfo, error) {
	entries, err := ref.ReadDir(ctx, gateway.ReadDirRequest{Path: dir})
	if err != nil {
		return nil, nil, fmt.Errorf("listing outputs: %w", err)
	}
	sizes := map[string]int64{}
	for _, st := range entries {
		if !st.IsDir() {
			sizes[st.Path] = st.Size
		}
	}
	head, tail := max/2, max-max/2
	var mu sync.Mutex
	files := map[string]string{}
	cut := map[string]cutInfo{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for name, size := range sizes {
		if !cappedOutput(name) && !wrapperOutput(name) {
			continue // NAME.tail, NAME.size, or not the wrapper's
		}
		g.Go(func() error {
			tsize, cutByWrapper := sizes[name+".tail"]
			if !cappedOutput(name) && size > maxWrapperFile {
				return fmt.Errorf("output %s is %d bytes, more than the %d-byte limit", name, size, int64(maxWrapperFile))
			}
			if !cappedOutput(name) || !cutByWrapper && size <= head+tail {
				b, err := readRange(gctx, ref, dir, name, 0, size)
				if err != nil {
					return err
				}
				mu.Lock()
				files[name] = string(b)
				mu.Unlock()
				return nil
			}
			var h, t []byte
			var err error
			total := size
			if cutByWrapper {
				// Cut by the wrapper: NAME is the head.
				if total, err = readSize(gctx, ref, dir, name+".size", sizes[name+".size"]); err != nil {
					return err
				}
				if h, err = readRange(gctx, ref, dir, name, 0, min(size, head)); err != nil {
					return err
				}
				if t, err = readRange(gctx, ref, dir, name+".tail", max0(tsize-tail), min(tsize, tail)); err != nil {
					return err
				}
			} else {
				if h, err = readRange(gctx, ref, dir, name, 0, head); err != nil {
					return err
				}
				if t, err = readRange(gctx, ref, dir, name, size-tail, tail); err != nil {
					return err
				}
			}
			text, omitted := joinHeadTail(h, t, total)
			mu.Lock()
			files[name] = text
			cut[name] = cutInfo{size: total, omitted: omitted}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return files, cut, nil
}

func max0(n int64) int64 { return max(n, 0) }

// readSize reads a NAME.size file: the byte count the wrapper wrote.
func readSize(ctx context.Context, ref gateway.Reference, dir, name string, size int64) (int64, error) {
	b, err := readRange(ctx, ref, dir, name, 0, min(size, 64))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %q is not a size", name, b)
	}
	return n, nil
}

// readRange reads n bytes of dir/name from off, in pieces of readChunk.
func readRange(ctx context.Context, ref gateway.Reference, dir, name string, off, n int64) ([]byte, error) {
	buf := make([]byte, 0, n)
	for int64(len(buf)) < n {
		want := min(n-int64(len(buf)), readChunk)
		b, err := ref.ReadFile(ctx, gateway.ReadRequest{Filename: path.Join("/", dir, name), Range: &gateway.FileRange{Offset: int(off) + len(buf), Length: int(want)}})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if len(b) == 0 {
			break
		}
		buf = append(buf, b...)
	}
	return buf, nil
}

// joinHeadTail joins the first bytes h and the last bytes t of an output of
// total bytes: h is cut after its last newline and t starts after its first
// (no half lines, no broken UTF-8 sequence), and a line between them says
// how many bytes were left out. It returns the text and that count.
func joinHeadTail(h, t []byte, total int64) (string, int64) {
	if i := bytes.LastIndexByte(h, '\n'); i >= 0 {
		h = h[:i+1]
	} else {
		h = nil
	}
	if i := bytes.IndexByte(t, '\n'); i >= 0 {
		t = t[i+1:]
	} else {
		t = nil
	}
	omitted := total - int64(len(h)) - int64(len(t))
	var b strings.Builder
	b.Grow(len(h) + len(t) + 200)
	b.Write(h)
	fmt.Fprintf(&b, "[swebuild verify: %d bytes of output left out here: it was %d bytes; the first %d and the last %d are kept]\n", omitted, total, len(h), len(t))
	b.Write(t)
	return b.String(), omitted
}
