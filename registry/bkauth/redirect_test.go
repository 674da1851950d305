package bkauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/moby/buildkit/session/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/swebuild/swebuild/registry"
)

// recorder is a server that keeps what each request carried (the
// Authorization header and the body) and answers a token.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.Header.Get("Authorization")+" "+string(b))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"token":"tok-target","access_token":"tok-target","expires_in":300}`)
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.seen, "\n")
}

// BuildKit asks the session for a token (FetchToken, BuildKit's request
// shape: client id, host, realm, service, scopes) and the session fetches
// it from the realm with the host's login. A realm that redirects to
// another port of its host, or to another host, gets the login only on
// the realm's own scheme, host and port: the session does not follow such
// a redirect with it (Go's client re-sends the Basic header to another
// port of the same host name, and an OAuth form with the password, on a
// 307 or 308, to any host). Without a login the redirect is followed.
func TestTokenRealmRedirectKeepsTheCredential(t *testing.T) {
	const user, pass = "alice", "s3cret-pw"
	ctx := context.Background()
	target := &recorder{}
	tsrv := httptest.NewServer(target)
	defer tsrv.Close()
	// The same target under another host name (localhost, not 127.0.0.1).
	otherHost := strings.Replace(tsrv.URL, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		name string
		// realm answers the session's POST (OAuth) and GET requests.
		realm   func(w http.ResponseWriter, r *http.Request)
		login   bool // the registry host has a login
		wantTok string
		refused bool
	}{
		{name: "POST 307 to another port", login: true, refused: true, realm: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, tsrv.URL+"/token", http.StatusTemporaryRedirect)
		}},
		{name: "POST 308 to another host", login: true, refused: true, realm: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, otherHost+"/token", http.StatusPermanentRedirect)
		}},
		{name: "no OAuth, GET 302 to another port", login: true, refused: true, realm: func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				http.NotFound(w, r)
				return
			}
			http.Redirect(w, r, tsrv.URL+"/token", http.StatusFound)
		}},
		{name: "redirect on the realm's own origin", login: true, wantTok: "tok-alice", realm: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				http.Redirect(w, r, "/token2", http.StatusTemporaryRedirect)
				return
			}
			if u, _, ok := r.BasicAuth(); ok {
				_, _ = io.WriteString(w, `{"token":"tok-`+u+`"}`)
				return
			}
			_ = r.ParseForm()
			_, _ = io.WriteString(w, `{"access_token":"tok-`+r.PostForm.Get("username")+`"}`)
		}},
		{name: "anonymous, GET 302 to another port", login: false, wantTok: "tok-target", realm: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, tsrv.URL+"/token", http.StatusFound)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target.mu.Lock()
			target.seen = nil
			target.mu.Unlock()
			realm := httptest.NewServer(http.HandlerFunc(tc.realm))
			defer realm.Close()
			host := "reg.example:5001"
			cfg := `{"auths": {}}`
			if tc.login {
				cfg = `{"auths": {"` + host + `": {"auth": "` + basicAuth(user, pass) + `"}}}`
			}
			c, err := registry.NewCredentials(registry.CredentialOptions{DockerConfigDir: writeDockerConfig(t, cfg)})
			if err != nil {
				t.Fatal(err)
			}
			a := New(c, nil)
			tok, err := a.FetchToken(ctx, &auth.FetchTokenRequest{ClientID: "buildkit-client", Host: host, Realm: realm.URL + "/token",
				Service: "reg", Scopes: []string{"repository:x/y:pull"}})
			if seen := target.all(); strings.Contains(seen, pass) || strings.Contains(seen, basicAuth(user, pass)) {
				t.Errorf("the redirect target got the login:\n%s", seen)
			}
			if tc.refused {
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "redirected") {
					t.Fatalf("FetchToken: %+v, %v; want PermissionDenied naming the redirect", tok, err)
				}
				return
			}
			if err != nil || tok.Token != tc.wantTok {
				t.Fatalf("FetchToken: %+v, %v; want %s", tok, err, tc.wantTok)
			}
		})
	}
}
