package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOutputCapture: the capture keeps everything up to the limit, the
// first and last halves beyond it (joined as joinHeadTail joins them), and
// hashes every byte, however the stream is cut into writes.
func TestOutputCapture(t *testing.T) {
	var long strings.Builder
	for i := range 40 {
		long.WriteString(strings.Repeat(string(rune('a'+i%26)), 3) + "\n")
	}
	for _, tc := range []struct {
		name   string
		stream string
		max    int64
		chunks []int
	}{
		{"empty", "", 16, nil},
		{"shorter than the limit", "one\ntwo\n", 16, []int{1, 100}},
		{"exactly the limit", "0123456\n0123456\n", 16, []int{3}},
		{"longer, one write", long.String(), 32, []int{1 << 20}},
		{"longer, byte by byte", long.String(), 32, []int{1}},
		{"longer, odd writes", long.String(), 33, []int{7, 13, 1, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newOutputCapture(tc.max)
			s, i := tc.stream, 0
			for len(s) > 0 {
				n := len(s)
				if len(tc.chunks) > 0 {
					n = min(n, tc.chunks[i%len(tc.chunks)])
				}
				if k, err := c.Write([]byte(s[:n])); k != n || err != nil {
					t.Fatalf("Write: %d, %v", k, err)
				}
				s, i = s[n:], i+1
			}
			text, size, omitted, sum := c.result()
			want, wantOmitted := tc.stream, int64(0)
			if int64(len(tc.stream)) > tc.max {
				h, tl := tc.stream[:tc.max/2], tc.stream[int64(len(tc.stream))-(tc.max-tc.max/2):]
				want, wantOmitted = joinHeadTail([]byte(h), []byte(tl), int64(len(tc.stream)))
			}
			all := sha256.Sum256([]byte(tc.stream))
			if text != want || size != int64(len(tc.stream)) || omitted != wantOmitted || sum != hex.EncodeToString(all[:]) {
				t.Errorf("got %q size %d omitted %d sum %s\nwant %q size %d omitted %d", text, size, omitted, sum, want, len(tc.stream), wantOmitted)
			}
		})
	}
}

// fakeProcess is a test process: it exits after runFor (or never), and a
// kill ends it unless it ignores kills.
type fakeProcess struct {
	exit    int
	runFor  time.Duration
	ignore  bool
	killed  chan struct{}
	waitErr error
	kills   int
}

func newFake(exit int, runFor time.Duration, ignore bool) *fakeProcess {
	return &fakeProcess{exit: exit, runFor: runFor, ignore: ignore, killed: make(chan struct{}, 1)}
}

func (f *fakeProcess) wait() (int, error) {
	var after <-chan time.Time
	if f.runFor > 0 {
		after = time.After(f.runFor)
	}
	select {
	case <-after:
		return f.exit, f.waitErr
	case <-f.killed:
		return 137, nil
	}
}

func (f *fakeProcess) kill(context.Context) error {
	f.kills++
	if !f.ignore {
		f.killed <- struct{}{}
	}
	return nil
}

// TestSuperviseTests: a process that ends in time gives its exit status; one
// past the limit is killed and timed out; one that does not end when killed
// is given up on after the grace, with an error saying so; a cancelled run
// kills the process and returns the cancellation.
func TestSuperviseTests(t *testing.T) {
	ctx := context.Background()
	t.Run("ends in time", func(t *testing.T) {
		f := newFake(3, 10*time.Millisecond, false)
		exit, timedOut, _, err := superviseTests(ctx, f, time.Minute, time.Minute, time.Now())
		if exit != 3 || timedOut || err != nil || f.kills != 0 {
			t.Errorf("exit %d timedOut %v err %v kills %d", exit, timedOut, err, f.kills)
		}
	})
	t.Run("past the limit", func(t *testing.T) {
		f := newFake(0, 0, false)
		begin := time.Now()
		exit, timedOut, secs, err := superviseTests(ctx, f, 50*time.Millisecond, time.Minute, begin)
		if exit != 137 || !timedOut || err != nil || f.kills != 1 || secs < 0.05 || time.Since(begin) > 10*time.Second {
			t.Errorf("exit %d timedOut %v secs %v err %v kills %d", exit, timedOut, secs, err, f.kills)
		}
	})
	t.Run("does not end when killed", func(t *testing.T) {
		f := newFake(0, 0, true)
		begin := time.Now()
		_, timedOut, _, err := superviseTests(ctx, f, 20*time.Millisecond, 100*time.Millisecond, begin)
		if !timedOut || !errors.Is(err, errGaveUp) || !strings.Contains(err.Error(), "time limit") || time.Since(begin) > 10*time.Second {
			t.Errorf("timedOut %v err %v after %s", timedOut, err, time.Since(begin))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := newFake(0, 0, false)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		_, timedOut, _, err := superviseTests(cctx, f, time.Minute, time.Minute, time.Now())
		if timedOut || !errors.Is(err, context.Canceled) || f.kills != 1 {
			t.Errorf("timedOut %v err %v kills %d", timedOut, err, f.kills)
		}
	})
}

// TestLauncherRefusesOutsideAPidNamespace: the test container's launcher,
// run by this host's bash where it is not pid 1, does not start eval.sh,
// exits launcherRefused and says why on stderr, which launcherRefusal reads.
func TestLauncherRefusesOutsideAPidNamespace(t *testing.T) {
	args := testArgs(Job{UnsetEnv: []string{"OTEL_TRACES_EXPORTER", "bad name"}})
	if strings.Contains(args[2], "bad name") {
		t.Errorf("the launcher unsets a variable that is not a name:\n%s", args[2])
	}
	cmd := exec.Command(args[0], args[1:]...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != launcherRefused {
		t.Fatalf("launcher: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	why := launcherRefusal(ee.ExitCode(), stderr.String())
	if !strings.Contains(why, "not pid 1") || stdout.Len() != 0 {
		t.Errorf("refusal %q, stdout %q", why, stdout.String())
	}
	if launcherRefusal(launcherRefused, "bash: warning: setlocale: LC_ALL: cannot change locale\n") != "" || launcherRefusal(0, stderr.String()) != "" {
		t.Error("a refusal read from a warning, or from a run that exited 0")
	}
}
