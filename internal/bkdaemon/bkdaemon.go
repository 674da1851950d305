// Package bkdaemon starts extra BuildKit daemons for tests: the cached
// buildkitd of scripts/stack.sh (v0.34.2), each with its own --root state
// directory, its own socket (or tcp address with mutual TLS), its own worker
// platforms, its own OpenTelemetry socket (OTELSocket), and a config that
// lets it push to a plain-HTTP test registry.
// The daemons run in their own process group so a test can kill a daemon
// with everything it started (runc) at once, as a machine dying would, or
// freeze it (SIGSTOP) as a machine hanging would. Every daemon is stopped
// when its test ends. The stack's own buildkitd is never touched.
package bkdaemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// Version is the BuildKit version scripts/stack.sh builds.
const Version = "v0.34.2"

// Options configure one daemon.
type Options struct {
	// Platforms are its oci worker's platforms (--oci-worker-platform),
	// e.g. linux/arm64 alone for a daemon that runs arm64 under QEMU.
	Platforms []core.Platform
	// Registries are plain-HTTP registries it may push to (host:port).
	Registries []string
	// TLS, when set, makes it listen on tcp://127.0.0.1:PORT with these
	// certificates, verifying clients against the CA (mutual TLS).
	TLS *ServerCerts
	// MaxParallelism limits its parallel build steps (0: BuildKit's
	// default); tests keep it small on a shared machine.
	MaxParallelism int
}

// ServerCerts are the files buildkitd's --tlscert, --tlskey and
// --tlscacert take.
type ServerCerts struct{ Cert, Key, CA string }

// Daemon is a running buildkitd.
type Daemon struct {
	Name string
	Addr string // unix:///tmp/.../buildkitd.sock or tcp://127.0.0.1:PORT
	Root string
	Log  string
	// OTELSocket is its tracing socket (--otel-socket-path), in its own
	// directory. buildkitd's default, /run/buildkit/otel-grpc.sock, is shared
	// by every daemon on the host: each one starting replaces it and each one
	// stopping removes it, and the kernel then detaches every mount stacked on
	// the removed socket in the containers other daemons are running, the
	// verify runner's cover of the socket among them (verify.TracingSocket).
	OTELSocket string
	cmd        *exec.Cmd
	done       chan struct{}
}

// Binary returns the cached buildkitd, skipping the test when it is
// missing (failing when CI is set).
func Binary(t testing.TB) string {
	t.Helper()
	cache, err := stacktest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p := stacktest.LookPath(t, filepath.Join(cache, "bin", "buildkit-"+Version, "buildkitd"))
	if os.Geteuid() != 0 {
		t.Skip("bkdaemon: buildkitd's oci worker runs runc rootful: needs root")
	}
	return p
}

// Start starts a daemon named name and waits until it lists its workers.
func Start(t testing.TB, name string, o Options) *Daemon {
	t.Helper()
	bin := Binary(t)
	dir, err := os.MkdirTemp("", "swebuild-bk-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Name: name, Root: filepath.Join(dir, "root"), Log: filepath.Join(dir, "buildkitd.log"),
		OTELSocket: filepath.Join(dir, "otel-grpc.sock"), done: make(chan struct{})}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "root = %q\n\n[worker.oci]\n  enabled = true\n  snapshotter = \"overlayfs\"\n  binary = \"runc\"\n", d.Root)
	if o.MaxParallelism > 0 {
		fmt.Fprintf(&cfg, "  max-parallelism = %d\n", o.MaxParallelism)
	}
	cfg.WriteString("\n[worker.containerd]\n  enabled = false\n")
	for _, r := range o.Registries {
		fmt.Fprintf(&cfg, "\n[registry.%q]\n  http = true\n  insecure = true\n", r)
	}
	cfgPath := filepath.Join(dir, "buildkitd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfgPath, "--otel-socket-path", d.OTELSocket, "--oci-worker=true", "--containerd-worker=false", "--oci-worker-snapshotter=overlayfs"}
	for _, p := range o.Platforms {
		args = append(args, "--oci-worker-platform", p.String())
	}
	if o.TLS != nil {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		d.Addr = fmt.Sprintf("tcp://127.0.0.1:%d", port)
		args = append(args, "--addr", d.Addr, "--tlscert", o.TLS.Cert, "--tlskey", o.TLS.Key, "--tlscacert", o.TLS.CA)
	} else {
		d.Addr = "unix://" + filepath.Join(dir, "buildkitd.sock")
		args = append(args, "--addr", d.Addr)
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		t.Fatal(err)
	}
	// BuildKit mounts a step's snapshots under os.TempDir() (buildkit-mount*,
	// containerd-mount*). A killed daemon leaves them mounted, and they keep
	// its deleted state's disk space in use; under the daemon's own directory
	// the clean-up below finds and detaches them.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("bkdaemon: starting %s: %v", name, err)
	}
	go func() {
		_ = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.Stop()
		// A killed daemon leaves the overlay mounts of the steps it was
		// running; they go before the state directory.
		unmountUnder(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("bkdaemon: removing %s: %v", dir, err)
		}
	})
	if o.TLS != nil {
		return d // the caller's client holds the certificates; WaitReady with them
	}
	if err := d.WaitReady(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return d
}

// WaitReady waits until the daemon lists its workers.
func (d *Daemon) WaitReady(ctx context.Context, timeout time.Duration, opts ...bkclient.ClientOpt) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			log, _ := os.ReadFile(d.Log)
			return fmt.Errorf("bkdaemon: %s exited: %s", d.Name, tail(string(log), 2000))
		default:
		}
		c, err := bkclient.New(ctx, d.Addr, opts...)
		if err == nil {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = c.ListWorkers(lctx)
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	log, _ := os.ReadFile(d.Log)
	return fmt.Errorf("bkdaemon: %s not ready after %s: %v\n%s", d.Name, timeout, last, tail(string(log), 2000))
}

// Kill kills the daemon's whole process group at once (SIGKILL), as a
// machine dying would.
func (d *Daemon) Kill() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}

// Freeze stops the daemon's process group (SIGSTOP): it holds its
// connections but never answers, as a hung machine would. Stop thaws it.
func (d *Daemon) Freeze() { _ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGSTOP) }

// Stop ends the daemon (SIGTERM, SIGKILL after 10 s) and what it started.
func (d *Daemon) Stop() {
	select {
	case <-d.done:
		return
	default:
	}
	pg := -d.cmd.Process.Pid
	_ = syscall.Kill(pg, syscall.SIGCONT)
	_ = syscall.Kill(d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(pg, syscall.SIGKILL)
	<-d.done
}

// Usage returns the daemon's cache records (as `buildctl du -v` lists
// them).
func (d *Daemon) Usage(ctx context.Context, opts ...bkclient.ClientOpt) ([]*bkclient.UsageInfo, error) {
	c, err := bkclient.New(ctx, d.Addr, opts...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.DiskUsage(ctx, bkclient.WithFilter(nil))
}

// CountRecords counts the daemon's cache records whose description
// contains sub: for an exec record ("mount / from exec /bin/sh -c CMD"),
// how many times the daemon ran CMD (a cache hit makes no record).
func (d *Daemon) CountRecords(ctx context.Context, sub string, opts ...bkclient.ClientOpt) (int, error) {
	us, err := d.Usage(ctx, opts...)
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", d.Name, err)
	}
	n := 0
	for _, u := range us {
		if strings.Contains(u.Description, sub) {
			n++
		}
	}
	return n, nil
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(t testing.TB, dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Logf("bkdaemon: %v", err)
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			mounts = append(mounts, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("bkdaemon: unmounting %s: %v", m, err)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Certs are the files of a test PKI: a CA, a server certificate for
// 127.0.0.1 and ServerName, and a client certificate, all signed by the CA.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	ServerName                                       string
}

// Server returns the daemon's side.
func (c *Certs) Server() *ServerCerts {
	return &ServerCerts{Cert: c.ServerCert, Key: c.ServerKey, CA: c.CA}
}

// MakeCerts writes a CA, a server and a client certificate (ECDSA P-256,
// valid for an hour) into dir.
func MakeCerts(dir, serverName string) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "swebuild test CA " + serverName},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{CA: filepath.Join(dir, "ca.pem"), ServerName: serverName}
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certPath, keyPath string, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return "", "", err
		}
		certPath, keyPath = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", kder)
	}
	if c.ServerCert, c.ServerKey, err = leaf(2, "server", x509.ExtKeyUsageServerAuth, []string{serverName}, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = leaf(3, "client", x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return errors.New("bkdaemon: " + err.Error())
	}
	return nil
}
