package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// genLayer is a layer of size pseudo-random bytes made on the fly: every
// Compressed() call starts a new stream (as a layer copied from another
// registry starts a new GET), and produced counts the bytes handed out.
type genLayer struct {
	seed     uint64
	size     int64
	digest   v1.Hash
	opens    atomic.Int32
	produced atomic.Int64
}

func newGenLayer(t testing.TB, seed uint64, size int64) *genLayer {
	t.Helper()
	g := &genLayer{seed: seed, size: size}
	h := sha256.New()
	if _, err := io.Copy(h, g.stream(nil)); err != nil {
		t.Fatal(err)
	}
	g.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	return g
}

type genReader struct {
	rng      *rand.ChaCha8
	left     int64
	produced *atomic.Int64
}

func (r *genReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, _ := r.rng.Read(p)
	r.left -= int64(n)
	if r.produced != nil {
		r.produced.Add(int64(n))
	}
	return n, nil
}

func (g *genLayer) stream(produced *atomic.Int64) io.ReadCloser {
	var seed [32]byte
	seed[0] = byte(g.seed)
	return io.NopCloser(&genReader{rng: rand.NewChaCha8(seed), left: g.size, produced: produced})
}

func (g *genLayer) Digest() (v1.Hash, error) { return g.digest, nil }
func (g *genLayer) Compressed() (io.ReadCloser, error) {
	g.opens.Add(1)
	return g.stream(&g.produced), nil
}
func (g *genLayer) Size() (int64, error)                { return g.size, nil }
func (g *genLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

func (g *genLayer) layer(t testing.TB) v1.Layer {
	t.Helper()
	l, err := partial.CompressedToLayer(g)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// storedDigest GETs a blob back from the registry and hashes it.
func storedDigest(t *testing.T, host, repo string, h v1.Hash) string {
	t.Helper()
	resp, err := http.Get("http://" + host + "/v2/" + repo + "/blobs/" + h.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.Status
	}
	s := sha256.New()
	if _, err := io.Copy(s, resp.Body); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(s.Sum(nil))
}

// An upload's body goes to the registry as it is produced: the registry has
// its first bytes before the layer has handed out 8 MiB of its 32 MiB (socket buffers hold a few MiB).
// (Buffering the body for replay, as go-retryablehttp's FromRequest does,
// read all of it before the first byte left.)
func TestUploadStreamsTheBody(t *testing.T) {
	const size = 32 << 20
	g := newGenLayer(t, 1, size)
	var atFirstByte atomic.Int64
	atFirstByte.Store(-1)
	reg := ggcrregistry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			r.Body = &firstByteBody{ReadCloser: r.Body, at: func() { atFirstByte.CompareAndSwap(-1, g.produced.Load()) }}
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := newTestClient(t, testBudget)
	repo := mustRepo(t, c, hostOf(srv)+"/stream/test")
	if err := c.Upload(context.Background(), repo, g.layer(t)); err != nil {
		t.Fatal(err)
	}
	if got := storedDigest(t, hostOf(srv), "stream/test", g.digest); got != g.digest.String() {
		t.Fatalf("stored blob %s, want %s", got, g.digest)
	}
	n := atFirstByte.Load()
	t.Logf("layer bytes produced when the registry read its first byte: %d of %d", n, size)
	if n < 0 || n > 8<<20 {
		t.Errorf("the layer had produced %d bytes when the registry got the first one (of %d)", n, size)
	}
}

type firstByteBody struct {
	io.ReadCloser
	once sync.Once
	at   func()
}

func (b *firstByteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.once.Do(b.at)
	}
	return n, err
}

// A PATCH that breaks mid-body (connection reset after 100 KiB) or answers
// 503 is sent again on a new upload session, its body fetched again from
// the layer, never from a buffered copy; the blob stored is the right one.
// A registry may keep part of a broken PATCH in its session (this one then
// refuses any further write to it), so the old session is never reused.
func TestUploadPatchRetriedOnANewSessionWithTheBodyFetchedAgain(t *testing.T) {
	for _, fault := range []string{"reset", "503"} {
		t.Run(fault, func(t *testing.T) {
			g := newGenLayer(t, 2, 3<<20)
			var posts, patches atomic.Int32
			reg := ggcrregistry.New()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.Method {
				case http.MethodPost:
					posts.Add(1)
				case http.MethodPatch:
					if patches.Add(1) == 1 {
						if fault == "503" {
							w.WriteHeader(http.StatusServiceUnavailable)
							return
						}
						// Let the registry keep part of the body, then reset.
						pr, pw := io.Pipe()
						go func() {
							_, _ = io.CopyN(pw, r.Body, 100<<10)
							pw.CloseWithError(io.ErrUnexpectedEOF)
						}()
						r2 := r.Clone(r.Context())
						r2.Body = pr
						reg.ServeHTTP(httptest.NewRecorder(), r2)
						hijackReset(w)
						return
					}
				}
				reg.ServeHTTP(w, r)
			}))
			defer srv.Close()
			c := newTestClient(t, testBudget)
			repo := mustRepo(t, c, hostOf(srv)+"/retry/test")
			if err := c.Upload(context.Background(), repo, g.layer(t)); err != nil {
				t.Fatal(err)
			}
			if got := storedDigest(t, hostOf(srv), "retry/test", g.digest); got != g.digest.String() {
				t.Errorf("stored blob %s, want %s", got, g.digest)
			}
			if p, pa, o := posts.Load(), patches.Load(), g.opens.Load(); p != 2 || pa != 2 || o != 2 {
				t.Errorf("%d POSTs, %d PATCHes, body opened %d times; want 2, 2, 2", p, pa, o)
			}
		})
	}
}

func hijackReset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Blobs of another registry's image are read as the upload goes: copying a
// layer between two registries needs no memory for the layer, and the
// source's response holds no request slot of either registry (with one
// slot per host the copy still completes).
func TestCopyBetweenRegistriesWithOneSlot(t *testing.T) {
	g := newGenLayer(t, 3, 8<<20)
	src := httptest.NewServer(ggcrregistry.New())
	defer src.Close()
	dst := httptest.NewServer(ggcrregistry.New())
	defer dst.Close()
	c, err := New(Options{Budget: testBudget, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srcRepo := mustRepo(t, c, hostOf(src)+"/staging/x")
	if err := c.Upload(ctx, srcRepo, g.layer(t)); err != nil {
		t.Fatal(err)
	}
	// A remote layer from the source, as publish gets from a remote image.
	rl := &remoteBlob{c: c, host: hostOf(src), repo: "staging/x", h: g.digest, size: g.size}
	l, err := partial.CompressedToLayer(rl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"release/a", "release/b"} {
		if err := c.Upload(ctx, mustRepo(t, c, hostOf(dst)+"/"+r), l); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if got := storedDigest(t, hostOf(dst), r, g.digest); got != g.digest.String() {
			t.Errorf("%s: stored %s", r, got)
		}
	}
}

// remoteBlob reads a blob with a plain GET through the client's transport.
type remoteBlob struct {
	c          *Client
	host, repo string
	h          v1.Hash
	size       int64
}

func (b *remoteBlob) Digest() (v1.Hash, error) { return b.h, nil }
func (b *remoteBlob) Size() (int64, error)     { return b.size, nil }
func (b *remoteBlob) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}
func (b *remoteBlob) Compressed() (io.ReadCloser, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+b.host+"/v2/"+b.repo+"/blobs/"+b.h.String(), nil)
	resp, err := (&http.Client{Transport: b.c.inner}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp.Body, nil
}

// A source that stops sending in the middle of a blob: the read fails after
// the stall timeout instead of hanging, the upload it fed is retried with
// the blob fetched again, and it completes.
func TestStalledSourceBodyIsCutAndTheCopyRetried(t *testing.T) {
	g := newGenLayer(t, 4, 1<<20)
	var gets atomic.Int32
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		w.Header().Set("Content-Length", "1048576")
		rc := g.stream(nil)
		if gets.Add(1) == 1 {
			_, _ = io.CopyN(w, rc, 100<<10)
			w.(http.Flusher).Flush()
			<-r.Context().Done() // stall until the client gives up
			return
		}
		_, _ = io.Copy(w, rc)
	}))
	defer src.Close()
	dst := httptest.NewServer(ggcrregistry.New())
	defer dst.Close()
	c, err := New(Options{Budget: testBudget, StallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rl := &remoteBlob{c: c, host: hostOf(src), repo: "staging/x", h: g.digest, size: g.size}
	l, err := partial.CompressedToLayer(rl)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Upload(context.Background(), mustRepo(t, c, hostOf(dst)+"/release/x"), l); err != nil {
		t.Fatal(err)
	}
	if got := storedDigest(t, hostOf(dst), "release/x", g.digest); got != g.digest.String() {
		t.Errorf("stored %s", got)
	}
	if n := gets.Load(); n != 2 || time.Since(start) > 10*time.Second {
		t.Errorf("%d GETs of the source in %v, want 2 (the stalled one, then the retry's)", n, time.Since(start))
	}
}
