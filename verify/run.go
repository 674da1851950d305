package verify

// The run half: a patch applied and eval.sh run in a container of an
// instance image, the way upstream v4.1.0's run_instance does, then graded.
//
// One container run (an Engine call) does, in a wrapper script:
//  1. the history leak check (leak.go) on /testbed, before anything changes;
//  2. the patch copied to /tmp/patch.diff and applied in /testbed with each of
//     upstream's GIT_APPLY_CMDS in turn until one exits 0;
//  3. `git -c core.fileMode=false diff` before the tests;
//  4. eval.sh copied to /eval.sh and run as `/bin/bash /eval.sh` under
//     `timeout`, stdout and stderr together into test_output.txt, with the
//     clock read (bash's EPOCHREALTIME, else date +%s.%N) just before and after;
//  5. the diff again after the tests.
//
// The script always exits 0, so a failing test or patch never fails the
// container run; exit codes are written to files and come back in RunOutput.
//
// What the code under test can reach is only what upstream's container
// gives it: no network, and nothing of BuildKit. BuildKit bind-mounts its
// tracing socket at /dev/otel-grpc.sock into every container it runs and
// names it in OTEL_* variables (and passes TRACEPARENT); RunInGateway covers
// the socket with an empty read-only file, the wrapper drops the variables
// the image does not set itself, and refuses to run anything (an
// infrastructure error) if the socket is still there.
//
// Outputs are bounded: the test output, the diffs and the patch-apply
// output each keep their first and last Job.MaxOutput/2 bytes when longer,
// cut inside the container (so no huge file is left in BuildKit's cache) and
// read back in pieces below BuildKit's 16 MiB gRPC message limit.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// GitApplyCmds is upstream v4.1.0's GIT_APPLY_CMDS, tried in order.
var gitApplyCmds = [...]string{
	"git apply --verbose",
	"git apply --verbose --reject",
	"patch --batch --fuzz=5 -p1 -i",
}

// GitApplyCmds returns upstream's patch-apply commands in the order tried.
func GitApplyCmds() []string { return gitApplyCmds[:] }

// Job is one container run.
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
	// Timeout limits eval.sh (default DefaultTimeout).
	Timeout time.Duration
	// Nonce makes every run a new container run (no cache hit).
	Nonce string
	// MaxOutput bounds each captured output (eval.sh's, the diffs, the
	// patch-apply commands'): a longer one keeps its first and last
	// MaxOutput/2 bytes (default DefaultMaxOutput).
	MaxOutput int64
	// UnsetEnv are variables the wrapper removes before anything runs:
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

// nonceEnv carries Job.Nonce into the exec, so that its definition differs
// from every other run's; the wrapper drops it.
const nonceEnv = "SWEBUILD_VERIFY_NONCE"

func (j Job) maxOutput() int64 {
	if j.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return j.MaxOutput
}

// ApplyAttempt is one patch-apply command run.
type ApplyAttempt struct {
	Cmd      string
	ExitCode int
	Output   string
}

// RunOutput is what a container run produced.
type RunOutput struct {
	// InfraError is set when the wrapper could not do its job (no /testbed,
	// no bash, ...): not a verdict on the patch or the tests.
	InfraError string
	Attempts   []ApplyAttempt
	// Applied: an apply command exited 0 (or SkipApply).
	Applied    bool
	DiffBefore string
	DiffAfter  string
	// TestOutput is eval.sh's output; TestRan says eval.sh was started.
	// When the output was longer than Job.MaxOutput, TestOutput is its
	// head and tail joined by a line saying how many bytes were left out
	// (TestOutputOmitted), and TestOutputSize is what eval.sh wrote.
	TestOutput        string
	TestOutputSize    int64
	TestOutputOmitted int64
	TestRan           bool
	TestExit          int
	TimedOut          bool
	// TestSeconds is the time eval.sh took, measured inside the container.
	TestSeconds float64
	// Leak is the raw history dump for CheckLeak.
	Leak LeakDump
	// InContainerSeconds is the time the wrapper script took (leak check,
	// patch apply, diffs and tests), measured inside the container.
	InContainerSeconds float64
	// Wall is the time of the whole container run, measured by the engine
	// (container start, copies, apply, tests, reading the results back).
	Wall time.Duration
}

// Engine runs a Job in a container with no network and returns its output.
// An error means the run itself failed (an infrastructure error).
type Engine interface {
	Run(ctx context.Context, job Job) (*RunOutput, error)
}

// Files of the wrapper's input and output directories.
const (
	inDir       = "/swebuild-verify/in"
	outDir      = "/swebuild-verify/out"
	fileRun     = "run.sh"
	filePatch   = "patch.diff"
	fileEval    = "eval.sh"
	fileTimeout = "timeout"
	fileBase    = "base_commit"
	fileSkip    = "skip_apply"
	fileKeep    = "keep"
	fileUnset   = "unset_env"
)

// wrapperScript is the script the container runs (bash). It reads its
// inputs from inDir and writes every result to a file in outDir.
func wrapperScript() string {
	var b strings.Builder
	b.WriteString(`#!/bin/bash
# swebuild verify: leak check, patch apply, eval.sh under timeout.
set +e
in=` + inDir + `
out=` + outDir + `
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
startdir=$PWD
# The run must have a pid namespace of its own, with this script as its
# init: once eval.sh exits, every other process in it is killed before any
# result is collected (testsScript).
if [ "$$" != 1 ]; then
	echo "the run has no pid namespace of its own (the wrapper is pid $$, not 1): processes the tests leave behind could not all be stopped before the results are read" >"$out/sandbox_error"
	exit 0
fi
read -r base <"$in/` + fileBase + `"
read -r tmo <"$in/` + fileTimeout + `"
read -r keep_head keep_tail <"$in/` + fileKeep + `"
# Nothing of BuildKit for the code under test: its tracing variables go, and
# its tracing socket must be covered (RunInGateway mounts a file over it).
while read -r v; do [ -n "$v" ] && unset "$v"; done <"$in/` + fileUnset + `"
if [ -S ` + TracingSocket + ` ]; then
	echo "BuildKit's tracing socket ` + TracingSocket + ` is reachable in the container; refusing to run code under test next to it" >"$out/sandbox_error"
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
	b.WriteString(`fi
if [ $applied = 0 ]; then exit 0; fi
capped diff_before git -c core.fileMode=false diff
cp "$in/` + fileEval + `" /eval.sh
`)
	b.WriteString(testsScript())
	b.WriteString(`cd ` + DockerWorkdir + `
capped diff_after git -c core.fileMode=false diff
exit 0
`)
	return b.String()
}

// captureDir holds the test output while the tests run: outside outDir
// (never read back), in the container's own file system.
const captureDir = "/swebuild-verify/capture"

// testsScript runs eval.sh and collects its results only once every other
// process of the run is gone (upstream issue 20 row 3: code under test can
// leave a process behind, e.g. a conftest.py whose pytest_unconfigure
// double-forks, that rewrites the recorded output and exit status after
// eval.sh ends).
//
//   - eval.sh's stdout and stderr go to a pipe (the wrapper's, no path) read
//     by tee, which writes the file the wrapper created and opened before
//     the tests (it keeps read descriptors on it, not its path) and passes
//     the stream on to sha256sum;
//   - eval.sh's exit status is the wrapper's own wait result, held in its
//     memory (with a dataset script eval.sh exits with the test command's
//     status: exitTrailer);
//   - once eval.sh (timeout) exits, every process but the wrapper (pid 1 of
//     the run's pid namespace) and the capture pipeline is stopped at once
//     (kill -STOP -1, one signal to all) and then killed; the capture is
//     resumed and drains the pipe, whose writers are all gone;
//   - the file's sha256 must equal the stream's, and the files the wrapper
//     wrote before the tests must be unchanged: else the run is an
//     infrastructure error saying what was changed;
//   - only then are the test output, exit status and clock readings written
//     to the output directory, over whatever the tests left at those names,
//     and anything else the tests put there is removed.
func testsScript() string {
	return `# Fingerprints of what the wrapper wrote so far, and the entries it made.
cd "$out" || exit 0
before=(*)
pre=$(sha256sum -- "${before[@]}" 2>&1)
cap=` + captureDir + `
mkdir -p "$cap" && : >"$cap/test_output" && : >"$cap/sum" || {
	echo "cannot make the capture directory $cap" >"$out/sandbox_error"
	exit 0
}
exec 6>"$cap/test_output" 7<"$cap/test_output" 8>"$cap/sum" 9<"$cap/sum"
exec 5> >(exec 7<&- 9<&- 5>&-; tee /dev/fd/6 | sha256sum >&8)
cappid=$!
exec 6>&- 8>&-
cd "$startdir"
t_start=${EPOCHREALTIME:-$(date +%s.%N)}
timeout -k 10 "$tmo" /bin/bash /eval.sh >&5 2>&5 5>&- 7<&- 9<&- &
evalpid=$!
exec 5>&-
wait "$evalpid"
rc=$?
t_end=${EPOCHREALTIME:-$(date +%s.%N)}
# Stop every process of the run but this one at once, then kill all but the
# capture pipeline (the process substitution and its children).
kill -STOP -1 2>/dev/null
survivors=
for pass in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
	survivors=
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$cappid" ] && continue
		line=
		read -r line <"$d/stat" 2>/dev/null || continue
		rest=${line##*) }
		st=${rest%% *}
		rest=${rest#* }
		ppid=${rest%% *}
		[ "$st" = Z ] || [ "$st" = X ] || [ "$ppid" = "$cappid" ] && continue
		kill -KILL "$p" 2>/dev/null && survivors="$survivors $p"
	done
	[ -z "$survivors" ] && break
	sleep 0.05 2>/dev/null
done
kill -CONT "$cappid" 2>/dev/null
for d in /proc/[0-9]*; do
	line=
	read -r line <"$d/stat" 2>/dev/null || continue
	rest=${line##*) }
	rest=${rest#* }
	[ "${rest%% *}" = "$cappid" ] && kill -CONT "${d#/proc/}" 2>/dev/null
done
wait "$cappid" 2>/dev/null
streamsum=
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
	read -r streamsum _ <&9 && break
	sleep 0.1 2>/dev/null
done
cd "$out" || exit 0
post=$(sha256sum -- "${before[@]}" 2>&1)
filesum=$(sha256sum <&7)
filesum=${filesum%% *}
problem=
if [ -n "$survivors" ]; then
	problem="processes of the run survived SIGKILL:$survivors"
elif [ -z "$streamsum" ]; then
	problem="the capture of the test output did not finish"
elif [ "$streamsum" != "$filesum" ]; then
	problem="the test output file was changed while the tests ran (sha256 of what eval.sh wrote $streamsum, of the file $filesum)"
elif [ "$pre" != "$post" ]; then
	problem="files the wrapper wrote before the tests were changed while the tests ran"
fi
# Whatever the tests put in the output directory goes.
for f in * .[!.]* ..?*; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	keep=0
	for k in "${before[@]}"; do [ "$f" = "$k" ] && keep=1 && break; done
	[ $keep = 1 ] || rm -rf -- "$f"
done
if [ -n "$problem" ]; then
	echo "$problem" >"$out/sandbox_error"
	exit 0
fi
capped test_output.txt cat /dev/fd/7
printf '%s\n' "${t_start/,/.}" >"$out/test_start"
printf '%s\n' "${t_end/,/.}" >"$out/test_end"
echo "$rc" >"$out/test_rc"
`
}

// inputFiles are the files the wrapper reads from inDir.
func inputFiles(job Job) map[string]inputFile {
	t := job.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	max := job.maxOutput()
	files := map[string]inputFile{
		fileRun:     {data: []byte(wrapperScript()), mode: 0o755},
		filePatch:   {data: []byte(job.Patch), mode: 0o644},
		fileEval:    {data: []byte(job.EvalScript), mode: 0o644},
		fileTimeout: {data: []byte(strconv.FormatInt(int64((t+time.Second-1)/time.Second), 10)), mode: 0o644},
		fileBase:    {data: []byte(job.BaseCommit), mode: 0o644},
		fileKeep:    {data: fmt.Appendf(nil, "%d %d\n", max/2, max-max/2), mode: 0o644},
		fileUnset:   {data: []byte(strings.Join(append([]string{nonceEnv}, job.UnsetEnv...), "\n") + "\n"), mode: 0o644},
	}
	if job.SkipApply {
		files[fileSkip] = inputFile{mode: 0o644}
	}
	return files
}

// parseOutputs builds a RunOutput from the wrapper's output files (name ->
// content; absent files are missing from the map).
func parseOutputs(job Job, files map[string]string) (*RunOutput, error) {
	out := &RunOutput{}
	if s, e := seconds(files["wrap_start"], files["wrap_end"]); e {
		out.InContainerSeconds = s
	}
	if e, ok := files["sandbox_error"]; ok && strings.TrimSpace(e) != "" {
		out.InfraError = strings.TrimSpace(e)
		return out, nil
	}
	if e, ok := files["infra_error"]; ok && strings.TrimSpace(e) != "" {
		out.InfraError = fmt.Sprintf("cannot enter %s: %s", DockerWorkdir, strings.TrimSpace(e))
		return out, nil
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
			return nil, fmt.Errorf("reading exit code of %q: %q is not a number", c, rcText)
		}
		out.Attempts = append(out.Attempts, ApplyAttempt{Cmd: c, ExitCode: rc, Output: files[fmt.Sprintf("apply.%d.out", i+1)]})
		if rc == 0 {
			out.Applied = true
		}
	}
	if !job.SkipApply && len(out.Attempts) == 0 {
		out.InfraError = "the wrapper ran no patch-apply command"
		return out, nil
	}
	out.DiffBefore = files["diff_before"]
	out.DiffAfter = files["diff_after"]
	rcText, ran := files["test_rc"]
	if !out.Applied {
		return out, nil
	}
	if !ran {
		out.InfraError = "eval.sh did not finish (no exit code written)"
		return out, nil
	}
	out.TestRan = true
	out.TestOutput = files["test_output.txt"]
	rc, err := strconv.Atoi(strings.TrimSpace(rcText))
	if err != nil {
		return nil, fmt.Errorf("reading exit code of eval.sh: %q is not a number", rcText)
	}
	out.TestExit = rc
	if s, ok := seconds(files["test_start"], files["test_end"]); ok {
		out.TestSeconds = s
	}
	// timeout(1) exits 124 when the limit was hit, 137 when it also had
	// to SIGKILL. eval.sh may exit 124 itself (it exits with the test
	// command's status when it records it), so the time must be up too.
	t := job.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	if (rc == 124 || rc == 137) && out.TestSeconds >= t.Seconds()-1 {
		out.TimedOut = true
	}
	return out, nil
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
