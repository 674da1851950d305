package verify

// The run half: a patch applied and eval.sh run in containers of an instance
// image, the way upstream's run_instance does, then graded.
//
// A run is two containers of the image, neither with a network:
//
//  1. prepare (prepareScript, the container's only program): the history
//     leak check on /testbed (leak.go) before anything changes; the patch
//     copied to /tmp/patch.diff and applied with each of upstream's
//     GIT_APPLY_CMDS in turn until one exits 0; `git diff` before the tests;
//     /eval.sh made a link to eval.sh in the run's read-only input mount.
//     Its results are files in outDir of its own file system, read when it
//     has ended. Nothing of the patch has run yet: only git and patch,
//     reading the repository as the image has it (a patch that writes
//     .git/ is one that changes the harness: HarnessChanges).
//  2. tests: a new container on the file system the first one left (the
//     patched repository), whose one program (testArgs: a launcher that
//     execs `/bin/bash /eval.sh 2>&1`, so eval.sh is pid 1 of the
//     container's pid namespace) the engine starts with its own writer on
//     the process's output: the test output is what the runtime streams
//     from that process, hashed as it arrives (outputCapture), and the
//     exit status is the runtime's. Nothing runs in that container after
//     eval.sh: when pid 1 exits the kernel kills every other process of
//     the namespace, and at the time limit the engine kills pid 1 itself
//     (superviseTests), which ends them all whatever they do (stopped,
//     detached, holding the output pipe), and releases the container.
//     eval.sh is read from a read-only mount, so the tests cannot rewrite
//     the part bash has not read yet.
//
// The code under test can therefore print (its output is the test output,
// as upstream's), and exit the test command with a status of its choosing
// (eval.sh records it, as upstream's does); it cannot reach a file, a
// process or a stream swebuild reads its results from. docs/verify.md
// lists what a patch can and cannot influence.
//
// What the code under test can reach is only what upstream's container
// gives it: no network, and nothing of BuildKit. BuildKit bind-mounts its
// tracing socket at /dev/otel-grpc.sock into every container it runs and
// names it in OTEL_* variables (and passes TRACEPARENT); the engine covers
// the socket with an empty read-only file, both programs drop the variables
// the image does not set itself, and refuse to run anything (an
// infrastructure error) if the socket is still there (the cover is lost when
// the socket's host path is removed: coverTracingSocket).
//
// Outputs are bounded: the test output, the diff and the patch-apply
// outputs each keep their first and last Job.MaxOutput/2 bytes when longer
// (the prepare container cuts its own files; the test output is cut as it
// streams in).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/swebuild/swebuild/core"
)

// Upstream's log lines (harness/constants and run_evaluation.py).
const (
	ApplyPatchPass = ">>>>> Applied Patch"
	// DockerPatch is where upstream copies the patch in the container.
	DockerPatch = "/tmp/patch.diff"
	// DockerWorkdir is upstream's DOCKER_WORKDIR.
	DockerWorkdir = "/testbed"
	// DefaultTimeout is upstream's default run_evaluation --timeout.
	DefaultTimeout = 1800 * time.Second
)

// DefaultPrepareTimeout is Job.PrepareTimeout's default: the leak check,
// the patch and the diff of a large repository take well under a minute;
// the limit only stops a wedged container.
const DefaultPrepareTimeout = 30 * time.Minute

// killGrace is how long a run may take to end once its time limit has
// passed and its test process was killed, before the engine gives up on it
// (an infrastructure error) and releases its container.
const killGrace = 2 * time.Minute

// GitApplyCmds is upstream v4.1.0's GIT_APPLY_CMDS, tried in order.
var gitApplyCmds = [...]string{
	"git apply --verbose",
	"git apply --verbose --reject",
	"patch --batch --fuzz=5 -p1 -i",
}

// GitApplyCmds returns upstream's patch-apply commands in the order tried.
func GitApplyCmds() []string { return gitApplyCmds[:] }

// Job is one run.
type Job struct {
	// Image is a pullable reference of the instance image, e.g.
	// 127.0.0.1:5000/swebench/sweb.eval.x86_64.x@sha256:... . Engines that
	// are handed the image another way (the builder hook) ignore it.
	Image string
	// Platform is the OCI platform to run, linux/amd64 or linux/arm64.
	Platform core.Platform
	// Patch is written to /tmp/patch.diff and applied.
	Patch string
	// SkipApply runs the tests without applying anything (the empty-patch
	// control run: the image as built, test patch only).
	SkipApply bool
	// EvalScript is the instance's eval.sh.
	EvalScript string
	// BaseCommit is the commit the leak check compares the history with.
	BaseCommit string
	// Timeout limits the test process, eval.sh (default DefaultTimeout).
	Timeout time.Duration
	// PrepareTimeout limits the prepare container (default
	// DefaultPrepareTimeout).
	PrepareTimeout time.Duration
	// Nonce makes every run a new container run (no cache hit).
	Nonce string
	// MaxOutput bounds each captured output (eval.sh's, the diff, the
	// patch-apply commands'): a longer one keeps its first and last
	// MaxOutput/2 bytes (default DefaultMaxOutput).
	MaxOutput int64
	// UnsetEnv are variables both programs remove before anything runs:
	// BuildKit's tracing variables that the image does not set itself.
	UnsetEnv []string
}

// DefaultMaxOutput is Job.MaxOutput's default: 32 MiB, more than ten times
// the largest test output among the reference runs (2.5 MB), small enough
// to grade in well under a second.
const DefaultMaxOutput = 32 << 20

// TracingSocket is where BuildKit mounts its OpenTelemetry socket in every
// container it runs (executor/oci, v0.34).
const TracingSocket = "/dev/otel-grpc.sock"

// tracingEnv are the variables BuildKit adds to a container's environment
// when the image does not set them (executor/oci tracingEnvVars and
// util/tracing/childprocess), and the nonce the runner adds.
var tracingEnv = [...]string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "TRACEPARENT", "TRACESTATE"}

// nonceEnv carries Job.Nonce into the prepare exec, so that its definition
// differs from every other run's; the prepare script drops it, and the test
// container never has it.
const nonceEnv = "SWEBUILD_VERIFY_NONCE"

func (j Job) maxOutput() int64 {
	if j.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return j.MaxOutput
}

func (j Job) timeout() time.Duration {
	if j.Timeout <= 0 {
		return DefaultTimeout
	}
	return j.Timeout
}

func (j Job) prepareTimeout() time.Duration {
	if j.PrepareTimeout <= 0 {
		return DefaultPrepareTimeout
	}
	return j.PrepareTimeout
}

// ApplyAttempt is one patch-apply command run.
type ApplyAttempt struct {
	Cmd      string
	ExitCode int
	Output   string
}

// RunOutput is what a run produced.
type RunOutput struct {
	// InfraError is set when the run could not do its job (no /testbed,
	// no bash, ...): not a verdict on the patch or the tests.
	InfraError string
	Attempts   []ApplyAttempt
	// Applied: an apply command exited 0 (or SkipApply).
	Applied    bool
	DiffBefore string
	// TestOutput is eval.sh's output (stdout and stderr, one stream) as
	// the runtime streamed it; TestRan says eval.sh was started. When the
	// output was longer than Job.MaxOutput, TestOutput is its head and tail
	// joined by a line saying how many bytes were left out
	// (TestOutputOmitted), and TestOutputSize is what eval.sh wrote;
	// TestOutputSHA256 is the sha256 of all of it.
	TestOutput        string
	TestOutputSize    int64
	TestOutputOmitted int64
	TestOutputSHA256  string
	TestRan           bool
	// TestExit is the test process's exit status as the runtime reports it
	// (124 when the engine ended it at the time limit: TimedOut).
	TestExit int
	TimedOut bool
	// TestSeconds is the time from the test process's start to its end,
	// measured by the engine.
	TestSeconds float64
	// Leak is the raw history dump for CheckLeak.
	Leak LeakDump
	// InContainerSeconds is the prepare script's time (leak check, patch
	// apply, diff), measured inside its container, plus TestSeconds.
	InContainerSeconds float64
	// Wall is the time of the whole run, measured by the engine (containers
	// started, inputs copied, prepare, tests, results read back).
	Wall time.Duration
}

// Engine runs a Job in containers with no network and returns its output.
// An error means the run itself failed (an infrastructure error).
type Engine interface {
	Run(ctx context.Context, job Job) (*RunOutput, error)
}

// Files of the prepare script's input and output directories.
const (
	inDir     = "/swebuild-verify/in"
	outDir    = "/swebuild-verify/out"
	fileRun   = "run.sh"
	filePatch = "patch.diff"
	fileEval  = "eval.sh"
	fileBase  = "base_commit"
	fileSkip  = "skip_apply"
	fileKeep  = "keep"
	fileUnset = "unset_env"
)

// evalPath is where eval.sh runs from, as upstream's: a link to the run's
// read-only copy in inDir.
const evalPath = "/eval.sh"

// socketMountsFn is a bash function listing the mountinfo lines at the
// tracing socket's path, for errors (a socket whose host path was removed
// shows as "...//deleted").
const socketMountsFn = `socket_mounts() {
	local l
	while read -r l; do [[ $l == *" ` + TracingSocket + ` "* ]] && printf '%s; ' "$l"; done </proc/self/mountinfo
}
`

// prepareScript is the prepare container's program (bash). It reads its
// inputs from inDir and writes every result to a file in outDir, and always
// exits 0: a failing patch never fails the container.
func prepareScript() string {
	var b strings.Builder
	b.WriteString(`#!/bin/bash
# swebuild verify, prepare: leak check, patch apply, git diff, /eval.sh.
set +e
in=` + inDir + `
out=` + outDir + `
mkdir -p "$out" || exit 0
# Clock readings and inputs with bash builtins, not date/cat processes: under
# QEMU every process started costs ~0.1 s. EPOCHREALTIME (bash >= 5) uses the
# locale's decimal mark.
now() {
	local t=${EPOCHREALTIME:-}
	[ -n "$t" ] || t=$(date +%s.%N)
	printf '%s\n' "${t/,/.}" >"$out/$1"
}
now wrap_start
trap 'now wrap_end' EXIT
read -r base <"$in/` + fileBase + `"
read -r keep_head keep_tail <"$in/` + fileKeep + `"
# Nothing of BuildKit: its tracing variables go, and its tracing socket must
# be covered (the engine mounts a file over it).
while read -r v; do [ -n "$v" ] && unset "$v"; done <"$in/` + fileUnset + `"
` + socketMountsFn + `if [ -S ` + TracingSocket + ` ]; then
	echo "BuildKit's tracing socket ` + TracingSocket + ` is reachable in the container; refusing to run next to it (mounts there: $(socket_mounts))" >"$out/sandbox_error"
	exit 0
fi
# capped NAME CMD...: run CMD with stdout and stderr into $out/NAME; if it
# wrote more than keep_head+keep_tail bytes, keep the first keep_head (NAME)
# and the last keep_tail (NAME.tail) and write the size to NAME.size. The
# size is the shared file offset of fd 4 (O_APPEND), read from /proc with a
# builtin: no process unless the output has to be cut.
capped() {
	local name=$1 rc pos _
	shift
	exec 4>>"$out/$name"
	"$@" >&4 2>&4 4>&-
	rc=$?
	read -r _ pos </proc/self/fdinfo/4
	exec 4>&-
	if [ "${pos:-0}" -gt $((keep_head + keep_tail)) ] 2>/dev/null; then
		echo "$pos" >"$out/$name.size"
		tail -c "$keep_tail" "$out/$name" >"$out/$name.tail" 2>>"$out/cut_err" &&
			truncate -s "$keep_head" "$out/$name" 2>>"$out/cut_err"
	fi
	return $rc
}
# infra_error stays empty unless cd fails (no rm process).
if ! cd ` + DockerWorkdir + ` 2>"$out/infra_error"; then
	[ -s "$out/infra_error" ] || echo "cd failed" >"$out/infra_error"
	exit 0
fi
`)
	b.WriteString(leakScript())
	b.WriteString(`cp "$in/` + filePatch + `" ` + DockerPatch + `
applied=0
if [ -e "$in/` + fileSkip + `" ]; then
	applied=1
	echo skipped >"$out/apply_skipped"
else
	i=0
`)
	for _, c := range gitApplyCmds {
		fmt.Fprintf(&b, "\tif [ $applied = 0 ]; then\n\t\ti=$((i+1))\n\t\tcapped apply.$i.out %s %s\n\t\trc=$?\n\t\techo $rc >\"$out/apply.$i.rc\"\n\t\t[ $rc = 0 ] && applied=1\n\tfi\n", c, DockerPatch)
	}
	// The diff is upstream's `git -c core.fileMode=false diff`, with no
	// program the repository's configuration could name (an external diff,
	// textconv, an fsmonitor hook): the same text for every repository
	// whose configuration is the image's.
	b.WriteString(`fi
if [ $applied = 0 ]; then exit 0; fi
capped diff_before git -c core.fileMode=false -c core.fsmonitor=false diff --no-ext-diff --no-textconv
if ! err=$(ln -sfn "$in/` + fileEval + `" ` + evalPath + ` 2>&1); then
	echo "cannot link ` + evalPath + ` to the run's eval.sh: $err" >"$out/sandbox_error"
	exit 0
fi
echo ok >"$out/prepared"
exit 0
`)
	return b.String()
}

// launcherMark starts what the launcher writes on stderr when it refuses to
// start the tests.
const launcherMark = "swebuild-verify-launcher:"

// launcherRefused is the launcher's exit status when it refuses.
const launcherRefused = 125

// testArgs is the test container's program: a launcher (bash) that checks
// it is pid 1 of its own pid namespace (so that every process the tests
// leave behind dies with eval.sh) and that BuildKit's tracing socket is
// covered, drops BuildKit's tracing variables, and execs
// `/bin/bash /eval.sh` with stderr on stdout: one stream, ordered as
// written. On refusal it writes launcherMark and why on stderr, which
// nothing after the exec can write to, and exits launcherRefused.
func testArgs(job Job) []string {
	var b strings.Builder
	b.WriteString(`if [ "$$" != 1 ]; then echo "` + launcherMark + ` the tests would be pid $$, not pid 1 of a pid namespace of their own: processes they leave behind would outlive them" >&2; exit ` + strconv.Itoa(launcherRefused) + `; fi
` + socketMountsFn + `if [ -S ` + TracingSocket + ` ]; then echo "` + launcherMark + ` BuildKit's tracing socket ` + TracingSocket + ` is reachable in the container; refusing to run code under test next to it (mounts there: $(socket_mounts))" >&2; exit ` + strconv.Itoa(launcherRefused) + `; fi
`)
	for _, v := range job.UnsetEnv {
		if envName(v) {
			b.WriteString("unset -v " + v + "\n")
		}
	}
	b.WriteString("exec /bin/bash " + evalPath + " 2>&1\n")
	return []string{"/bin/bash", "-c", b.String()}
}

// envName reports whether s is a shell variable name.
func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// inputFiles are the files of inDir: the prepare script and its inputs, and
// eval.sh.
func inputFiles(job Job) map[string]inputFile {
	max := job.maxOutput()
	files := map[string]inputFile{
		fileRun:   {data: []byte(prepareScript()), mode: 0o755},
		filePatch: {data: []byte(job.Patch), mode: 0o644},
		fileEval:  {data: []byte(job.EvalScript), mode: 0o644},
		fileBase:  {data: []byte(job.BaseCommit), mode: 0o644},
		fileKeep:  {data: fmt.Appendf(nil, "%d %d\n", max/2, max-max/2), mode: 0o644},
		fileUnset: {data: []byte(strings.Join(append([]string{nonceEnv}, job.UnsetEnv...), "\n") + "\n"), mode: 0o644},
	}
	if job.SkipApply {
		files[fileSkip] = inputFile{mode: 0o644}
	}
	return files
}

// parseOutputs builds a RunOutput from the prepare script's output files
// (name -> content; absent files are missing from the map). ready says the
// tests can run: the patch applied (or none was to be) and /eval.sh is in
// place.
func parseOutputs(job Job, files map[string]string) (out *RunOutput, ready bool, err error) {
	out = &RunOutput{}
	if s, e := seconds(files["wrap_start"], files["wrap_end"]); e {
		out.InContainerSeconds = s
	}
	if e, ok := files["sandbox_error"]; ok && strings.TrimSpace(e) != "" {
		out.InfraError = strings.TrimSpace(e)
		return out, false, nil
	}
	if e, ok := files["infra_error"]; ok && strings.TrimSpace(e) != "" {
		out.InfraError = fmt.Sprintf("cannot enter %s: %s", DockerWorkdir, strings.TrimSpace(e))
		return out, false, nil
	}
	out.Leak = leakDumpFrom(files)
	if _, ok := files["apply_skipped"]; ok {
		out.Applied = true
	}
	for i, c := range gitApplyCmds {
		rcText, ok := files[fmt.Sprintf("apply.%d.rc", i+1)]
		if !ok {
			break
		}
		rc, err := strconv.Atoi(strings.TrimSpace(rcText))
		if err != nil {
			return nil, false, fmt.Errorf("reading exit code of %q: %q is not a number", c, rcText)
		}
		out.Attempts = append(out.Attempts, ApplyAttempt{Cmd: c, ExitCode: rc, Output: files[fmt.Sprintf("apply.%d.out", i+1)]})
		if rc == 0 {
			out.Applied = true
		}
	}
	if !job.SkipApply && len(out.Attempts) == 0 {
		out.InfraError = "the prepare script ran no patch-apply command"
		return out, false, nil
	}
	out.DiffBefore = files["diff_before"]
	if !out.Applied {
		return out, false, nil
	}
	if _, ok := files["prepared"]; !ok {
		out.InfraError = "the prepare script did not finish (the patch applied; no /eval.sh link made)"
		return out, false, nil
	}
	return out, true, nil
}

// testResult is what an engine got of the test process.
type testResult struct {
	// exit is the process's exit status; timedOut: the engine ended it at
	// the time limit.
	exit     int
	timedOut bool
	seconds  float64
	output   *outputCapture
	// refused is the launcher's reason when it refused to start eval.sh.
	refused string
}

// addTests records the test process's result in out.
func (out *RunOutput) addTests(t testResult) {
	if t.refused != "" {
		out.InfraError = t.refused
		return
	}
	out.TestRan = true
	out.TestOutput, out.TestOutputSize, out.TestOutputOmitted, out.TestOutputSHA256 = t.output.result()
	out.TestExit = t.exit
	out.TimedOut = t.timedOut
	if t.timedOut {
		// As timeout(1) reports a command it ended.
		out.TestExit = 124
	}
	out.TestSeconds = t.seconds
	out.InContainerSeconds += t.seconds
}

// launcherRefusal is the launcher's reason for not starting eval.sh, from
// the exit status and what the process wrote on stderr ("" when it started
// eval.sh: nothing but the launcher can write there).
func launcherRefusal(exit int, stderr string) string {
	if exit != launcherRefused {
		return ""
	}
	i := strings.Index(stderr, launcherMark)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(stderr[i+len(launcherMark):])
}

// outputCapture is the writer an engine gives the test process's output
// stream: it hashes every byte as it arrives and keeps the first max/2
// bytes and the last max-max/2 (all of it when it is no longer).
type outputCapture struct {
	mu     sync.Mutex
	sum    hash.Hash
	head   []byte
	ring   []byte // the last bytes, ring[pos:] then ring[:pos] once full
	pos    int
	full   bool
	total  int64
	headN  int
	closed bool
}

func newOutputCapture(max int64) *outputCapture {
	return &outputCapture{sum: sha256.New(), headN: int(max / 2), ring: make([]byte, 0, max-max/2)}
}

func (c *outputCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.sum.Write(p)
	c.total += int64(n)
	if k := min(len(p), c.headN-len(c.head)); k > 0 {
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	size := cap(c.ring)
	if size == 0 {
		return n, nil
	}
	if len(p) >= size {
		p = p[len(p)-size:]
	}
	for len(p) > 0 {
		if !c.full {
			k := min(len(p), size-len(c.ring))
			c.ring = append(c.ring, p[:k]...)
			p = p[k:]
			if len(c.ring) == size {
				c.full, c.pos = true, 0
			}
			continue
		}
		k := copy(c.ring[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % size
	}
	return n, nil
}

// Close marks the stream's end (the engines close their writers when the
// stream ends).
func (c *outputCapture) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// result is the text kept (head and tail joined by joinHeadTail when bytes
// were left out), the size of the whole stream, the bytes left out and the
// stream's sha256.
func (c *outputCapture) result() (text string, size, omitted int64, sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.ring
	if c.full && c.pos > 0 {
		tail = append(append([]byte{}, c.ring[c.pos:]...), c.ring[:c.pos]...)
	}
	sum = hex.EncodeToString(c.sum.Sum(nil))
	if c.total <= int64(len(c.head)+len(tail)) {
		return string(c.head) + string(tail), c.total, 0, sum
	}
	text, omitted = joinHeadTail(c.head, tail, c.total)
	return text, c.total, omitted, sum
}

// testProcess is the test process an engine started, for superviseTests.
type testProcess interface {
	// wait blocks until the process has exited and its output stream has
	// ended, and returns its exit status.
	wait() (int, error)
	// kill kills the process (pid 1 of its container: the kernel ends the
	// rest of the container's processes with it).
	kill(ctx context.Context) error
}

// errGaveUp says a run did not end after its time limit and the kill.
var errGaveUp = errors.New("the run did not end")

// superviseTests waits for p with the time limit limit: the process's exit
// status and its time, or, once the limit has passed, p killed and
// timedOut. When p does not end within grace of the kill (or of ctx
// ending), the error says so (errGaveUp): the caller then releases the
// container, and ends the streams it reads. The engines give killGrace.
func superviseTests(ctx context.Context, p testProcess, limit, grace time.Duration, started time.Time) (exit int, timedOut bool, secs float64, err error) {
	type res struct {
		exit int
		err  error
	}
	done := make(chan res, 1)
	go func() {
		code, err := p.wait()
		done <- res{code, err}
	}()
	timer := time.NewTimer(limit - time.Since(started))
	defer timer.Stop()
	var why error
	select {
	case r := <-done:
		return r.exit, false, time.Since(started).Seconds(), r.err
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		why = context.Cause(ctx)
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	kerr := p.kill(kctx)
	select {
	case r := <-done:
		secs = time.Since(started).Seconds()
		if why != nil {
			return r.exit, false, secs, why
		}
		return r.exit, true, secs, nil
	case <-kctx.Done():
		secs = time.Since(started).Seconds()
		if why == nil {
			why = fmt.Errorf("its time limit of %s passed", limit)
		}
		return 0, timedOut, secs, fmt.Errorf("%w: %v, the test process was killed (%v) and %s later it had still not ended", errGaveUp, why, errOr(kerr), grace)
	}
}

func errOr(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// seconds is end - start for two clock readings (seconds.fraction).
func seconds(start, end string) (float64, bool) {
	a, err1 := strconv.ParseFloat(strings.TrimSpace(start), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(end), 64)
	if err1 != nil || err2 != nil || b < a {
		return 0, false
	}
	return b - a, true
}
