package publish

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
)

// fileLayer is a layer whose bytes are a file, read anew at each
// Compressed() call. Its media type is an uncompressed tar, so its digest
// is its diff id (the content is random bytes: registries do not look).
type fileLayer struct {
	path string
	size int64
	h    v1.Hash
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.h, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.h, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// bigFixture is one x86-only instance image with one large layer.
type bigFixture struct {
	*fixture
	layerDigest string
}

// stageFileLayerImage writes size random bytes to a file, makes an image of
// them and pushes it by digest to host/repo (go-containerregistry directly,
// streaming from the file).
func stageFileLayerImage(t *testing.T, host, repo, id string, size int64) *bigFixture {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "layer.bin")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	if _, err := io.Copy(io.MultiWriter(fh, sum), io.LimitReader(mrand.NewChaCha8(seed), size)); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	fl := &fileLayer{path: path, size: size, h: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum.Sum(nil))}}
	layer, err := partial.CompressedToLayer(fl)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	dg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/" + repo + "@" + dg.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("staging the %d MiB image: %v", size>>20, err)
	}
	yes := true
	f := &fixture{dir: dir, built: []core.Image{{
		Kind: core.KindInstance, InstanceID: id, Platform: core.AMD64, Status: core.StatusBuilt,
		Digest: digest.Digest(dg.String()), Ref: ref.String(), SpecKey: "spec-" + id, Verified: &yes,
	}}, images: map[string]v1.Image{id + " linux/amd64": img}}
	return &bigFixture{fixture: f, layerDigest: fl.h.String()}
}

// blobDigestAt reads blob d back from the per-arch repository of id under
// host/release and returns the sha256 of what it got.
func blobDigestAt(t *testing.T, host, id, d string) string {
	t.Helper()
	repo := strings.TrimPrefix(manifests.Namer{Repo: host + "/release"}.ArchRepo("x86_64", id), host+"/")
	resp, err := http.Get("http://" + host + "/v2/" + repo + "/blobs/" + d)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	s := sha256.New()
	if _, err := io.Copy(s, resp.Body); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(s.Sum(nil))
}

// The test binary doubles as a helper process (run inside a network
// namespace): with helperEnv set, TestMain runs helperMain instead.
const helperEnv = "SWEBUILD_PUBLISH_TEST_HELPER"

// helperMain serves plain HTTP on $ADDR like a registry that wants Basic
// credentials (401 and WWW-Authenticate: Basic on everything) and appends
// one line per request to $LOG: method, path, whether it carried an
// Authorization header. It writes $LOG.ready once listening.
func helperMain() int {
	if os.Getenv(helperEnv) != "plain-http-registry" {
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		return 2
	}
	logPath := os.Getenv("LOG")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", os.Getenv("ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintf(lf, "%s %s auth=%v\n", r.Method, r.URL.Path, r.Header.Get("Authorization") != "")
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
		w.WriteHeader(http.StatusUnauthorized)
	})}
	if err := os.WriteFile(logPath+".ready", nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = srv.Serve(ln)
	return 0
}

// netns creates a network namespace of the test's own with a veth pair
// carrying 10.213.x.1/24 and 10.213.x.2/24 (iproute2), and returns its
// name and the first address. It skips (fails under CI) without root or
// ip(8).
func netns(t *testing.T) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("network namespace tests need root")
		}
		t.Skip("network namespace tests need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ip missing (apt-get install -y iproute2; scripts/test-deps.sh)")
		}
		t.Skip("ip missing (apt-get install -y iproute2; scripts/test-deps.sh)")
	}
	n, err := rand.Int(rand.Reader, big.NewInt(250))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("swbpub-%d-%d", os.Getpid(), n.Int64())
	addr := fmt.Sprintf("10.213.%d.1", n.Int64()+1)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ip("-n", ns, "link", "set", "lo", "up")
	ip("-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	ip("-n", ns, "addr", "add", addr+"/24", "dev", "v0")
	ip("-n", ns, "addr", "add", strings.TrimSuffix(addr, ".1")+".2/24", "dev", "v1")
	ip("-n", ns, "link", "set", "v0", "up")
	ip("-n", ns, "link", "set", "v1", "up")
	return ns, addr
}

// Row 5 of issue 12: a registry on a private address (10.213.x.1, inside a
// network namespace of the test's own) that speaks plain HTTP and asks for
// Basic credentials. Without --insecure-registry naming it, swebuild sends
// it nothing in clear text (go-containerregistry alone falls back to HTTP
// for 10/8, 172.16/12 and 192.168/16 and sends the password); named, it is
// reached, which shows the first run was not refused for another reason.
func TestPlainHTTPToAPrivateAddressIsRefused(t *testing.T) {
	stacktest.Thorough(t)
	ns, ip := netns(t)
	addr := ip + ":5000"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "requests.log")
	srv := exec.Command("ip", "netns", "exec", ns, exe)
	srv.Env = append(os.Environ(), helperEnv+"=plain-http-registry", "ADDR="+addr, "LOG="+logPath)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(logPath + ".ready"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper registry not ready:\n%s", srvOut.String())
		}
	}
	requests := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	f := makeFixture(t, []string{"a__a-1"}, map[string]bool{"a__a-1": true}, 4096, 1)
	mdPath := f.writeMetadata(t)
	env := cleanEnv(t, "SWEBUILD_REGISTRY_AUTH="+addr+"=private-user:Pr1vate-Pa55")
	inNS := []string{"ip", "netns", "exec", ns}

	r := run(t, env, 2*time.Minute, inNS, "publish", "--unsigned", "--metadata-file", mdPath, "--repo", addr+"/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("refused in %v:\n%s", r.elapsed.Round(time.Millisecond), r.out)
	if r.err == nil {
		t.Errorf("publish to a plain-HTTP private registry succeeded:\n%s", r.out)
	}
	if got := requests(); got != "" {
		t.Errorf("plain HTTP requests reached %s without --insecure-registry:\n%s", addr, got)
	}
	if !bytes.Contains(r.out, []byte("plain HTTP to "+addr+" refused")) {
		t.Errorf("the error does not say plain HTTP was refused:\n%s", r.out)
	}

	r = run(t, env, 2*time.Minute, inNS, "publish", "--unsigned", "--insecure-registry", addr, "--metadata-file", mdPath, "--repo", addr+"/x", "--ledger", filepath.Join(t.TempDir(), "l.jsonl"))
	t.Logf("named insecure, in %v:\n%s", r.elapsed.Round(time.Millisecond), r.out)
	if got := requests(); !strings.Contains(got, "auth=true") {
		t.Errorf("named insecure, the registry was not reached with the credentials (%v):\n%s\nrequests:\n%s", r.err, r.out, got)
	}
}
