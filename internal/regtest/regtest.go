// Package regtest starts a registry for a test. Start: a real distribution
// registry (Debian's /usr/bin/docker-registry, distribution 2.8): its own
// config in a temp dir, 127.0.0.1 on a free port, filesystem storage in
// t.TempDir(), delete enabled, and optionally htpasswd or token auth; the
// process is stopped when the test ends, and the packaged service config
// (which enables auth) is never used. InProcess: go-containerregistry's
// in-memory registry in the test's process, where the registry is not what
// the test is about.
package regtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/swebuild/swebuild/internal/stacktest"
)

// Binary is the registry executable.
const Binary = "/usr/bin/docker-registry"

// Options configure a test registry.
type Options struct {
	// User and Password, when set, enable htpasswd auth with that one user.
	User, Password string
	// TokenRealm enables distribution's token auth instead, with a token
	// server of the test's on another port of 127.0.0.1 (token.go) that
	// takes User and Password as its Basic login (any login when User is
	// empty).
	TokenRealm bool
}

// Registry is a running test registry.
type Registry struct {
	Host    string // 127.0.0.1:port
	Storage string // filesystem storage root (Start only)
	LogPath string // the registry's log (Start only)
	// Realm is the token server's URL (Options.TokenRealm).
	Realm string
}

// Start starts a registry, or skips the test when the binary is missing
// (fails instead when env CI is set: stacktest.LookPath).
func Start(tb testing.TB, opts Options) *Registry {
	tb.Helper()
	stacktest.LookPath(tb, Binary)
	dir := tb.TempDir()
	storage := filepath.Join(dir, "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		tb.Fatalf("regtest: %v", err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("regtest: finding a free port: %v", err)
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	auth, realm := "", ""
	if opts.TokenRealm {
		var ts *tokenServer
		ts, auth = startTokenServer(tb, dir, opts.User, opts.Password)
		realm = ts.url
	} else if opts.User != "" {
		// An htpasswd line USER:BCRYPT, as `htpasswd -B` writes it;
		// distribution only accepts bcrypt.
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			tb.Fatalf("regtest: hashing the password: %v", err)
		}
		hp := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(hp, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			tb.Fatalf("regtest: writing htpasswd: %v", err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: regtest\n    path: %s\n", hp)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  secret: regtest-secret
%s`, storage, host, auth)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		tb.Fatalf("regtest: writing config: %v", err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatalf("regtest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Binary, "serve", cfgPath)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GOGC=" + RegistryGOGC}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("regtest: starting %s: %v", Binary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		_ = logf.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				break
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			tb.Fatalf("regtest: registry exited early:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			tb.Fatalf("regtest: registry on %s not ready after 15s:\n%s", host, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &Registry{Host: host, Storage: storage, LogPath: logPath, Realm: realm}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// RegistryGOGC is the GOGC the registry runs with. Distribution 2.8 builds
// its URL router (compiling its route regexps) again for every request, so
// most of its CPU per request is garbage collection of that: perf shows
// runtime.scanobject, greyobject and regexp/syntax compile at the top. With
// GOGC=400 its CPU per request halves (ab -k -c 8 on /v2/: 1.25 ms -> 0.69 ms;
// 1,380 -> 2,580 requests/s on two cores). scripts/stack.sh uses the same.
const RegistryGOGC = "400"
