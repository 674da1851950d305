// Package bkauth answers BuildKit's registry credential requests for one
// session (the session's auth service, a gRPC server) from the project's one
// credential source, registry.Credentials. It lives apart from package
// registry so that what only reads a registry links no gRPC and no BuildKit.
package bkauth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	authutil "github.com/containerd/containerd/v2/core/remotes/docker/auth"
	remoteserrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/moby/buildkit/session/auth"
	"github.com/swebuild/swebuild/registry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SessionAuth answers BuildKit's registry credential requests for one
// session (attach it to a solve: bkclient.SolveOpt.Session) from a
// registry.Credentials: a host gets its own credential and nothing else. Bearer
// tokens are fetched here, on the client side (BuildKit asks for a token
// authority first, then for tokens), so a credential is sent to a token
// realm only over HTTPS, or over plain HTTP when the realm's host is
// loopback or named insecure. Which hosts were asked for is kept, so a
// failed solve can say which credential each got (Explain).
//
// BuildKit's own authprovider reads only the Docker config and writes a
// token seed file into its directory; this one serves the same source as
// go-containerregistry and writes nothing.
type SessionAuth struct {
	auth.UnimplementedAuthServer
	creds     *registry.Credentials
	allowHTTP func(host string) bool
	key       ed25519.PrivateKey
	// client fetches tokens with a login: it follows a redirect only on
	// the realm's own scheme, host and port (sameOrigin); anon fetches
	// them without one and follows any.
	client, anon *http.Client

	mu    sync.Mutex
	asked []string // hosts, in the order first asked
}

// New returns a new SessionAuth for one BuildKit session over creds.
// allowHTTP says whether a host may get a credential over plain HTTP (nil:
// loopback hosts only; registry.IsLoopback is always allowed).
func New(creds *registry.Credentials, allowHTTP func(host string) bool) *SessionAuth {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		// crypto/rand does not fail on Linux; a nil key turns client-side
		// tokens off (GetTokenAuthority answers Unavailable).
		key = nil
	}
	return &SessionAuth{creds: creds, allowHTTP: allowHTTP, key: key,
		client: &http.Client{Timeout: 60 * time.Second, CheckRedirect: sameOrigin},
		anon:   &http.Client{Timeout: 60 * time.Second}}
}

// RedirectError is a token realm that redirected a request carrying a
// login to another origin (scheme, host or port): the session does not
// follow it. Go's client would re-send the Basic header to another port of
// the same host name (or a subdomain), and an OAuth form with the password
// on a 307 or 308 to any host.
type RedirectError struct {
	From, To *url.URL
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("token realm %s redirected to %s: a login goes to the realm's own scheme, host and port only", e.From.Redacted(), e.To.Redacted())
}

// sameOrigin is the redirect policy of token requests with a login: a
// redirect is followed only to the origin of the first request (scheme,
// host and port; a default port written or not is the same), at most 10.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if origin(req.URL) != origin(via[0].URL) {
		return &RedirectError{From: via[0].URL, To: req.URL}
	}
	return nil
}

// origin is scheme://host:port with the scheme's default port filled in.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// Register implements session.Attachable.
func (a *SessionAuth) Register(server *grpc.Server) { auth.RegisterAuthServer(server, a) }

func (a *SessionAuth) note(host string) {
	k := registry.HostKey(host)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.asked, k) {
		a.asked = append(a.asked, k)
	}
}

// Asked returns the registry hosts BuildKit asked credentials for.
func (a *SessionAuth) Asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

func (a *SessionAuth) plainHTTPAllowed(host string) bool {
	return registry.IsLoopback(host) || (a.allowHTTP != nil && a.allowHTTP(host))
}

// Credentials answers the daemon's request for a host's credential (basic
// auth against the host, and the daemon's own token fetches when no token
// authority is in use).
func (a *SessionAuth) Credentials(ctx context.Context, req *auth.CredentialsRequest) (*auth.CredentialsResponse, error) {
	a.note(req.Host)
	cred, err := a.creds.Lookup(req.Host)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if cred.IdentityToken != "" {
		return &auth.CredentialsResponse{Secret: cred.IdentityToken}, nil
	}
	return &auth.CredentialsResponse{Username: cred.Username, Secret: cred.Password}, nil
}

// GetTokenAuthority hands the daemon this session's public key, so that it
// asks this session for bearer tokens (FetchToken) instead of fetching them
// itself with the credential.
func (a *SessionAuth) GetTokenAuthority(ctx context.Context, req *auth.GetTokenAuthorityRequest) (*auth.GetTokenAuthorityResponse, error) {
	if a.key == nil {
		return nil, status.Error(codes.Unavailable, "no token authority key")
	}
	return &auth.GetTokenAuthorityResponse{PublicKey: a.key.Public().(ed25519.PublicKey)}, nil
}

// VerifyTokenAuthority signs the daemon's payload with this session's key.
func (a *SessionAuth) VerifyTokenAuthority(ctx context.Context, req *auth.VerifyTokenAuthorityRequest) (*auth.VerifyTokenAuthorityResponse, error) {
	if a.key == nil {
		return nil, status.Error(codes.Unavailable, "no token authority key")
	}
	// The NaCl sign format BuildKit opens: signature then message.
	sig := ed25519.Sign(a.key, req.Payload)
	return &auth.VerifyTokenAuthorityResponse{Signed: append(sig, req.Payload...)}, nil
}

// FetchToken fetches a bearer token for host from its realm with the
// host's credential (anonymously when it has none).
func (a *SessionAuth) FetchToken(ctx context.Context, req *auth.FetchTokenRequest) (*auth.FetchTokenResponse, error) {
	a.note(req.Host)
	cred, err := a.creds.Lookup(req.Host)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if cred.RegistryToken != "" {
		return tokenResponse(cred.RegistryToken, time.Time{}, 0), nil
	}
	realm, err := url.Parse(req.Realm)
	if err != nil || (realm.Scheme != "https" && realm.Scheme != "http") || realm.Host == "" {
		return nil, status.Errorf(codes.InvalidArgument, "registry %s: token realm %q is not an http(s) URL", req.Host, req.Realm)
	}
	to := authutil.TokenOptions{Realm: req.Realm, Service: req.Service, Scopes: req.Scopes}
	if !cred.Empty() {
		if realm.Scheme != "https" && !a.plainHTTPAllowed(realm.Host) {
			return nil, status.Errorf(codes.PermissionDenied, "registry %s: not sending the credential from %s to token realm %s over plain HTTP (only loopback or insecure-named hosts get one without TLS)", registry.HostKey(req.Host), cred.Source, realm.Redacted())
		}
		to.Username, to.Secret = cred.Username, cred.Password
		if cred.IdentityToken != "" {
			to.Username, to.Secret = "", cred.IdentityToken
		}
	}
	if to.Secret == "" {
		r, err := authutil.FetchToken(ctx, a.anon, nil, to)
		if err != nil {
			return nil, fmt.Errorf("registry %s: fetching an anonymous token from %s: %w", registry.HostKey(req.Host), realm.Redacted(), err)
		}
		return tokenResponse(r.Token, r.IssuedAt, r.ExpiresInSeconds), nil
	}
	// With a credential: the OAuth POST endpoint, then GET with basic auth
	// for registries that have no POST (as docker and BuildKit do).
	o, err := authutil.FetchTokenWithOAuth(ctx, a.client, nil, "swebuild", to)
	if err == nil {
		return tokenResponse(o.AccessToken, o.IssuedAt, o.ExpiresInSeconds), nil
	}
	var st remoteserrors.ErrUnexpectedStatus
	if errors.As(err, &st) && (st.StatusCode == http.StatusMethodNotAllowed || st.StatusCode == http.StatusNotFound || st.StatusCode == http.StatusUnauthorized) {
		r, gerr := authutil.FetchToken(ctx, a.client, nil, to)
		if gerr == nil {
			return tokenResponse(r.Token, r.IssuedAt, r.ExpiresInSeconds), nil
		}
		err = gerr
	}
	var re *RedirectError
	if errors.As(err, &re) {
		return nil, status.Errorf(codes.PermissionDenied, "registry %s: not sending the credential from %s on: %v", registry.HostKey(req.Host), cred.Source, re)
	}
	return nil, fmt.Errorf("registry %s: fetching a token with the credential from %s: %w", registry.HostKey(req.Host), cred.Source, err)
}

func tokenResponse(token string, issued time.Time, expires int) *auth.FetchTokenResponse {
	if expires == 0 {
		expires = 60
	}
	r := &auth.FetchTokenResponse{Token: token, ExpiresIn: int64(expires)}
	if !issued.IsZero() {
		r.IssuedAt = issued.Unix()
	}
	return r
}

// Explain adds to a failed solve's error, when it reads as a registry
// refusing a login, which credential each registry host BuildKit asked
// about got ("credential for HOST from SOURCE" or "no credential found for
// HOST (looked in ...)"). Other errors come back unchanged.
func (a *SessionAuth) Explain(err error) error {
	if err == nil || !registry.IsAuthFailure(err) {
		return err
	}
	hosts := a.Asked()
	if len(hosts) == 0 {
		return err
	}
	// The host the refused request went to, when the error's URL names
	// one that was asked about; else every host asked about.
	var named []string
	for _, h := range hosts {
		if strings.Contains(err.Error(), "://"+h+"/") {
			named = append(named, h)
		}
	}
	if len(named) > 0 {
		hosts = named
	}
	notes := make([]string, len(hosts))
	for i, h := range hosts {
		notes[i] = a.creds.Describe(h)
	}
	return &registry.AuthError{Host: strings.Join(hosts, ", "), Credential: strings.Join(notes, "; "), Err: err}
}
