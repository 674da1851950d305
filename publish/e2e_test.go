package publish

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/registry"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// swebuildBinary builds ./cmd/swebuild once per test binary. With
// SWEBUILD_TEST_BIN set, that binary is tested instead (e.g. a build of
// another commit, to see which of these tests it fails).
func swebuildBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SWEBUILD_TEST_BIN"); p != "" {
		return p
	}
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
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cleanEnv is the environment for the subprocess: no inherited registry
// credentials, an empty Docker config.
func cleanEnv(t *testing.T, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DOCKER_CONFIG=" + t.TempDir()}
	return append(env, extra...)
}

// result is one finished swebuild run.
type result struct {
	out     []byte
	err     error
	elapsed time.Duration
	maxRSS  int64 // bytes, the process's peak resident set
}

// run runs swebuild with args (prefix, if any, runs it, e.g. `ip netns
// exec NS`), killing it after timeout.
func run(t *testing.T, env []string, timeout time.Duration, prefix []string, args ...string) result {
	t.Helper()
	argv := append(append(append([]string(nil), prefix...), swebuildBinary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := result{out: out.Bytes(), err: err, elapsed: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	if r.elapsed >= timeout {
		t.Errorf("swebuild %s: killed after %v:\n%s", strings.Join(args, " "), timeout, r.out)
	}
	return r
}

// SIGKILL the publisher after some blob uploads completed at the release
// registry, run it again: it completes, and no blob the registry already
// accepted is uploaded a second time (blobs a killed run uploaded into one
// repository are mounted from there into the others).
func TestKillMidPublishThenResumeUploadsNoBlobTwice(t *testing.T) {
	stacktest.Thorough(t)
	needSkopeo(t)
	bin := swebuildBinary(t)
	src := regtest.Start(t, regtest.Options{})
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{Seed: 7, RateSlow: 1, SlowDelay: 40 * time.Millisecond})
	ids := []string{"a__a-1", "b__b-2", "c__c-3", "d__d-4", "e__e-5", "f__f-6", "g__g-7", "h__h-8"}
	f := makeFixture(t, ids, nil, 64<<10, 2)
	f.stage(t, src.Host, src.Host, "staging/build")
	mdPath := f.writeMetadata(t)
	ledger := filepath.Join(f.dir, "ledger.jsonl")
	args := []string{"publish", "--unsigned", "--metadata-file", mdPath, "--repo", px.Host + "/kill", "--ledger", ledger, "-j", "2"}

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
	for killed := false; !killed; {
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
	r := run(t, cleanEnv(t), 5*time.Minute, nil, args...)
	if r.err != nil {
		t.Fatalf("second run: %v\n%s", r.err, r.out)
	}
	after := px.Stats()
	for d, n := range after.CompletedUploads {
		if n > 1 {
			t.Errorf("blob %s uploaded %d times (before kill: %d)", d, n, before.CompletedUploads[d])
		}
	}
	// A blob the registry committed as the kill landed is in the registry
	// without the proxy having seen its 201 (the proxy's request was
	// cancelled with the client's connection): it is not uploaded again
	// and so not counted.
	t.Logf("%d distinct blobs completed at the proxy, fixture has %d", len(after.CompletedUploads), len(f.blobs))
	if len(after.CompletedUploads) > len(f.blobs) {
		t.Errorf("%d distinct blobs uploaded, fixture has %d", len(after.CompletedUploads), len(f.blobs))
	}
	// The manifests are there (the registry refuses a manifest whose blobs
	// it lacks), with the built digests.
	for _, p := range checkPublished(t, reg.Host, "kill", f) {
		t.Error(p)
	}
	if !strings.Contains(string(r.out), "indexes:   ") {
		t.Errorf("no summary in output:\n%s", r.out)
	}
}

// Credentials given to the tool (env or Docker config) never appear in its
// output, debug log or ledger, on success or on failure.
func TestCredentialsNeverPrinted(t *testing.T) {
	stacktest.Thorough(t)
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
	mdPath := f.writeMetadata(t)
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
	publishAs := func(name string, env []string, repo string, wantOK bool) []byte {
		t.Helper()
		ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
		r := run(t, env, 2*time.Minute, nil, "publish", "--unsigned", "--debug", "--metadata-file", mdPath, "--repo", reg.Host+"/"+repo, "--ledger", ledger)
		if (r.err == nil) != wantOK {
			t.Errorf("%s: exit error %v, want ok=%v\n%s", name, r.err, wantOK, r.out)
		}
		led, _ := os.ReadFile(ledger)
		check(name, r.out, led)
		if !bytes.Contains(r.out, []byte("debug: http ")) {
			t.Errorf("%s: debug log missing, so the check proves little:\n%s", name, r.out)
		}
		return r.out
	}
	publishAs("env credentials", cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+user+":"+pass), "envauth", true)
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
	publishAs("docker config credentials", env, "cfgauth", true)
	// Wrong password: refused by the check before anything is written,
	// naming the registry and where the credential came from, and
	// neither password is printed.
	wrong := "Wr0ng-Pa55-x91"
	secrets = append(secrets, wrong, base64.StdEncoding.EncodeToString([]byte(user+":"+wrong)))
	out := publishAs("wrong credentials", cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+user+":"+wrong), "bad", false)
	if !bytes.Contains(out, []byte("registry "+reg.Host+" refused the request (credential for "+reg.Host+" from $SWEBUILD_REGISTRY_AUTH)")) ||
		!bytes.Contains(out, []byte("-> 401")) || bytes.Contains(out, []byte("pushed")) {
		t.Errorf("wrong credentials: no refusal naming the registry, the credential's source and the 401 (or a pushed line):\n%s", out)
	}
	t.Logf("wrong credentials output:\n%s", out)
}

// authSpy is a registry-looking server that asks for Basic credentials and
// records every Authorization header it is sent.
type authSpy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs int
	auth []string
}

func startAuthSpy(t *testing.T) *authSpy {
	s := &authSpy{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs++
		if a := r.Header.Get("Authorization"); a != "" {
			s.auth = append(s.auth, a)
		}
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="spy"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *authSpy) host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

func (s *authSpy) seen() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs, append([]string(nil), s.auth...)
}

// Row 4 of issue 12: an unscoped SWEBUILD_REGISTRY_AUTH=USER:PASSWORD is for
// the --repo registry only. A metadata file whose ref names another server
// that asks for Basic auth (a tampered file harvesting the release
// password) gets nothing, while the release registry gets the password.
func TestUnscopedCredentialsGoOnlyToTheRepoRegistry(t *testing.T) {
	stacktest.Thorough(t)
	user, pass := "release-bot", "R3lease-Pa55-c0ffee"
	reg := regtest.Start(t, regtest.Options{User: user, Password: pass})
	spy := startAuthSpy(t)
	f := makeFixture(t, []string{"a__a-1", "b__b-2"}, map[string]bool{"a__a-1": true, "b__b-2": true}, 4096, 1)
	// a__a-1 is "staged" on the spy; b__b-2 comes from the OCI layout.
	for i := range f.built {
		if im := &f.built[i]; im.InstanceID == "a__a-1" {
			im.Ref, im.OCILayout = spy.host()+"/staging/build@"+im.Digest.String(), ""
		}
	}
	mdPath := f.writeMetadata(t)
	r := run(t, cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+user+":"+pass), 2*time.Minute, nil,
		"publish", "--unsigned", "--metadata-file", mdPath, "--repo", reg.Host+"/release", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	n, auths := spy.seen()
	if n == 0 {
		t.Fatalf("the spy was never asked; the test proves nothing:\n%s", r.out)
	}
	for _, a := range auths {
		t.Errorf("the spy got an Authorization header (%s..., %d bytes)", strings.SplitN(a, " ", 2)[0], len(a))
	}
	if r.err == nil || !bytes.Contains(r.out, []byte("FAILED  image a__a-1")) {
		t.Errorf("a__a-1 from the spy should fail (exit %v):\n%s", r.err, r.out)
	}
	if !bytes.Contains(r.out, []byte("pushed  index b__b-2")) {
		t.Errorf("b__b-2 not published with the credentials:\n%s", r.out)
	}
}

// Row 13 of issue 12: passwords holding '=' (base64 tokens) and ',' are
// accepted, unscoped and scoped.
func TestPasswordsWithEqualsAndCommas(t *testing.T) {
	stacktest.Thorough(t)
	user, pass := "tokenuser", "dG9r,ZW4=x=="
	reg := regtest.Start(t, regtest.Options{User: user, Password: pass})
	f := makeFixture(t, []string{"a__a-1"}, map[string]bool{"a__a-1": true}, 4096, 1)
	mdPath := f.writeMetadata(t)
	for i, auth := range []string{
		user + ":" + pass,
		reg.Host + "=" + user + ":" + pass,
		"ghcr.io=someone:x,y\n" + reg.Host + "=" + user + ":" + pass,
	} {
		r := run(t, cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+auth), 2*time.Minute, nil,
			"publish", "--unsigned", "--metadata-file", mdPath, "--repo", fmt.Sprintf("%s/pw%d", reg.Host, i), "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
		if r.err != nil {
			t.Errorf("form %d: %v\n%s", i, r.err, r.out)
		}
		if bytes.Contains(r.out, []byte(pass)) {
			t.Errorf("form %d: output shows the password", i)
		}
	}
}

// Row 7 of issue 12: two publishes at once on one ledger. The second is
// refused at once with an "in use" error naming the file; the first
// completes; the ledger has no damaged line and later runs start.
func TestTwoPublishesAtOnceOnOneLedger(t *testing.T) {
	stacktest.Thorough(t)
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{Seed: 3, RateSlow: 1, SlowDelay: 30 * time.Millisecond})
	f := makeFixture(t, []string{"a__a-1", "b__b-2", "c__c-3", "d__d-4"}, nil, 16<<10, 2)
	mdPath := f.writeMetadata(t)
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	args := []string{"publish", "--unsigned", "--metadata-file", mdPath, "--repo", px.Host + "/two", "--ledger", ledger, "-j", "2"}
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Go(func() { results[i] = run(t, cleanEnv(t), 3*time.Minute, nil, args...) })
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, r := range results {
		switch {
		case r.err == nil:
			ok++
		case bytes.Contains(r.out, []byte("in use")) && bytes.Contains(r.out, []byte(ledger)):
			refused++
			if r.elapsed > 10*time.Second {
				t.Errorf("run %d refused only after %v", i, r.elapsed)
			}
		default:
			t.Errorf("run %d: %v\n%s", i, r.err, r.out)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("%d runs completed and %d were refused; want one of each", ok, refused)
	}
	l, err := OpenLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Damaged(); len(d) != 0 {
		t.Errorf("%d damaged ledger lines, first: %v", len(d), d[0])
	}
	l.Close()
	if r := run(t, cleanEnv(t), time.Minute, nil, args...); r.err != nil || !bytes.Contains(r.out, []byte("images:    0 pushed")) {
		t.Errorf("a later run: %v\n%s", r.err, r.out)
	}
	for _, p := range checkPublished(t, reg.Host, "two", f) {
		t.Error(p)
	}
}

// An unreachable registry: as the target, publish is refused by the check
// before anything is written (registry.PushCheckBudget's waits: seconds),
// naming the registry, and nothing is said pushed or recorded; as the
// source the images are read from (staging, the metadata file's refs), every
// instance fails within the written retry budget
// (registry.DefaultBudget.MaxWaits: seconds, not minutes): the first
// requests pay the budget once, the rest fail at once.
func TestDeadRegistryGivesUpWithinTheBudget(t *testing.T) {
	stacktest.Thorough(t)
	dead := faultproxy.Refused(t)
	f := makeFixture(t, []string{"a__a-1", "b__b-2", "c__c-3", "d__d-4", "e__e-5"}, nil, 4096, 1)
	mdPath := f.writeMetadata(t)
	ledger := filepath.Join(t.TempDir(), "l.jsonl")
	limit := registry.PushCheckBudget.MaxWaits() + 5*time.Second
	r := run(t, cleanEnv(t), 2*time.Minute, nil, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", dead+"/x", "--ledger", ledger)
	t.Logf("target refused after %v (the check's waits %v):\n%s", r.elapsed.Round(time.Millisecond), registry.PushCheckBudget.MaxWaits(), r.out)
	if r.err == nil {
		t.Fatal("publish to a dead registry succeeded")
	}
	if r.elapsed > limit {
		t.Errorf("refused after %v, the check allows %v", r.elapsed, limit)
	}
	if !bytes.Contains(r.out, []byte("registry "+dead+" does not answer (a registry on this machine: is it running?)")) {
		t.Errorf("the error does not name the dead registry:\n%s", r.out)
	}
	if bytes.Contains(r.out, []byte("pushed")) || bytes.Contains(r.out, []byte("needs the network")) {
		t.Errorf("output says pushed, or the network:\n%s", r.out)
	}
	if b, err := os.ReadFile(ledger); err == nil && len(b) > 0 {
		t.Errorf("the ledger records %d bytes for a publish that never started", len(b))
	}

	// The target answers; the source the records name is dead.
	reg := regtest.Start(t, regtest.Options{})
	for i := range f.built {
		im := &f.built[i]
		im.Ref, im.OCILayout = dead+"/staging/build@"+im.Digest.String(), ""
	}
	mdPath = f.writeMetadata(t)
	limit = registry.DefaultBudget.MaxWaits() + 5*time.Second
	r = run(t, cleanEnv(t), 2*time.Minute, nil, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", reg.Host+"/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("source gave up after %v (budget's waits %v):\n%s", r.elapsed.Round(time.Millisecond), registry.DefaultBudget.MaxWaits(), r.out)
	if r.err == nil {
		t.Fatal("publish from a dead registry succeeded")
	}
	if r.elapsed > limit {
		t.Errorf("gave up after %v, budget allows %v", r.elapsed, limit)
	}
	if n := bytes.Count(r.out, []byte("FAILED  image ")); n != len(f.built) {
		t.Errorf("%d images reported failed, want %d", n, len(f.built))
	}
}

// A registry that accepts connections and never answers (issue 20 row 5:
// 2 min per request, never marked down, 240 s for 13 images). As the target,
// the check refuses it within its budget (two attempts of
// registry.PushCheckBudget.AnswerTimeout); as the source, every instance
// fails within one request's budget: the first requests wait
// registry.DefaultBudget.AnswerTimeout per attempt until MaxElapsed, the
// host is marked down, the rest fail at once.
func TestSilentRegistryGivesUpWithinTheBudget(t *testing.T) {
	stacktest.Thorough(t)
	silent := faultproxy.Silent(t)
	f := makeFixture(t, []string{"a__a-1", "b__b-2", "c__c-3", "d__d-4", "e__e-5", "f__f-6", "g__g-7", "h__h-8", "i__i-9", "j__j-10", "k__k-11", "l__l-12", "m__m-13"}, nil, 4096, 1)
	mdPath := f.writeMetadata(t)
	pc := registry.PushCheckBudget
	limit := pc.MaxElapsed + pc.AnswerTimeout + 5*time.Second
	r := run(t, cleanEnv(t), 5*time.Minute, nil, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", silent+"/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("target refused after %v (the check's budget %v):\n%s", r.elapsed.Round(time.Millisecond), pc.MaxElapsed, r.out)
	if r.err == nil {
		t.Fatal("publish to a silent registry succeeded")
	}
	if r.elapsed > limit {
		t.Errorf("refused after %v, the check allows %v", r.elapsed, limit)
	}
	if !bytes.Contains(r.out, []byte("registry "+silent+" does not answer")) || bytes.Contains(r.out, []byte("pushed")) {
		t.Errorf("the error does not name the silent registry, or says pushed:\n%s", r.out)
	}

	reg := regtest.Start(t, regtest.Options{})
	for i := range f.built {
		im := &f.built[i]
		im.Ref, im.OCILayout = silent+"/staging/build@"+im.Digest.String(), ""
	}
	mdPath = f.writeMetadata(t)
	b := registry.DefaultBudget
	limit = b.MaxElapsed + b.AnswerTimeout + 10*time.Second
	r = run(t, cleanEnv(t), 5*time.Minute, nil, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", reg.Host+"/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("source gave up after %v (budget %v):\n%s", r.elapsed.Round(time.Millisecond), b.MaxElapsed, r.out)
	if r.err == nil {
		t.Fatal("publish from a silent registry succeeded")
	}
	if r.elapsed > limit {
		t.Errorf("gave up after %v, budget allows %v", r.elapsed, limit)
	}
	if n := bytes.Count(r.out, []byte("FAILED  image ")); n != len(f.built) {
		t.Errorf("%d images reported failed, want %d", n, len(f.built))
	}
	if !bytes.Contains(r.out, []byte("sent no answer")) {
		t.Errorf("no error says the registry did not answer")
	}
}

// A layer far larger than the memory the publisher may use (1 GiB of
// random data, so no compression helps) copied from a staging registry to a
// release registry at 20% faults on both: the publisher's peak RSS stays far
// below the layer size, and about what a 16 MiB layer needs. The release
// registry holds the layer's exact bytes.
func TestStreamingAGiBLayerAcrossRegistriesWithBoundedRSS(t *testing.T) {
	stacktest.Thorough(t)
	needSkopeo(t)
	const bound = 160 << 20
	src := regtest.Start(t, regtest.Options{})
	dst := regtest.Start(t, regtest.Options{})
	srcPx := faultproxy.Start(t, src.Host, faultproxy.Config{})
	dstPx := faultproxy.Start(t, dst.Host, faultproxy.Config{})
	rss := map[int64]int64{}
	for i, size := range []int64{16 << 20, 1 << 30} {
		big := stageFileLayerImage(t, src.Host, "staging/big", "big__big-"+fmt.Sprint(i), size)
		big.built[0].Ref = strings.Replace(big.built[0].Ref, src.Host, srcPx.Host, 1)
		mdPath := big.writeMetadata(t)
		for j, px := range []*faultproxy.Proxy{srcPx, dstPx} {
			cfg := faultproxy.Uniform(int64(40+10*i+j), 0.20)
			cfg.SlowDelay = 50 * time.Millisecond
			px.SetConfig(cfg)
			px.ResetStats()
		}
		r := run(t, cleanEnv(t), 10*time.Minute, nil, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", dstPx.Host+"/release", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
		if r.err != nil {
			t.Fatalf("%d MiB layer: %v\n%s", size>>20, r.err, r.out)
		}
		rss[size] = r.maxRSS
		t.Logf("%d MiB layer: peak RSS %.1f MiB, %v; source %s; release %s", size>>20, float64(r.maxRSS)/(1<<20), r.elapsed.Round(time.Millisecond), srcPx.Stats(), dstPx.Stats())
		if faultCount(dstPx.Stats()) == 0 {
			t.Errorf("no faults injected")
		}
		for _, p := range checkPublished(t, dst.Host, "release", big.fixture) {
			t.Error(p)
		}
		if got := blobDigestAt(t, dst.Host, big.built[0].InstanceID, big.layerDigest); got != big.layerDigest {
			t.Errorf("release registry holds %s for the layer, want %s", got, big.layerDigest)
		}
	}
	if r := rss[1<<30]; r == 0 || r > bound {
		t.Errorf("peak RSS %d MiB publishing a 1024 MiB layer; bound %d MiB", r>>20, bound>>20)
	}
	if d := rss[1<<30] - rss[16<<20]; d > 48<<20 {
		t.Errorf("peak RSS grew by %d MiB from a 16 MiB layer to a 1 GiB one", d>>20)
	}
}
