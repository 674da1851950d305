package publish

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/stacktest"
)

// `swebuild publish --metadata-file /dev/zero` ends by itself with an error
// naming the size limit, and a FIFO no process writes to leaves the command
// waiting until SIGTERM, which ends it at once (issue 20 row 8: the first
// spun at 100% CPU for ever, and both ignored SIGTERM).
func TestEndlessMetadataFileEndsAndHonoursSIGTERM(t *testing.T) {
	stacktest.Thorough(t)
	r := run(t, cleanEnv(t), 30*time.Second, nil, "publish", "--unsigned", "--metadata-file", "/dev/zero", "--repo", "127.0.0.1:9/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("/dev/zero: %v after %v:\n%s", r.err, r.elapsed.Round(time.Millisecond), r.out)
	if r.err == nil || !bytes.Contains(r.out, []byte("over the size limit")) {
		t.Errorf("/dev/zero: want a failure naming the size limit")
	}

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	cmd := exec.Command(swebuildBinary(t), "publish", "--unsigned", "--metadata-file", fifo, "--repo", "127.0.0.1:9/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	cmd.Env = cleanEnv(t)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer kill.Stop()
	time.Sleep(time.Second)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	el := time.Since(sent)
	t.Logf("FIFO without a writer: %v %v after SIGTERM:\n%s", err, el.Round(time.Millisecond), out.Bytes())
	if err == nil || el > 3*time.Second {
		t.Errorf("FIFO without a writer: exit %v %v after SIGTERM; want a failure within 3 s", err, el)
	}
}
