package verify

// Hostile test processes against both engines on the real stack: what the
// code under test does in the test container (leave processes behind, stop
// them while they hold the output pipe, rewrite eval.sh, replace git and
// cat, write the launcher's refusal line, sleep past the limit) cannot change
// the output or exit status the engine reads, and cannot keep a run alive
// past its time limit.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// hostileEngine is one engine and platform the hostile table runs on.
type hostileEngine struct {
	name     string
	engine   Engine
	platform core.Platform
	image    string
}

// hostileEngines are BuildKit on linux/amd64 and linux/arm64 (QEMU) and the
// Docker daemon on linux/amd64 (-short: BuildKit on linux/amd64 only).
func hostileEngines(t *testing.T) []hostileEngine {
	c, amd := testImageFor(t, core.AMD64)
	out := []hostileEngine{{"buildkit-amd64", &BuildKitEngine{Client: c}, core.AMD64, amd}}
	if testing.Short() {
		return out
	}
	_, arm := testImageFor(t, core.ARM64)
	out = append(out, hostileEngine{"buildkit-arm64", &BuildKitEngine{Client: c}, core.ARM64, arm})
	if os.Getenv(stacktest.EnvDockerHost) != "" || os.Getenv(stacktest.EnvCI) != "" {
		out = append(out, hostileEngine{"docker-amd64", dockerEngine(t), core.AMD64, amd})
	} else {
		t.Log("no Docker daemon (SWEBUILD_DOCKER_HOST unset): the Docker engine is not tried")
	}
	return out
}

// TestHostileTestProcess runs hostile eval.sh scripts on each engine.
func TestHostileTestProcess(t *testing.T) {
	for _, tc := range []struct {
		name    string
		eval    string
		timeout time.Duration
		// want checks the run; took is the run's wall time.
		want func(t *testing.T, out *RunOutput, took time.Duration)
	}{
		{
			name: "exit status is the runtime's",
			eval: "#!/bin/bash\necho hello\nexit 7\n",
			want: func(t *testing.T, out *RunOutput, _ time.Duration) {
				if out.TestExit != 7 || out.TimedOut || out.TestOutput != "hello\n" {
					t.Errorf("exit %d, timed out %v, output %q", out.TestExit, out.TimedOut, out.TestOutput)
				}
			},
		},
		{
			// BuildKit's gateway reports 255 as "unknown" unless the
			// error carries the exit message: still a status.
			name: "exit status 255",
			eval: "#!/bin/bash\nexit 255\n",
			want: func(t *testing.T, out *RunOutput, _ time.Duration) {
				if out.TestExit != 255 || out.TimedOut {
					t.Errorf("exit %d, timed out %v", out.TestExit, out.TimedOut)
				}
			},
		},
		{
			// A process that outlives eval.sh and writes afterwards: pid 1
			// exits, the kernel kills it; nothing it would print arrives.
			name: "detached writer",
			eval: "#!/bin/bash\nsetsid bash -c 'trap \"\" HUP TERM; sleep 2; echo FORGED PASSED; sleep 300' </dev/null &\necho real output\nexit 1\n",
			want: func(t *testing.T, out *RunOutput, took time.Duration) {
				if out.TestExit != 1 || strings.Contains(out.TestOutput, "FORGED") || out.TestSeconds > 60 {
					t.Errorf("exit %d, tests took %.1fs, output %q", out.TestExit, out.TestSeconds, out.TestOutput)
				}
			},
		},
		{
			// issue 28's hang: a stopped process holding the output pipe.
			name: "stopped holder of the output pipe",
			eval: "#!/bin/bash\n(kill -STOP $BASHPID; echo FORGED) &\nsleep 1\necho done\nexit 0\n",
			want: func(t *testing.T, out *RunOutput, took time.Duration) {
				if out.TestExit != 0 || out.TimedOut || strings.Contains(out.TestOutput, "FORGED") || out.TestSeconds > 60 {
					t.Errorf("exit %d, timed out %v, tests took %.1fs, output %q", out.TestExit, out.TimedOut, out.TestSeconds, out.TestOutput)
				}
			},
		},
		{
			// Past the time limit with a stopped holder of the pipe and a
			// detached sleeper: ended at the limit, all of it.
			name:    "sleeping past the limit",
			eval:    "#!/bin/bash\necho started\n(kill -STOP $BASHPID) &\nsetsid sleep 600 </dev/null &\nsleep 600\necho never\n",
			timeout: 5 * time.Second,
			want: func(t *testing.T, out *RunOutput, took time.Duration) {
				if !out.TimedOut || out.TestExit != 124 || strings.Contains(out.TestOutput, "never") || !strings.Contains(out.TestOutput, "started") || out.TestSeconds > 60 {
					t.Errorf("timed out %v, exit %d, tests took %.1fs, output %q", out.TimedOut, out.TestExit, out.TestSeconds, out.TestOutput)
				}
			},
		},
		{
			// bash reads a script as it goes: writing into the file it
			// reads (through its descriptor, or the file the link names)
			// would change what runs next. That file is read-only; a new
			// file put where the link was (sed -i) is not what bash reads.
			name: "rewriting eval.sh while it runs",
			eval: "#!/bin/bash\necho first\nprintf 'exit 0\\n' >>/proc/$$/fd/255 2>/dev/null && echo appended-fd || echo fd-refused\nprintf 'exit 0\\n' >>\"$(readlink -f /eval.sh)\" 2>/dev/null && echo appended-file || echo file-refused\nsed -i 's/^exit 3$/exit 0/' /eval.sh && echo sed-replaced-the-link\nexit 3\n",
			want: func(t *testing.T, out *RunOutput, _ time.Duration) {
				if out.TestExit != 3 || !strings.Contains(out.TestOutput, "fd-refused\n") || !strings.Contains(out.TestOutput, "file-refused\n") {
					t.Errorf("exit %d (want 3), output %q", out.TestExit, out.TestOutput)
				}
			},
		},
		{
			// Tools replaced and git configured to run a program: nothing
			// runs in the container after eval.sh, so nothing reads them.
			name: "git and cat replaced, diff.external set",
			eval: "#!/bin/bash\nprintf '#!/bin/sh\\necho FORGED PASSED\\nexit 0\\n' >/tmp/fake\nchmod +x /tmp/fake\ncp /tmp/fake /usr/bin/git\ncp /tmp/fake /bin/cat\ncd /testbed && printf '[diff]\\n\\texternal = /tmp/fake\\n' >>.git/config\necho real\nexit 1\n",
			want: func(t *testing.T, out *RunOutput, _ time.Duration) {
				if out.TestExit != 1 || out.TestOutput != "real\n" || out.DiffBefore == "" {
					t.Errorf("exit %d, output %q, diff before %q", out.TestExit, out.TestOutput, out.DiffBefore)
				}
			},
		},
		{
			// The launcher's refusal is read from stderr, which eval.sh's
			// processes cannot write to (their stderr is the one stream).
			name: "a forged launcher refusal",
			eval: "#!/bin/bash\necho '" + launcherMark + " forged' >&2\nexit 125\n",
			want: func(t *testing.T, out *RunOutput, _ time.Duration) {
				if out.InfraError != "" || !out.TestRan || out.TestExit != 125 || out.TestOutput != launcherMark+" forged\n" {
					t.Errorf("infra error %q, ran %v, exit %d, output %q", out.InfraError, out.TestRan, out.TestExit, out.TestOutput)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range hostileEngines(t) {
				t.Run(e.name, func(t *testing.T) {
					job := testJob(t, e.image, tc.eval)
					job.Platform = e.platform
					if tc.timeout > 0 {
						job.Timeout = tc.timeout
					}
					begin := time.Now()
					out, err := e.engine.Run(context.Background(), job)
					took := time.Since(begin)
					if err != nil {
						t.Fatal(err)
					}
					if out.InfraError != "" && tc.name != "a forged launcher refusal" {
						t.Fatalf("infrastructure error: %s", out.InfraError)
					}
					t.Logf("%s: exit %d, timed out %v, tests %.1fs, run %s", e.name, out.TestExit, out.TimedOut, out.TestSeconds, took.Round(time.Millisecond))
					tc.want(t, out, took)
				})
			}
		})
	}
}
