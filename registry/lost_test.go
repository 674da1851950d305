package registry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// lossy is a registry (go-containerregistry's pkg/registry) behind a handler
// that spoils the answer of the first request matching a rule after the
// registry acted on it, and optionally the first check (HEAD) after that.
type lossy struct {
	srv *httptest.Server

	mu        sync.Mutex
	forwarded map[string]int // "METHOD kind" -> requests the registry acted on
}

// loss is what happens to an answer the registry gave.
type loss string

const (
	lost500   loss = "500"   // replaced by a 500
	lostReset loss = "reset" // replaced by a connection reset
)

func spoil(w http.ResponseWriter, how loss) {
	if how == lostReset {
		hijackReset(w)
		return
	}
	http.Error(w, "lost after the registry acted", http.StatusInternalServerError)
}

func kindOf(r *http.Request) string {
	switch {
	case strings.Contains(r.URL.Path, "/blobs/uploads/") && r.Method == http.MethodPut:
		return "commit"
	case strings.Contains(r.URL.Path, "/manifests/") && r.Method == http.MethodPut:
		return "manifest-put"
	case r.Method == http.MethodHead:
		return "head"
	}
	return r.Method
}

// startLossy spoils (how) the first request of kind victim; with
// headFails, the first HEAD after it is answered 503 without reaching the
// registry (the check itself needs the budget).
func startLossy(t *testing.T, victim string, how loss, headFails bool) *lossy {
	reg := ggcrregistry.New()
	l := &lossy{forwarded: map[string]int{}}
	var spoiled, headSpoiled atomic.Bool
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := kindOf(r)
		if k == "head" && headFails && spoiled.Load() && headSpoiled.CompareAndSwap(false, true) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		l.mu.Lock()
		l.forwarded[k]++
		l.mu.Unlock()
		if k == victim && spoiled.CompareAndSwap(false, true) {
			reg.ServeHTTP(httptest.NewRecorder(), r) // the registry acts...
			spoil(w, how)                            // ...and its answer is lost
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *lossy) count(k string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forwarded[k]
}

// A blob commit or a manifest PUT that the registry carried out but whose
// answer was lost (a 500 or a reset) is not sent again: the retry checks
// what landed (HEAD of the blob or the manifest) and is done. The check is
// itself an attempt of the budget: a 503 on it is retried.
func TestLostAnswerAfterTheRegistryActedIsCheckedNotRepeated(t *testing.T) {
	for _, victim := range []string{"commit", "manifest-put"} {
		for _, how := range []loss{lost500, lostReset} {
			for _, headFails := range []bool{false, true} {
				name := victim + "/" + string(how) + "/head-fails=" + strconv.FormatBool(headFails)
				t.Run(name, func(t *testing.T) {
					l := startLossy(t, victim, how, headFails)
					c := newTestClient(t, testBudget)
					ctx := context.Background()
					img, err := random.Image(64<<10, 1)
					if err != nil {
						t.Fatal(err)
					}
					repo := mustRepo(t, c, hostOf(l.srv)+"/lost/x")
					layers, _ := img.Layers()
					if err := c.Upload(ctx, repo, layers[0]); err != nil {
						t.Fatalf("upload: %v", err)
					}
					cfg, _ := partial.ConfigLayer(img)
					if err := c.Upload(ctx, repo, cfg); err != nil {
						t.Fatalf("upload config: %v", err)
					}
					ref, _ := c.ParseReference(repo.String() + ":v1")
					if err := c.Put(ctx, ref, img); err != nil {
						t.Fatalf("put: %v", err)
					}
					want := map[string]int{"commit": 2, "manifest-put": 1}
					for k, n := range want {
						if got := l.count(k); got != n {
							t.Errorf("%s forwarded %d times, want %d", k, got, n)
						}
					}
					d, err := c.Head(ctx, ref)
					if err != nil || d == nil {
						t.Fatalf("head: %v %v", d, err)
					}
					if wd, _ := img.Digest(); d.Digest != wd {
						t.Errorf("manifest %s, want %s", d.Digest, wd)
					}
				})
			}
		}
	}
}

// A response body cut half-way (the status and headers came, then part of
// the body, then the connection closed) is resumed within the budget: a
// blob with a Range request from where it stopped, a manifest fetched
// again. Three cuts in a row are all resumed; the bytes are the
// registry's.
func TestCutBodiesAreResumed(t *testing.T) {
	reg := ggcrregistry.New()
	var cuts atomic.Int32
	var ranges atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranges.Add(1)
		}
		if r.Method != http.MethodGet || r.URL.Path == "/v2/" || cuts.Load() >= 3 {
			reg.ServeHTTP(w, r)
			return
		}
		cuts.Add(1)
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		b := rec.Body.Bytes()
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	c := newTestClient(t, testBudget)
	ctx := context.Background()
	img, err := random.Image(256<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	repo := mustRepo(t, c, hostOf(srv)+"/cut/x")
	layers, _ := img.Layers()
	cfg, _ := partial.ConfigLayer(img)
	if err := c.Upload(ctx, repo, layers[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, repo, cfg); err != nil {
		t.Fatal(err)
	}
	ref, _ := c.ParseReference(repo.String() + ":v1")
	if err := c.Put(ctx, ref, img); err != nil {
		t.Fatal(err)
	}
	// Cut 1: the manifest GET; cut 2: the config blob; cut 3: the layer.
	got, err := c.Image(ctx, ref)
	if err != nil {
		t.Fatalf("fetching the image: %v", err)
	}
	if _, err := got.ConfigFile(); err != nil {
		t.Fatalf("config: %v", err)
	}
	gl, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := gl[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc) // ggcr checks the digest at EOF
	rc.Close()
	wantSize, _ := layers[0].Size()
	if err != nil || n != wantSize {
		t.Fatalf("layer: %d bytes, %v; want %d", n, err, wantSize)
	}
	if cuts.Load() != 3 || ranges.Load() < 2 {
		t.Errorf("%d bodies cut, %d Range requests; want 3, at least 2 (the blobs)", cuts.Load(), ranges.Load())
	}
}
