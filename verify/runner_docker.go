package verify

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	dockerclient "github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	fstypes "github.com/tonistiigi/fsutil/types"

	"github.com/swebuild/swebuild/core"
)

// DockerEngine runs jobs in containers of a Docker daemon, through the
// Docker Engine API: the same prepare script (prepareScript), input files
// (inputFiles), reading of the prepare outputs (readOutputs, parseOutputs)
// and test program (testArgs) as BuildKitEngine, so both engines grade a run
// alike.
//
// A run: the image is pulled for the job's platform (once per reference and
// platform in the engine's life); a volume gets the inputs; a container of
// the image with no network (NetworkMode none) runs the prepare script; a
// commit of it is the image of the test container, whose output stream the
// engine reads through an attach made before it starts and whose exit
// status is the daemon's; then the containers, the commit and the volume are
// removed.
type DockerEngine struct {
	// Client talks to the daemon (NewDockerEngine).
	Client *dockerclient.Client
	// Progress, when set, receives a line when a pull starts and ends.
	Progress io.Writer

	mu     sync.Mutex
	pulled map[pullKey]string // image id
	locks  map[string]*sync.Mutex
}

// DockerPingTimeout bounds NewDockerEngine's first request: a socket that
// accepts and never answers is an error, not a wait for ever.
const DockerPingTimeout = 20 * time.Second

// NewDockerEngine connects to the Docker daemon at host (unix:///path or
// tcp://host:port; "" is the client's default, unix:///var/run/docker.sock),
// negotiating the API version with it, and checks that it answers within
// DockerPingTimeout.
func NewDockerEngine(ctx context.Context, host string) (*DockerEngine, error) {
	opts := []dockerclient.Opt{dockerclient.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, dockerclient.WithHost(host))
	}
	c, err := dockerclient.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to Docker at %s: %w", dockerHostName(host), err)
	}
	pctx, cancel := context.WithTimeout(ctx, DockerPingTimeout)
	defer cancel()
	if _, err := c.Ping(pctx, dockerclient.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		if ctx.Err() == nil && pctx.Err() != nil {
			return nil, fmt.Errorf("connecting to Docker at %s: no answer within %s", dockerHostName(host), DockerPingTimeout)
		}
		return nil, fmt.Errorf("connecting to Docker at %s: %w", dockerHostName(host), err)
	}
	return &DockerEngine{Client: c}, nil
}

func dockerHostName(host string) string {
	if host == "" {
		return dockerclient.DefaultDockerHost
	}
	return host
}

// Close closes the connection to the daemon.
func (e *DockerEngine) Close() error { return e.Client.Close() }

// Run pulls job.Image for job.Platform and runs the job in a new container
// of it.
func (e *DockerEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	start := time.Now()
	if job.Image == "" {
		return nil, errors.New("running verification: no image reference")
	}
	p := job.Platform
	if p.IsZero() {
		return nil, errors.New("running verification: no platform (want linux/amd64 or linux/arm64)")
	}
	id, err := e.pull(ctx, job.Image, p)
	if err != nil {
		return nil, fmt.Errorf("running verification of %s (%s): %w", job.Image, p, err)
	}
	out, err := e.runContainer(ctx, id, job)
	if err != nil {
		return nil, fmt.Errorf("running verification of %s (%s): %w", job.Image, p, err)
	}
	out.Wall = time.Since(start)
	return out, nil
}

// pullKey is a reference pulled for a platform.
type pullKey struct {
	ref      string
	platform core.Platform
}

// pull pulls ref for p, once per engine, and returns the id of the image
// pulled. Pulls of one reference are serialized: a tag naming an index is
// one local name for every platform, so the id is read right after the pull
// that set it. The image's own platform must be p.
func (e *DockerEngine) pull(ctx context.Context, ref string, p core.Platform) (string, error) {
	key := pullKey{ref, p}
	e.mu.Lock()
	if e.pulled == nil {
		e.pulled = map[pullKey]string{}
		e.locks = map[string]*sync.Mutex{}
	}
	if id, ok := e.pulled[key]; ok {
		e.mu.Unlock()
		return id, nil
	}
	l := e.locks[ref]
	if l == nil {
		l = &sync.Mutex{}
		e.locks[ref] = l
	}
	e.mu.Unlock()

	l.Lock()
	defer l.Unlock()
	e.mu.Lock()
	id, ok := e.pulled[key]
	e.mu.Unlock()
	if ok {
		return id, nil
	}
	begin := time.Now()
	e.progress("verify: pulling %s for %s", ref, p)
	resp, err := e.Client.ImagePull(ctx, ref, dockerclient.ImagePullOptions{Platforms: []ocispec.Platform{p.OCI()}})
	if err != nil {
		return "", fmt.Errorf("pulling: %w", err)
	}
	if err := resp.Wait(ctx); err != nil {
		return "", fmt.Errorf("pulling: %w", err)
	}
	e.progress("verify: pulled %s for %s in %.1fs", ref, p, time.Since(begin).Seconds())
	img, err := e.Client.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspecting the pulled image: %w", err)
	}
	if img.Os != "linux" || img.Architecture != p.GOARCH() {
		return "", fmt.Errorf("the image pulled for %s is %s/%s", p, img.Os, img.Architecture)
	}
	e.mu.Lock()
	e.pulled[key] = img.ID
	e.mu.Unlock()
	return img.ID, nil
}

func (e *DockerEngine) progress(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// runContainer runs job in containers of the image id: the run's inputs go
// into a new volume (through a loader container that is never started),
// mounted read-only at inDir in both containers; the prepare container runs
// prepareScript; a commit of it (its file system: the patched repository and
// /eval.sh) is the image of the test container, attached to before it
// starts, whose one process is testArgs. Every container, the commit and the
// volume are removed, also when the run fails or is cancelled.
func (e *DockerEngine) runContainer(ctx context.Context, id string, job Job) (out *RunOutput, err error) {
	r := &dockerRun{e: e, job: job, labels: map[string]string{"swebuild.verify": job.Nonce}}
	defer func() {
		if cerr := r.removeAll(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := r.loadInputs(ctx, id); err != nil {
		return nil, err
	}

	// Prepare.
	prep, err := r.create(ctx, id, []string{"/bin/bash", inDir + "/" + fileRun})
	if err != nil {
		return nil, err
	}
	code, err := e.runToEnd(ctx, prep, job.prepareTimeout())
	if err != nil {
		return nil, fmt.Errorf("the prepare container (leak check, patch, diff): %w", err)
	}
	if code != 0 {
		// The prepare script always exits 0: bash is missing, or the
		// container was killed.
		return nil, fmt.Errorf("the prepare script exited %d in container %s: %s", code, shortID(prep), e.logTail(ctx, prep))
	}
	files, err := e.copyOutputs(ctx, prep, job)
	if err != nil {
		return nil, err
	}
	out, ready, err := parseOutputs(job, files)
	if err != nil || !ready {
		return out, err
	}

	// The tests, in a container of the prepared file system.
	commit, err := e.Client.ContainerCommit(ctx, prep, dockerclient.ContainerCommitOptions{Comment: "swebuild verify: prepared " + job.Nonce})
	if err != nil {
		return nil, fmt.Errorf("committing the prepared container %s: %w", shortID(prep), err)
	}
	r.cleanup = append(r.cleanup, func(ctx context.Context) error {
		if _, err := e.Client.ImageRemove(ctx, commit.ID, dockerclient.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			return fmt.Errorf("removing image %s: %w", shortID(commit.ID), err)
		}
		return nil
	})
	tc, err := r.create(ctx, commit.ID, testArgs(job))
	if err != nil {
		return nil, err
	}
	t, err := e.runTests(ctx, tc, job)
	if err != nil {
		return nil, err
	}
	out.addTests(t)
	return out, nil
}

// dockerRun is what one run made on the daemon: the inputs volume, its
// containers and commit, each with a clean-up.
type dockerRun struct {
	e       *DockerEngine
	job     Job
	labels  map[string]string
	volume  string
	cleanup []func(context.Context) error
}

// removeAll removes what the run made, newest first, even when ctx is done.
func (r *dockerRun) removeAll(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var first error
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		if err := r.cleanup[i](rctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loadInputs makes the inputs volume and copies the run's inputs into it
// through a container of image that never runs.
func (r *dockerRun) loadInputs(ctx context.Context, image string) error {
	vol, err := r.e.Client.VolumeCreate(ctx, dockerclient.VolumeCreateOptions{Labels: r.labels})
	if err != nil {
		return fmt.Errorf("creating the inputs volume: %w", err)
	}
	r.volume = vol.Volume.Name
	r.cleanup = append(r.cleanup, func(ctx context.Context) error {
		if _, err := r.e.Client.VolumeRemove(ctx, vol.Volume.Name, dockerclient.VolumeRemoveOptions{Force: true}); err != nil {
			return fmt.Errorf("removing volume %s: %w", shortID(vol.Volume.Name), err)
		}
		return nil
	})
	loader, err := r.createWith(ctx, image, []string{"/bin/true"}, false)
	if err != nil {
		return err
	}
	in, err := inputTar(inputFiles(r.job))
	if err != nil {
		return err
	}
	if _, err := r.e.Client.CopyToContainer(ctx, loader, dockerclient.CopyToContainerOptions{DestinationPath: "/", Content: in}); err != nil {
		return fmt.Errorf("copying the inputs into volume %s: %w", shortID(vol.Volume.Name), err)
	}
	return nil
}

// create makes a container of image running cmd with no network and the
// inputs volume mounted read-only at inDir.
func (r *dockerRun) create(ctx context.Context, image string, cmd []string) (string, error) {
	return r.createWith(ctx, image, cmd, true)
}

func (r *dockerRun) createWith(ctx context.Context, image string, cmd []string, readOnly bool) (string, error) {
	plat := r.job.Platform.OCI()
	created, err := r.e.Client.ContainerCreate(ctx, dockerclient.ContainerCreateOptions{
		Config: &container.Config{
			Image: image,
			// The image's ENV, WORKDIR and USER stay, as BuildKit keeps
			// them; its ENTRYPOINT and CMD give way.
			Entrypoint:      cmd[:1],
			Cmd:             cmd[1:],
			NetworkDisabled: true,
			Labels:          r.labels,
			AttachStdout:    true,
			AttachStderr:    true,
		},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: r.volume, Target: inDir, ReadOnly: readOnly}}},
		Platform:   &plat,
	})
	if err != nil {
		return "", fmt.Errorf("creating a container: %w", err)
	}
	cid := created.ID
	r.cleanup = append(r.cleanup, func(ctx context.Context) error {
		if _, err := r.e.Client.ContainerRemove(ctx, cid, dockerclient.ContainerRemoveOptions{Force: true}); err != nil {
			return fmt.Errorf("removing container %s: %w", shortID(cid), err)
		}
		return nil
	})
	return cid, nil
}

// runToEnd starts container cid and waits for it to exit, for at most
// limit (then it is killed and the error says so), and returns its exit
// status.
func (e *DockerEngine) runToEnd(ctx context.Context, cid string, limit time.Duration) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// Waiting for the next exit is registered before the start, so a
	// quick exit is not missed.
	wait := e.Client.ContainerWait(wctx, cid, dockerclient.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := e.Client.ContainerStart(ctx, cid, dockerclient.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("starting container %s: %w", shortID(cid), err)
	}
	select {
	case res := <-wait.Result:
		if res.Error != nil && res.Error.Message != "" {
			return 0, fmt.Errorf("waiting for container %s: %s", shortID(cid), res.Error.Message)
		}
		return int(res.StatusCode), nil
	case werr := <-wait.Error:
		if ctx.Err() == nil && wctx.Err() != nil {
			return 0, fmt.Errorf("container %s ran longer than the %s allowed; killed", shortID(cid), limit)
		}
		return 0, fmt.Errorf("waiting for container %s: %w", shortID(cid), werr)
	}
}

// copyOutputs reads the prepare script's outputs out of the stopped
// container cid (a tar of outDir).
func (e *DockerEngine) copyOutputs(ctx context.Context, cid string, job Job) (map[string]string, error) {
	rc, err := e.Client.CopyFromContainer(ctx, cid, dockerclient.CopyFromContainerOptions{SourcePath: outDir})
	if err != nil {
		return nil, fmt.Errorf("copying the outputs out of container %s: %w", shortID(cid), err)
	}
	defer rc.Content.Close()
	tmp, err := os.MkdirTemp("", "swebuild-verify-out-")
	if err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := extractOutputs(rc.Content, tmp); err != nil {
		return nil, fmt.Errorf("reading the outputs of container %s: %w", shortID(cid), err)
	}
	files, _, err := readOutputs(ctx, dirRef{dir: tmp}, "/", job.maxOutput())
	if err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	return files, nil
}

// runTests attaches to the created test container cid, starts it and reads
// its output stream (stdout into the capture, stderr for the launcher) until
// it exits, or kills it at the time limit.
func (e *DockerEngine) runTests(ctx context.Context, cid string, job Job) (testResult, error) {
	att, err := e.Client.ContainerAttach(ctx, cid, dockerclient.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return testResult{}, fmt.Errorf("attaching to container %s: %w", shortID(cid), err)
	}
	defer att.Close()
	capture := newOutputCapture(job.maxOutput())
	stderr := &limitedBuffer{max: 64 << 10}
	streamed := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(capture, stderr, att.Reader)
		streamed <- err
	}()
	wait := e.Client.ContainerWait(ctx, cid, dockerclient.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	started := time.Now()
	if _, err := e.Client.ContainerStart(ctx, cid, dockerclient.ContainerStartOptions{}); err != nil {
		return testResult{}, fmt.Errorf("starting container %s: %w", shortID(cid), err)
	}
	exit, timedOut, secs, err := superviseTests(ctx, &dockerProcess{e: e, cid: cid, waited: wait, streamed: streamed, att: att}, job.timeout(), killGrace, started)
	if err != nil {
		return testResult{}, fmt.Errorf("running the tests in container %s: %w", shortID(cid), err)
	}
	return testResult{exit: exit, timedOut: timedOut, seconds: secs, output: capture, refused: launcherRefusal(exit, stderr.String())}, nil
}

// dockerProcess is a test container as superviseTests sees it.
type dockerProcess struct {
	e        *DockerEngine
	cid      string
	waited   dockerclient.ContainerWaitResult
	streamed chan error
	att      dockerclient.ContainerAttachResult
}

// streamGrace is how long the output stream may go on after the container
// has exited (the daemon sends what it has buffered, then ends it).
const streamGrace = 30 * time.Second

func (d *dockerProcess) wait() (int, error) {
	var code int
	select {
	case res := <-d.waited.Result:
		if res.Error != nil && res.Error.Message != "" {
			return 0, fmt.Errorf("waiting for the container: %s", res.Error.Message)
		}
		code = int(res.StatusCode)
	case err := <-d.waited.Error:
		return 0, fmt.Errorf("waiting for the container: %w", err)
	}
	select {
	case err := <-d.streamed:
		if err != nil {
			return code, fmt.Errorf("reading the test output: %w", err)
		}
		return code, nil
	case <-time.After(streamGrace):
		d.att.Close()
		return code, fmt.Errorf("the test output stream went on %s after the container exited", streamGrace)
	}
}

// kill kills the container's pid 1 (and so all its processes); the wait
// then sees its exit.
func (d *dockerProcess) kill(ctx context.Context) error {
	_, err := d.e.Client.ContainerKill(ctx, d.cid, dockerclient.ContainerKillOptions{Signal: "KILL"})
	go func() {
		<-ctx.Done()
		d.att.Close()
	}()
	return err
}

// logTail is the last 2 KiB of what the container wrote to stdout and
// stderr, for an error message.
func (e *DockerEngine) logTail(ctx context.Context, cid string) string {
	rc, err := e.Client.ContainerLogs(ctx, cid, dockerclient.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := stdcopy.StdCopy(&b, &b, io.LimitReader(rc, 1<<20)); err != nil && b.Len() == 0 {
		return fmt.Sprintf("(no log: %v)", err)
	}
	s := strings.TrimSpace(b.String())
	if len(s) > 2048 {
		s = "..." + s[len(s)-2048:]
	}
	if s == "" {
		return "(it wrote nothing)"
	}
	return s
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// inputTar is a tar holding inDir with files and an empty outDir, relative
// to / (CopyToContainer's destination).
func inputTar(files map[string]inputFile) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dirs := []string{path.Dir(strings.TrimPrefix(inDir, "/")), strings.TrimPrefix(inDir, "/"), strings.TrimPrefix(outDir, "/")}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, fmt.Errorf("packing the inputs: %w", err)
		}
	}
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		f := files[n]
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(inDir, "/") + "/" + n, Mode: int64(f.mode.Perm()), Size: int64(len(f.data)), ModTime: epoch}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("packing the inputs: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("packing the inputs: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("packing the inputs: %w", err)
	}
	return &buf, nil
}

// extractOutputs writes the regular files directly inside the output
// directory's tar (its entries are out/NAME) that the wrapper writes, or
// that go with a capped output (NAME.tail, NAME.size), into dir. Anything
// else (files the code under test left there, links, subdirectories) is
// skipped unread.
func extractOutputs(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		rel := strings.TrimPrefix(path.Clean(h.Name), "/")
		top, name, ok := strings.Cut(rel, "/")
		if !ok || top != path.Base(outDir) || strings.Contains(name, "/") || !outputName(name) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
}

// outputName reports whether readOutputs may read name: a wrapper file, a
// capped output, or the tail or size of one.
func outputName(name string) bool {
	if cappedOutput(name) || wrapperOutput(name) {
		return true
	}
	for _, suf := range []string{".tail", ".size"} {
		if base, ok := strings.CutSuffix(name, suf); ok && cappedOutput(base) {
			return true
		}
	}
	return false
}

// dirRef is a directory of output files seen as the gateway reference
// readOutputs reads the BuildKit engine's outputs from: the one reading of
// outputs (sizes, head and tail, limits) serves both engines.
type dirRef struct{ dir string }

var _ gateway.Reference = dirRef{}

func (d dirRef) ToState() (llb.State, error) {
	return llb.State{}, errors.New("a local output directory has no LLB state")
}

func (d dirRef) Evaluate(context.Context) error { return nil }

func (d dirRef) ReadDir(_ context.Context, req gateway.ReadDirRequest) ([]*fstypes.Stat, error) {
	if req.Path != "/" && req.Path != "" {
		return nil, fmt.Errorf("reading %s: only the top directory is read", req.Path)
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var out []*fstypes.Stat
	for _, en := range entries {
		st, err := d.stat(en.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (d dirRef) StatFile(_ context.Context, req gateway.StatRequest) (*fstypes.Stat, error) {
	return d.stat(strings.TrimPrefix(req.Path, "/"))
}

func (d dirRef) stat(name string) (*fstypes.Stat, error) {
	if !fs.ValidPath(name) || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q is not a file of the output directory", name)
	}
	fi, err := os.Lstat(filepath.Join(d.dir, name))
	if err != nil {
		return nil, err
	}
	return &fstypes.Stat{Path: name, Mode: uint32(fi.Mode()), Size: fi.Size()}, nil
}

func (d dirRef) ReadFile(_ context.Context, req gateway.ReadRequest) ([]byte, error) {
	name := strings.TrimPrefix(req.Filename, "/")
	if !fs.ValidPath(name) || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q is not a file of the output directory", req.Filename)
	}
	f, err := os.Open(filepath.Join(d.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if req.Range == nil {
		return io.ReadAll(f)
	}
	b := make([]byte, req.Range.Length)
	n, err := f.ReadAt(b, int64(req.Range.Offset))
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n], nil
}
