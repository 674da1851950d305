package sign

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"
)

// TestKeylessVerify checks the certificate-identity path against
// sigstore-go's virtual Sigstore (its own test Fulcio CA, Rekor log and
// TSA, in memory): a statement attested by the nightly's identity is
// accepted, one by another identity or issuer is refused, and a key trust
// refuses a certificate-signed entity. The virtual CA issues no SCT, so
// the SCT check is off here (IgnoreSCT); signing against the real Fulcio
// and Rekor could not be run on this machine (no network).
func TestKeylessVerify(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	st := statements(t)[0]
	wf := GitHubWorkflowIdentity("https://github.com", "swebuild/swebuild/.github/workflows/nightly.yml@refs/heads/main")
	if wf.Subject != "https://github.com/swebuild/swebuild/.github/workflows/nightly.yml@refs/heads/main" || wf.Issuer != "https://token.actions.githubusercontent.com" {
		t.Fatalf("workflow identity %+v", wf)
	}
	// The virtual CA writes the identity as an e-mail SAN; the matching
	// is the same for a URI SAN.
	const who = "nightly@swebuild.example"
	entity, err := vs.Attest(who, GitHubActionsIssuer, st.statement)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := GenerateKey()
	for _, tc := range []struct {
		name  string
		trust Trust
		err   string
	}{
		{"identity", Trust{Identity: &Identity{Subject: who, Issuer: GitHubActionsIssuer}, TrustedRoot: vs, IgnoreSCT: true}, ""},
		{"identity regexp", Trust{Identity: &Identity{SubjectRegexp: `^nightly@swebuild\.example$`, Issuer: GitHubActionsIssuer}, TrustedRoot: vs, IgnoreSCT: true}, ""},
		{"another identity", Trust{Identity: &Identity{Subject: "someone@else.example", Issuer: GitHubActionsIssuer}, TrustedRoot: vs, IgnoreSCT: true}, "does not verify with certificate someone@else.example (issuer https://token.actions.githubusercontent.com): failed to verify certificate identity"},
		{"another issuer", Trust{Identity: &Identity{Subject: who, Issuer: "https://accounts.google.com"}, TrustedRoot: vs, IgnoreSCT: true}, `expected issuer value "https://accounts.google.com"`},
		{"SCT required", Trust{Identity: &Identity{Subject: who, Issuer: GitHubActionsIssuer}, TrustedRoot: vs}, "failed to verify signed certificate timestamp"},
		{"a key", Trust{Key: &key.PublicKey}, "the bundle carries a certificate, not a key"},
		{"no trusted root", Trust{Identity: &Identity{Subject: who, Issuer: GitHubActionsIssuer}}, "needs a Sigstore trusted root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.trust.verifyEntity(entity, st.subject)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(v.Statement) != string(st.statement) {
					t.Fatal("verified statement differs")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error containing %q", err, tc.err)
			}
			t.Log(err)
		})
	}
}

// TestGitHubActionsIDToken checks the request the token fetch makes
// (GitHub's documented protocol: the request URL plus audience, the
// request token as a bearer token, {"value": JWT} back) against a local
// stand-in, and its refusals.
func TestGitHubActionsIDToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer req-token" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("audience") != "sigstore" || r.URL.Query().Get("api-version") != "2.0" {
			http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"count":1,"value":"eyJ.jwt.sig"}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	// GitHub's request URL already carries a query (api-version).
	tok, err := GitHubActionsIDToken(ctx, srv.Client(), srv.URL+"/token?api-version=2.0", "req-token")
	if err != nil || tok != "eyJ.jwt.sig" {
		t.Fatalf("token %q, %v", tok, err)
	}
	for _, tc := range []struct{ name, url, token, err string }{
		{"no permission", "", "", "id-token: write"},
		{"refused", srv.URL + "/token?api-version=2.0", "other", "401 Unauthorized: bad token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := GitHubActionsIDToken(ctx, srv.Client(), tc.url, tc.token)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
	if _, err := NewKeylessSigner(KeylessOptions{}); err == nil || !strings.Contains(err.Error(), "no OIDC identity token") {
		t.Fatalf("keyless signer without a token: %v", err)
	}
}
