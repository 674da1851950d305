package bkauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/buildkit/session/auth"
	"github.com/swebuild/swebuild/registry"
	"golang.org/x/crypto/nacl/sign"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenServer is a token realm that counts Authorization headers and
// answers a token naming the basic user it got ("anon" without).
func tokenServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var authz atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := "anon"
		if r.Header.Get("Authorization") != "" {
			authz.Add(1)
		}
		if r.Method == http.MethodPost { // OAuth form
			_ = r.ParseForm()
			if u := r.PostForm.Get("username"); u != "" {
				authz.Add(1)
				user = u
			}
		} else if u, _, ok := r.BasicAuth(); ok {
			user = u
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"token": "tok-" + user, "access_token": "tok-" + user, "expires_in": 300})
	}))
	t.Cleanup(srv.Close)
	return srv, &authz
}

// The session hands each host its own credential and nothing for other
// hosts; tokens come from the realm with the credential over loopback HTTP,
// anonymously for a host with none, and never over plain HTTP to a realm
// that is neither loopback nor named insecure.
func TestSessionAuth(t *testing.T) {
	ctx := context.Background()
	dir := writeDockerConfig(t, `{"auths": {"reg.example:5001": {"auth": "`+basicAuth("alice", "pw")+`"}}}`)
	c, err := registry.NewCredentials(registry.CredentialOptions{DockerConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a := New(c, nil)
	got, err := a.Credentials(ctx, &auth.CredentialsRequest{Host: "reg.example:5001"})
	if err != nil || got.Username != "alice" || got.Secret != "pw" {
		t.Errorf("Credentials: %+v, %v", got, err)
	}
	got, err = a.Credentials(ctx, &auth.CredentialsRequest{Host: "other.example:5001"})
	if err != nil || got.Username != "" || got.Secret != "" {
		t.Errorf("Credentials for another host: %+v, %v", got, err)
	}

	srv, authz := tokenServer(t)
	tok, err := a.FetchToken(ctx, &auth.FetchTokenRequest{Host: "reg.example:5001", Realm: srv.URL + "/token", Service: "reg", Scopes: []string{"repository:x:pull"}})
	if err != nil || tok.Token != "tok-alice" {
		t.Errorf("FetchToken over loopback: %+v, %v", tok, err)
	}
	if authz.Load() != 1 {
		t.Errorf("realm saw the credential %d times, want 1", authz.Load())
	}
	authz.Store(0)
	tok, err = a.FetchToken(ctx, &auth.FetchTokenRequest{Host: "other.example:5001", Realm: srv.URL + "/token", Service: "reg"})
	if err != nil || tok.Token != "tok-anon" || authz.Load() != 0 {
		t.Errorf("anonymous FetchToken: %+v, %v, %d Authorization headers", tok, err, authz.Load())
	}
	_, err = a.FetchToken(ctx, &auth.FetchTokenRequest{Host: "reg.example:5001", Realm: "http://auth.example/token", Service: "reg"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), dir) {
		t.Errorf("plain-HTTP realm: %v", err)
	}
	// Named insecure: allowed (the dial then fails: nothing listens there).
	b := New(c, func(h string) bool { return h == "auth.invalid" })
	_, err = b.FetchToken(ctx, &auth.FetchTokenRequest{Host: "reg.example:5001", Realm: "http://auth.invalid/token", Service: "reg"})
	if err == nil || status.Code(err) == codes.PermissionDenied {
		t.Errorf("plain-HTTP realm named insecure: %v", err)
	}

	// The token authority is this session's key.
	ta, err := a.GetTokenAuthority(ctx, &auth.GetTokenAuthorityRequest{Host: "reg.example:5001"})
	if err != nil || len(ta.PublicKey) != 32 {
		t.Fatalf("GetTokenAuthority: %v", err)
	}
	payload := make([]byte, 32)
	_, _ = rand.Read(payload)
	v, err := a.VerifyTokenAuthority(ctx, &auth.VerifyTokenAuthorityRequest{Host: "reg.example:5001", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	var pub [32]byte
	copy(pub[:], ta.PublicKey)
	if msg, ok := sign.Open(nil, v.Signed, &pub); !ok || string(msg) != string(payload) {
		t.Error("VerifyTokenAuthority: signature does not open with the authority's key")
	}
	other, _ := New(c, nil).GetTokenAuthority(ctx, &auth.GetTokenAuthorityRequest{Host: "reg.example:5001"})
	if string(other.PublicKey) == string(ta.PublicKey) {
		t.Error("two sessions share a token authority key")
	}

	if hosts := a.Asked(); strings.Join(hosts, ",") != "reg.example:5001,other.example:5001" {
		t.Errorf("Asked: %v", hosts)
	}
	e := a.Explain(errors.New("failed to push: unexpected status: 401 Unauthorized"))
	var ae *registry.AuthError
	if !errors.As(e, &ae) || !strings.Contains(e.Error(), "credential for reg.example:5001 from "+dir) || !strings.Contains(e.Error(), "no credential found for other.example:5001") {
		t.Errorf("Explain: %v", e)
	}
	e = a.Explain(errors.New("unexpected status from HEAD request to http://other.example:5001/v2/x/blobs/sha256:1: 401 Unauthorized"))
	if !errors.As(e, &ae) || ae.Host != "other.example:5001" || strings.Contains(e.Error(), "reg.example") {
		t.Errorf("Explain of a refusal naming its host: %v", e)
	}
	if e := a.Explain(errors.New("no space left")); e.Error() != "no space left" {
		t.Errorf("Explain changed an unrelated error: %v", e)
	}
}

// writeDockerConfig writes DIR/config.json as `docker login` does and
// returns DIR.
func writeDockerConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}
