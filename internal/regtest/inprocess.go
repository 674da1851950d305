package regtest

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// InProcess starts go-containerregistry's in-memory registry
// (pkg/registry) on 127.0.0.1 in the test's own process, for tests of a
// client path where the registry is not what is tested: no binary, no
// process, nothing on disk. It speaks the distribution API (monolithic and
// chunked blob uploads, manifests by tag and digest, paged tag lists,
// deletes) without auth and, like the stack's distribution 2.8, without the
// referrers API, so referrers go through the sha256-<hex> fallback tag.
// Unlike distribution, a blob is in every repository once it is in one (no
// mounts are needed or counted). A test of auth, of distribution's own
// behaviour or of its limits uses Start. It stops when the test ends.
func InProcess(tb testing.TB) *Registry {
	tb.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	tb.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://")}
}
