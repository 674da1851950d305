package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/internal/regtest"
)

// basicRegistry is the in-process registry behind HTTP Basic auth (RFC
// 7617): a request without the one login gets 401 with a Basic challenge
// and distribution's UNAUTHORIZED error body.
func basicRegistry(t *testing.T, user, pass string) *httptest.Server {
	t.Helper()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="cov"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func credsClient(t *testing.T, text string, logf func(string, ...any)) *Client {
	t.Helper()
	creds, err := NewCredentials(CredentialOptions{Text: text, TextSource: "$SWEBUILD_REGISTRY_AUTH"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Budget: testBudget, Keychain: creds, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An image written through the client (Upload of its blobs, Put of its
// manifest) behind Basic auth reads back whole through Get, Image and
// Layer; the debug log names requests and never the login.
func TestClientRoundTripBehindBasicAuth(t *testing.T) {
	const user, pass = "alice", "s3cret-Pa55"
	srv := basicRegistry(t, user, pass)
	host := hostOf(srv)
	var mu sync.Mutex
	var logged []string
	c := credsClient(t, host+"="+user+":"+pass, func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	})
	ctx := context.Background()
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	repo := mustRepo(t, c, host+"/cov/image")
	layers, _ := img.Layers()
	for _, l := range layers {
		if err := c.Upload(ctx, repo, l); err != nil {
			t.Fatalf("Upload: %v", err)
		}
	}
	cfgName, _ := img.ConfigName()
	cfgRaw, _ := img.RawConfigFile()
	if err := c.Upload(ctx, repo, staticLayer{cfgRaw, cfgName}); err != nil {
		t.Fatalf("Upload config: %v", err)
	}
	ref, _ := c.ParseReference(host + "/cov/image:v1")
	if err := c.Put(ctx, ref, img); err != nil {
		t.Fatalf("Put: %v", err)
	}
	want, _ := img.Digest()

	d, err := c.Get(ctx, ref)
	if err != nil || d.Digest != want {
		t.Fatalf("Get(%s) = %v, %v; want digest %s", ref, d, err, want)
	}
	got, err := c.Image(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if dg, _ := got.Digest(); dg != want {
		t.Errorf("Image digest %s, want %s", dg, want)
	}
	ld, _ := layers[1].Digest()
	l, err := c.Layer(ctx, repo.Digest(ld.String()))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if s := "sha256:" + hex.EncodeToString(h.Sum(nil)); s != ld.String() {
		t.Errorf("layer read back as %s, want %s", s, ld)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(logged) == 0 {
		t.Fatal("nothing logged")
	}
	sawPut := false
	for _, line := range logged {
		if strings.Contains(line, pass) || strings.Contains(line, "Basic ") || strings.Contains(line, "Authorization") {
			t.Errorf("debug log line shows the login: %q", line)
		}
		if strings.HasPrefix(line, "http PUT "+host+"/v2/cov/image/manifests/v1 -> 201") {
			sawPut = true
		}
	}
	if !sawPut {
		t.Errorf("no log line for the manifest PUT in %q", logged)
	}
}

// staticLayer is a blob of known bytes (an image's config).
type staticLayer struct {
	b []byte
	h v1.Hash
}

func (s staticLayer) Digest() (v1.Hash, error) { return s.h, nil }
func (s staticLayer) DiffID() (v1.Hash, error) { return s.h, nil }
func (s staticLayer) Size() (int64, error)     { return int64(len(s.b)), nil }
func (s staticLayer) MediaType() (types.MediaType, error) {
	return "application/vnd.oci.image.config.v1+json", nil
}
func (s staticLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(s.b))), nil
}
func (s staticLayer) Uncompressed() (io.ReadCloser, error) { return s.Compressed() }

// A wrong login or none: every read is an *AuthError naming the host and
// where the credential came from (never the password), and it still
// unwraps to the registry's 401.
func TestClientAuthRefusalNamesTheCredential(t *testing.T) {
	srv := basicRegistry(t, "alice", "right-one")
	host := hostOf(srv)
	ctx := context.Background()
	for _, tc := range []struct{ label, text, want string }{
		{"wrong password", host + "=alice:wrong-one", "credential for " + host + " from $SWEBUILD_REGISTRY_AUTH"},
		{"none", "", "no credential found for " + host + " (looked in $SWEBUILD_REGISTRY_AUTH)"},
	} {
		t.Run(tc.label, func(t *testing.T) {
			c := credsClient(t, tc.text, nil)
			ref, _ := c.ParseReference(host + "/cov/denied:latest")
			dg, _ := name.NewDigest(host + "/cov/denied@sha256:" + strings.Repeat("c", 64))
			calls := map[string]func() error{
				"Get":      func() error { _, err := c.Get(ctx, ref); return err },
				"Image":    func() error { _, err := c.Image(ctx, ref); return err },
				"Head":     func() error { _, err := c.Head(ctx, ref); return err },
				"Manifest": func() error { _, err := c.Manifest(ctx, ref, 1<<20); return err },
				"Tags":     func() error { _, err := c.Tags(ctx, ref.Context(), ListLimits{}); return err },
				"Referrers": func() error {
					_, _, err := c.Referrers(ctx, dg, ListLimits{})
					return err
				},
			}
			for call, f := range calls {
				err := f()
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Host != host || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v; want an *AuthError saying %q", call, err, tc.want)
					continue
				}
				if strings.Contains(err.Error(), "wrong-one") || strings.Contains(err.Error(), "right-one") {
					t.Errorf("%s: the error shows a password: %v", call, err)
				}
				var terr *transport.Error
				if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s: %v does not unwrap to the registry's 401", call, err)
				}
				if IsAuthFailure(err) {
					t.Errorf("%s: IsAuthFailure is true of an error explained already", call)
				}
			}
		})
	}
}

func TestClientReadErrorsNameTheReference(t *testing.T) {
	host := regtest.InProcess(t).Host
	c := newTestClient(t, testBudget)
	ctx := context.Background()
	ref, _ := c.ParseReference(host + "/cov/none:latest")
	if _, err := c.Get(ctx, ref); err == nil || !strings.Contains(err.Error(), "fetching manifest of "+ref.String()) || !IsNotFound(err) {
		t.Errorf("Get of a missing tag: %v", err)
	}
	if _, err := c.Image(ctx, ref); err == nil || !strings.Contains(err.Error(), "fetching image "+ref.String()) {
		t.Errorf("Image of a missing tag: %v", err)
	}
	// A registry that is not there: the error names the reference.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadHost := hostOf(dead)
	dead.Close()
	fast := testBudget
	fast.Attempts, fast.MaxElapsed = 2, time.Second
	c = newTestClient(t, fast)
	for _, tc := range []struct {
		what string
		call func() error
	}{
		{"fetching image " + deadHost + "/a/b:latest", func() error {
			r, _ := c.ParseReference(deadHost + "/a/b:latest")
			_, err := c.Image(ctx, r)
			return err
		}},
		{"opening blob " + deadHost + "/a/b@sha256:", func() error {
			d, _ := name.NewDigest(deadHost + "/a/b@sha256:" + strings.Repeat("d", 64))
			_, err := c.Layer(ctx, d)
			return err
		}},
		{"putting manifest " + deadHost + "/a/b:latest", func() error {
			r, _ := c.ParseReference(deadHost + "/a/b:latest")
			return c.Put(ctx, r, rawManifest{raw: []byte(emptyIndex), mt: "application/vnd.oci.image.index.v1+json"})
		}},
		{"fetching manifest " + deadHost + "/a/b:latest", func() error {
			r, _ := c.ParseReference(deadHost + "/a/b:latest")
			_, err := c.Manifest(ctx, r, 100)
			return err
		}},
		{"listing tags of " + deadHost + "/a/b", func() error {
			_, err := c.Tags(ctx, mustRepo(t, c, deadHost+"/a/b"), ListLimits{})
			return err
		}},
		{"listing referrers of " + deadHost + "/a/b@sha256:", func() error {
			d, _ := name.NewDigest(deadHost + "/a/b@sha256:" + strings.Repeat("d", 64))
			_, _, err := c.Referrers(ctx, d, ListLimits{})
			return err
		}},
		{"fetching manifest of " + deadHost + "/a/b:latest", func() error {
			r, _ := c.ParseReference(deadHost + "/a/b:latest")
			_, err := c.Get(ctx, r)
			return err
		}},
	} {
		if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.what) {
			t.Errorf("against a closed port: %v; want it to say %q", err, tc.what)
		}
	}
}

func TestParseNames(t *testing.T) {
	c, err := New(Options{Keychain: authn.NewMultiKeychain(), InsecureRegistries: []string{"reg.example:5000"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s, scheme string
	}{
		{"reg.example:5000/a/b:latest", "http"},
		{"reg.example:5001/a/b:latest", "https"},
		{"ghcr.io/o/r:latest", "https"},
		{"127.0.0.1:5000/a:latest", "http"},
	} {
		ref, err := c.ParseReference(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := ref.Context().Scheme(); got != tc.scheme {
			t.Errorf("ParseReference(%q) scheme %s, want %s", tc.s, got, tc.scheme)
		}
		repo, err := c.ParseRepository(strings.TrimSuffix(tc.s, ":latest"))
		if err != nil {
			t.Fatal(err)
		}
		if got := repo.Scheme(); got != tc.scheme {
			t.Errorf("ParseRepository(%q) scheme %s, want %s", tc.s, got, tc.scheme)
		}
	}
	if _, err := c.ParseReference("Reg.example/UPPER:tag"); err == nil || !strings.Contains(err.Error(), `parsing image reference "Reg.example/UPPER:tag"`) {
		t.Errorf("bad reference: %v", err)
	}
	if _, err := c.ParseRepository("reg.example/a:b:c"); err == nil || !strings.Contains(err.Error(), `parsing repository "reg.example/a:b:c"`) {
		t.Errorf("bad repository: %v", err)
	}
	if _, err := New(Options{InsecureRegistries: []string{"not a host"}}); err == nil || !strings.Contains(err.Error(), "insecure registry") {
		t.Errorf("New with a bad insecure registry: %v", err)
	}
}

func TestBudgetFilledFromDefaults(t *testing.T) {
	c := newTestClient(t, testBudget)
	b := c.Budget()
	if b.Attempts != 5 || b.MaxElapsed != 10*time.Second || b.MinBackoff != time.Millisecond {
		t.Errorf("Budget() = %+v, want testBudget's fields", b)
	}
	if b.AnswerTimeout != DefaultBudget.AnswerTimeout || b.AnswerTimeout == 0 {
		t.Errorf("Budget().AnswerTimeout = %s, want DefaultBudget's %s", b.AnswerTimeout, DefaultBudget.AnswerTimeout)
	}
}

func TestRegistryOf(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"ghcr.io/o/r", "ghcr.io"},
		{"ubuntu", "index.docker.io"},
		{"docker.io/library/ubuntu", "index.docker.io"},
		{"127.0.0.1:5000/swebuild/x", "127.0.0.1:5000"},
	} {
		if got, err := RegistryOf(tc.repo); err != nil || got != tc.want {
			t.Errorf("RegistryOf(%q) = %q, %v; want %q", tc.repo, got, err, tc.want)
		}
	}
	if _, err := RegistryOf("ghcr.io/O/R:x:y"); err == nil || !strings.Contains(err.Error(), `repository "ghcr.io/O/R:x:y"`) {
		t.Errorf("RegistryOf of a bad name: %v", err)
	}
}

func TestKeychain(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no Docker config of the machine's
	kc, err := Keychain("ghcr.io=bob:tok,127.0.0.1:5000=amy:pw", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ reg, user, pass string }{
		{"ghcr.io", "bob", "tok"},
		{"127.0.0.1:5000", "amy", "pw"},
		{"quay.io", "", ""},
	} {
		a := resolve(t, kc, tc.reg)
		if a.Username != tc.user || a.Password != tc.pass {
			t.Errorf("%s: got %q/%q, want %q/%q", tc.reg, a.Username, a.Password, tc.user, tc.pass)
		}
	}
	if _, err := Keychain("bob:pw", ""); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("an unscoped login with no default registry: %v", err)
	}
}

func TestErrorTexts(t *testing.T) {
	inner := errors.New("connection refused")
	until := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&UnreachableError{Host: "h:1", Until: until, Err: inner}, "registry host h:1 unreachable (not retried before 15:04:05): connection refused"},
		{&GaveUpError{Attempts: 3, Elapsed: 1234 * time.Millisecond, Err: inner}, "gave up after 3 attempt(s) in 1.23s: connection refused"},
		{&PushCheckError{Repo: "h:1/r", Host: "h:1", Err: inner}, "cannot push to h:1/r: connection refused"},
		{&PushCheckError{Repo: "127.0.0.1:1/r", Host: "127.0.0.1:1", Unreachable: true, Err: inner},
			"cannot push to 127.0.0.1:1/r: registry 127.0.0.1:1 does not answer (a registry on this machine: is it running?): connection refused"},
		{&AuthError{Host: "h:1", Credential: "no credential found for h:1", Err: inner}, "registry h:1 refused the request (no credential found for h:1): connection refused"},
		{&rereadError{err: inner}, "reading the request body again: connection refused"},
		{&StalledError{After: time.Second}, "response body stalled: no data for 1s"},
	} {
		if tc.err.Error() != tc.want {
			t.Errorf("%T.Error() = %q, want %q", tc.err, tc.err.Error(), tc.want)
		}
		if u, ok := tc.err.(interface{ Unwrap() error }); ok && !errors.Is(tc.err, inner) {
			t.Errorf("%T does not unwrap to its cause (%v)", tc.err, u.Unwrap())
		}
	}
	if errOrStatus(&http.Response{Status: "503 Service Unavailable"}, nil).Error() != "503 Service Unavailable" {
		t.Error("errOrStatus without an error: want the status")
	}
	if errOrStatus(nil, inner) != inner || errOrStatus(nil, nil) != nil {
		t.Error("errOrStatus with an error: want the error")
	}
}
