package registry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// A source that serves wrong bytes for a blob (one byte flipped, as a
// broken proxy or disk would): copying it to another registry fetches it at
// most twice, then fails with an error naming the blob and the source,
// instead of fetching it once per attempt of the budget.
func TestDigestMismatchIsFetchedAtMostTwiceAndNamed(t *testing.T) {
	srcReg := ggcrregistry.New()
	var flip atomic.Bool
	var gets atomic.Int32
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !flip.Load() || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/sha256:") {
			srcReg.ServeHTTP(w, r)
			return
		}
		gets.Add(1)
		rec := httptest.NewRecorder()
		srcReg.ServeHTTP(rec, r)
		b := rec.Body.Bytes()
		if len(b) > 100 {
			b[100] ^= 0xff
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b)
	}))
	defer src.Close()
	dst := httptest.NewServer(ggcrregistry.New())
	defer dst.Close()

	c := newTestClient(t, testBudget)
	ctx := context.Background()
	img, err := random.Image(64<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	srcRef, _ := c.ParseReference(hostOf(src) + "/staging/x:v1")
	layers, _ := img.Layers()
	if err := c.Upload(ctx, srcRef.Context(), layers[0]); err != nil {
		t.Fatal(err)
	}
	flip.Store(true)
	h, _ := layers[0].Digest()
	l, err := c.Layer(ctx, srcRef.Context().Digest(h.String()))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Upload(ctx, mustRepo(t, c, hostOf(dst)+"/release/x"), l)
	var dm *DigestMismatchError
	if !errors.As(err, &dm) {
		t.Fatalf("upload of wrong bytes: %v, want a DigestMismatchError", err)
	}
	if n := gets.Load(); n != 2 {
		t.Errorf("the blob was fetched %d times, want 2", n)
	}
	msg := err.Error()
	if !strings.Contains(msg, h.String()) || !strings.Contains(msg, hostOf(src)+"/staging/x") {
		t.Errorf("error %q does not name the blob %s and its source", msg, h)
	}
}
