package publish

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// swebuildBinary builds ./cmd/swebuild once per test binary.
func swebuildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "swebuild-publish-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "swebuild")
		cmd := exec.Command("go", "build", "-o", binPath, "../cmd/swebuild")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ../cmd/swebuild: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cleanEnv is the environment for the subprocess: no inherited registry
// credentials, an empty Docker config.
func cleanEnv(t *testing.T, extra ...string) []string {
	dockerCfg := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DOCKER_CONFIG=" + dockerCfg}
	return append(env, extra...)
}

// SIGKILL the publisher after some blob uploads completed at the proxy, run
// it again: it completes, and no blob the registry already accepted is
// uploaded a second time.
func TestKillMidPublishThenResumeUploadsNoBlobTwice(t *testing.T) {
	needSkopeo(t)
	bin := swebuildBinary(t)
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{Seed: 7, RateSlow: 1, SlowDelay: 40 * time.Millisecond})
	ids := []string{"a__a-1", "b__b-2", "c__c-3", "d__d-4", "e__e-5", "f__f-6", "g__g-7", "h__h-8"}
	f := makeFixture(t, ids, nil, 64<<10, 2)
	mdPath := filepath.Join(f.dir, "metadata.json")
	if err := core.WriteFile(mdPath, f.recs); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(f.dir, "ledger.jsonl")
	args := []string{"publish", "--metadata-file", mdPath, "--repo", px.Host + "/kill", "--ledger", ledger, "-j", "2"}

	var out1 bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv(t)
	cmd.Stdout, cmd.Stderr = &out1, &out1
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	const killAfter = 12
	deadline := time.After(2 * time.Minute)
	killed := false
	for !killed {
		select {
		case err := <-waitErr:
			t.Fatalf("publisher exited before %d uploads (err %v); cannot test the kill:\n%s", killAfter, err, out1.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("fewer than %d uploads after 2 minutes: %s", killAfter, px.Stats())
		case <-time.After(5 * time.Millisecond):
			n := 0
			for _, c := range px.Stats().CompletedUploads {
				n += c
			}
			if n >= killAfter {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
	}
	err := <-waitErr
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("first run was not killed by a signal: %v", err)
	}
	before := px.Stats()
	if len(before.CompletedUploads) >= len(f.blobs) {
		t.Fatalf("all %d blobs were uploaded before the kill; the test proves nothing", len(f.blobs))
	}
	t.Logf("killed after %d of %d blob uploads", len(before.CompletedUploads), len(f.blobs))

	// Second run, with 10% faults on top.
	cfg := faultproxy.Uniform(8, 0.10)
	cfg.SlowDelay = 20 * time.Millisecond
	px.SetConfig(cfg)
	cmd = exec.Command(bin, args...)
	cmd.Env = cleanEnv(t)
	out2, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out2)
	}
	after := px.Stats()
	for d, n := range after.CompletedUploads {
		if n > 1 {
			t.Errorf("blob %s uploaded %d times (before kill: %d)", d, n, before.CompletedUploads[d])
		}
	}
	if len(after.CompletedUploads) != len(f.blobs) {
		t.Errorf("%d distinct blobs uploaded, fixture has %d", len(after.CompletedUploads), len(f.blobs))
	}
	for _, p := range checkPublished(t, reg.Host, "kill", f) {
		t.Error(p)
	}
	if !strings.Contains(string(out2), "indexes:   ") {
		t.Errorf("no summary in output:\n%s", out2)
	}
}

// Credentials given to the tool (env or Docker config) never appear in its
// output, debug log or ledger, on success or on failure.
func TestCredentialsNeverPrinted(t *testing.T) {
	bin := swebuildBinary(t)
	user, pass := "swebuild-user", "S3cr3t-Pa55-7f1c9e"
	reg := regtest.Start(t, regtest.Options{User: user, Password: pass})
	// The registry enforces auth.
	resp, err := http.Get("http://" + reg.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("registry without auth answered %d", resp.StatusCode)
	}
	f := makeFixture(t, []string{"django__django-11099"}, nil, 4096, 1)
	mdPath := filepath.Join(f.dir, "metadata.json")
	if err := core.WriteFile(mdPath, f.recs); err != nil {
		t.Fatal(err)
	}
	secrets := []string{pass, base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), "Authorization"}
	check := func(name string, blobs ...[]byte) {
		t.Helper()
		for _, b := range blobs {
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s: output contains %q", name, s)
				}
			}
		}
	}
	run := func(name string, env []string, repo string, wantOK bool) []byte {
		t.Helper()
		ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
		cmd := exec.Command(bin, "publish", "--debug", "--metadata-file", mdPath, "--repo", reg.Host+"/"+repo, "--ledger", ledger)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Errorf("%s: exit error %v, want ok=%v\n%s", name, err, wantOK, out)
		}
		led, _ := os.ReadFile(ledger)
		check(name, out, led)
		if !bytes.Contains(out, []byte("debug: http ")) {
			t.Errorf("%s: debug log missing, so the check proves little:\n%s", name, out)
		}
		return out
	}
	run("env credentials", cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+user+":"+pass), "envauth", true)
	// Docker config credentials.
	dcfg := t.TempDir()
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	if err := os.WriteFile(filepath.Join(dcfg, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv(t)
	for i, e := range env {
		if strings.HasPrefix(e, "DOCKER_CONFIG=") {
			env[i] = "DOCKER_CONFIG=" + dcfg
		}
	}
	run("docker config credentials", env, "cfgauth", true)
	// Wrong password: fails, and neither password is printed.
	wrong := "Wr0ng-Pa55-x91"
	secrets = append(secrets, wrong, base64.StdEncoding.EncodeToString([]byte(user+":"+wrong)))
	out := run("wrong credentials", cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+user+":"+wrong), "bad", false)
	if !bytes.Contains(out, []byte("FAILED")) || !bytes.Contains(out, []byte("401")) {
		t.Errorf("wrong credentials: no FAILED line naming the 401:\n%s", out)
	}
	t.Logf("wrong credentials output:\n%s", out)
}
