package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// tokenRegistry is a registry on 127.0.0.1 that wants a bearer token from a
// token server on another port of 127.0.0.1 (htpasswd-style basic login at
// the token server, alice:right). A token carries the scopes it was asked
// for; writes need a token with push. It records every scope asked for.
func tokenRegistry(t *testing.T) (host string, scopes func() []string) {
	var mu sync.Mutex
	var asked []string
	tok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "right" {
			http.Error(w, "bad login", http.StatusUnauthorized)
			return
		}
		sc := strings.Join(r.URL.Query()["scope"], " ")
		mu.Lock()
		asked = append(asked, sc)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token":"scopes=` + strings.ReplaceAll(sc, " ", "+") + `"}`))
	}))
	t.Cleanup(tok.Close)
	inner := ggcrregistry.New()
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := "pull"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			need = "push"
		}
		repo := ""
		if p, ok := strings.CutPrefix(r.URL.Path, "/v2/"); ok {
			for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
				if i := strings.Index(p, sep); i >= 0 {
					repo = p[:i]
					break
				}
			}
		}
		got := r.Header.Get("Authorization")
		ok := strings.HasPrefix(got, "Bearer scopes=")
		if ok && repo != "" {
			ok = strings.Contains(got, "repository:"+repo+":") && strings.Contains(got[strings.Index(got, "repository:"+repo+":"):], need)
		}
		if !ok {
			ch := `Bearer realm="` + tok.URL + `/token",service="reg"`
			if repo != "" {
				scope := "repository:" + repo + ":pull"
				if need == "push" {
					scope += ",push"
				}
				ch += `,scope="` + scope + `"`
			}
			w.Header().Set("WWW-Authenticate", ch)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	return strings.TrimPrefix(reg.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// TestTokenRealmOnOtherPort (issue 20 row 7): a registry on a private
// address whose token server is on another port of that address is logged
// in to (ggcr alone refuses the realm); a read asks only for pull scope and
// an upload gets push scope when the registry asks for it.
func TestTokenRealmOnOtherPort(t *testing.T) {
	host, scopes := tokenRegistry(t)
	kc, err := ParseCredentials(host+"=alice:right", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Keychain: kc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref, err := name.ParseReference(host+"/src/only:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Head(ctx, ref); err != nil || d != nil {
		t.Fatalf("HEAD of a missing tag through the token realm: %v, %v", d, err)
	}
	for _, s := range scopes() {
		if strings.Contains(s, "push") {
			t.Errorf("a read-only source was asked for push scope: %q", s)
		}
	}
	repo, err := name.NewRepository(host+"/dst/repo", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	l, err := random.Layer(512, "application/vnd.oci.image.layer.v1.tar+gzip")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, repo, l); err != nil {
		t.Fatalf("upload through the token realm: %v", err)
	}
	pushed := false
	for _, s := range scopes() {
		pushed = pushed || strings.Contains(s, "repository:dst/repo:pull,push") || strings.Contains(s, "repository:dst/repo:push")
	}
	if !pushed {
		t.Errorf("no push scope asked for the destination: %q", scopes())
	}
}
