// Package registry talks to OCI registries for swebuild: go-containerregistry's
// remote package (remote.Pusher for uploads and manifests) over one transport
// of our own with the one retry layer (Budget: attempts and total time per
// request, Retry-After honoured), a request-rate and concurrency limit per
// registry host, plain HTTP refused except to loopback hosts and registries
// named as insecure, and credentials that go only to the registry they were
// given for.
//
// Transport stack, outermost first:
//
//	auth (ggcr bearer/basic, built once per registry: one /v2/ ping per registry per run)
//	  -> retryTransport (Budget; a blob PATCH is retried on a new upload
//	     session with its body fetched again, never buffered)
//	    -> limitTransport (per host: rate, requests awaiting an answer)
//	      -> answerTimer (an attempt waits Budget.AnswerTimeout for an answer)
//	        -> schemeGuard (plain HTTP only where allowed)
//	          -> net/http transport
//
// go-containerregistry's own retries are switched off (its transport is a
// transport.Wrapper, its upload retry has one step), so a request is tried
// at most Budget.Attempts times in all.
//
// Nothing in this package prints or logs credentials or request headers; the
// debug log (Options.Logf) carries method, host, path and status only.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/retry"
)

// Defaults for Options.
const (
	// DefaultMaxRPS is the request rate per registry host when none is
	// given; loopback registries are not rate limited by default.
	DefaultMaxRPS = 50
	// DefaultConcurrency is how many requests may await an answer from one
	// registry host at once.
	DefaultConcurrency = 8
	// DefaultStallTimeout is how long a response body may send nothing.
	DefaultStallTimeout = 2 * time.Minute
)

// Options configure a Client. Zero values take the defaults.
type Options struct {
	// MaxRPS is the request-rate limit per registry host (requests per
	// second, every attempt counted). 0 means DefaultMaxRPS for remote
	// hosts and no limit for loopback ones; negative means no limit.
	MaxRPS float64
	// Concurrency is the most requests awaiting an answer per host.
	Concurrency int
	// Budget is the retry budget of every request; zero fields take
	// DefaultBudget's.
	Budget retry.Budget
	// CommitAnswerTimeout is how long a blob upload's PATCH or commit
	// waits for the registry's answer; 0 means DefaultCommitAnswerTimeout
	// (at least Budget.AnswerTimeout).
	CommitAnswerTimeout time.Duration
	// Keychain resolves credentials; nil means anonymous plus the Docker
	// config (authn.DefaultKeychain).
	Keychain authn.Keychain
	// InsecureRegistries may be talked to in plain HTTP (loopback
	// registries always may).
	InsecureRegistries []string
	// Insecure allows plain HTTP to every registry.
	Insecure bool
	// StallTimeout cuts a response body that sends nothing for this long
	// (a blob download from a registry that stopped mid-stream); 0 means
	// DefaultStallTimeout, negative never.
	StallTimeout time.Duration
	// Logf, if set, receives debug lines (never credentials or headers).
	Logf func(format string, args ...any)
	// Base is the innermost transport; nil means a clone of
	// http.DefaultTransport with timeouts.
	Base http.RoundTripper
}

// Client is safe for concurrent use.
type Client struct {
	opts     Options
	keychain authn.Keychain
	insecure map[string]bool // registry host -> plain HTTP allowed
	inner    http.RoundTripper

	mu     sync.Mutex
	authed map[string]*authEntry // per registry
}

type authEntry struct {
	once   sync.Once
	rt     http.RoundTripper
	pusher *remote.Pusher
	err    error
}

// IsLoopback reports whether a registry host (host[:port]) is on the local
// machine.
func IsLoopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// New returns a Client.
func New(opts Options) (*Client, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	opts.Budget = opts.Budget.Or(DefaultBudget)
	if opts.CommitAnswerTimeout <= 0 {
		opts.CommitAnswerTimeout = max(DefaultCommitAnswerTimeout, opts.Budget.AnswerTimeout)
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	insecure := map[string]bool{}
	for _, r := range opts.InsecureRegistries {
		key, err := registryKey(r)
		if err != nil {
			return nil, fmt.Errorf("insecure registry: %w", err)
		}
		insecure[key] = true
	}
	base := opts.Base
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.MaxIdleConnsPerHost = opts.Concurrency * 2
		// A registry commits a large blob before it answers the PUT.
		t.ResponseHeaderTimeout = 2 * time.Minute
		base = t
	}
	c := &Client{opts: opts, keychain: kc, insecure: insecure, authed: map[string]*authEntry{}}
	guard := schemeGuard{next: base, allowHTTP: c.plainHTTPAllowed}
	timer := answerTimer{next: guard, answer: opts.Budget.AnswerTimeout, commit: opts.CommitAnswerTimeout}
	lim := &limitTransport{next: timer, limits: &hostLimits{rps: opts.MaxRPS, concurrency: opts.Concurrency, hosts: map[string]*hostLimiter{}}, logf: opts.Logf, stall: max(opts.StallTimeout, 0)}
	c.inner = realmRoute{next: newRetryTransport(lim, opts.Budget, opts.Logf)}
	return c, nil
}

// Budget returns the retry budget the client applies to every request.
func (c *Client) Budget() retry.Budget { return c.opts.Budget }

func (c *Client) plainHTTPAllowed(host string) bool {
	return c.opts.Insecure || IsLoopback(host) || c.insecure[host]
}

func (c *Client) nameOpts(registry string) []name.Option {
	if c.opts.Insecure || c.insecure[registry] {
		return []name.Option{name.Insecure}
	}
	return nil
}

// ParseReference parses an image reference; plain HTTP is tried for
// loopback registries and registries named as insecure.
func (c *Client) ParseReference(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("parsing image reference %q: %w", s, err)
	}
	if o := c.nameOpts(ref.Context().RegistryStr()); o != nil {
		ref, err = name.ParseReference(s, o...)
		if err != nil {
			return nil, fmt.Errorf("parsing image reference %q: %w", s, err)
		}
	}
	return ref, nil
}

// ParseRepository parses a repository name like ParseReference.
func (c *Client) ParseRepository(s string) (name.Repository, error) {
	repo, err := name.NewRepository(s)
	if err != nil {
		return name.Repository{}, fmt.Errorf("parsing repository %q: %w", s, err)
	}
	if o := c.nameOpts(repo.RegistryStr()); o != nil {
		repo, err = name.NewRepository(s, o...)
		if err != nil {
			return name.Repository{}, fmt.Errorf("parsing repository %q: %w", s, err)
		}
	}
	return repo, nil
}

// registryEntry returns the authenticated transport and pusher for repo's
// registry, built once per registry (one /v2/ ping). Bearer scopes for
// further repositories are added on demand from the registry's challenges.
func (c *Client) registryEntry(ctx context.Context, repo name.Repository) (*authEntry, error) {
	key := repo.RegistryStr()
	c.mu.Lock()
	e, ok := c.authed[key]
	if !ok {
		e = &authEntry{}
		c.authed[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		auth, err := authn.Resolve(ctx, c.keychain, repo)
		if err != nil {
			e.err = fmt.Errorf("resolving credentials for %s: %w", key, err)
			return
		}
		// Pull scope first: a read-only source is never asked for push
		// (a token server may refuse it); a write gets push scope from the
		// registry's challenge, which ggcr's bearer transport follows.
		scopes := []string{repo.Scope(transport.PullScope)}
		rt, err := transport.NewWithContext(ctx, repo.Registry, auth, c.inner, scopes)
		if err != nil {
			e.err = fmt.Errorf("connecting to registry %s: %w", key, c.explain(err, key))
			return
		}
		e.rt = rt
		e.pusher, e.err = remote.NewPusher(c.remoteOptions(rt)...)
	})
	if e.err != nil {
		// A later call tries again (the registry may have been down; a
		// dead host fails fast in the transport meanwhile).
		c.mu.Lock()
		if c.authed[key] == e {
			delete(c.authed, key)
		}
		c.mu.Unlock()
		return nil, e.err
	}
	return e, nil
}

// noRetry is go-containerregistry's retry predicate here: never, the
// transport has retried already.
func noRetry(error) bool { return false }

func (c *Client) remoteOptions(rt http.RoundTripper) []remote.Option {
	return []remote.Option{
		remote.WithTransport(rt), // a *transport.Wrapper: ggcr adds no second auth or retry layer
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithRetryPredicate(noRetry),
		remote.WithRetryStatusCodes(),
		remote.WithJobs(4),
		remote.WithUserAgent("swebuild"),
	}
}

// Head returns the descriptor of ref (tag or digest) with one HEAD request,
// or nil and no error when the registry answers 404.
func (c *Client) Head(ctx context.Context, ref name.Reference) (*v1.Descriptor, error) {
	e, err := c.registryEntry(ctx, ref.Context())
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", ref, err)
	}
	d, err := remote.Head(ref, append(c.remoteOptions(e.rt), remote.WithContext(ctx))...)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("checking %s: %w", ref, c.explain(err, ref.Context().RegistryStr()))
	}
	return d, nil
}

// Image returns a remote image, fetched lazily: its manifest now, its blobs
// when read (each read a new GET, streamed).
func (c *Client) Image(ctx context.Context, ref name.Reference) (v1.Image, error) {
	e, err := c.registryEntry(ctx, ref.Context())
	if err != nil {
		return nil, fmt.Errorf("fetching image %s: %w", ref, err)
	}
	img, err := remote.Image(ref, append(c.remoteOptions(e.rt), remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("fetching image %s: %w", ref, c.explain(err, ref.Context().RegistryStr()))
	}
	return img, nil
}

// Get fetches the manifest or index ref names with one GET.
func (c *Client) Get(ctx context.Context, ref name.Reference) (*remote.Descriptor, error) {
	e, err := c.registryEntry(ctx, ref.Context())
	if err != nil {
		return nil, fmt.Errorf("fetching manifest of %s: %w", ref, err)
	}
	d, err := remote.Get(ref, append(c.remoteOptions(e.rt), remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("fetching manifest of %s: %w", ref, c.explain(err, ref.Context().RegistryStr()))
	}
	return d, nil
}

// Layer returns the blob d names, fetched lazily: Compressed opens one
// streamed GET.
func (c *Client) Layer(ctx context.Context, d name.Digest) (v1.Layer, error) {
	e, err := c.registryEntry(ctx, d.Context())
	if err != nil {
		return nil, fmt.Errorf("opening blob %s: %w", d, err)
	}
	l, err := remote.Layer(d, append(c.remoteOptions(e.rt), remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("opening blob %s: %w", d, c.explain(err, d.Context().RegistryStr()))
	}
	// Named by where it comes from: Upload mounts it within one registry
	// and names it in errors.
	return &remote.MountableLayer{Layer: l, Reference: d}, nil
}

// Upload makes sure blob l is in repo with go-containerregistry's pusher:
// a HEAD by digest, then, for a *remote.MountableLayer naming a repository
// of the same registry, a cross-repository mount, and only when neither
// holds, an upload streamed from l.Compressed.
//
// A *remote.MountableLayer of another registry is copied from there (no
// mount is tried). Bytes read from the source that do not match the blob's
// digest are fetched once more, then the upload fails with a
// *DigestMismatchError naming the blob and the source.
func (c *Client) Upload(ctx context.Context, repo name.Repository, l v1.Layer) error {
	e, err := c.registryEntry(ctx, repo)
	if err != nil {
		return err
	}
	if err := e.pusher.Upload(ctx, repo, checkedLayer(repo, l)); err != nil {
		return c.explain(err, repo.RegistryStr())
	}
	return nil
}

// checkedLayer wraps the layer an upload reads so that a digest mismatch
// is counted and named; a mountable layer of repo's registry stays
// mountable.
func checkedLayer(repo name.Repository, l v1.Layer) v1.Layer {
	inner, source := l, ""
	for {
		ml, ok := inner.(*remote.MountableLayer)
		if !ok {
			break
		}
		source, inner = ml.Reference.Context().String(), ml.Layer
	}
	if _, ok := inner.(*sourcedLayer); !ok {
		inner = &sourcedLayer{Layer: inner, source: source, mismatches: new(atomic.Int32)}
	}
	if ml, ok := l.(*remote.MountableLayer); ok && ml.Reference.Context().RegistryStr() == repo.RegistryStr() {
		return &remote.MountableLayer{Layer: inner, Reference: ml.Reference}
	}
	return inner
}

// DigestMismatchError is a blob whose bytes, as read from its source, do
// not match its digest (or size).
type DigestMismatchError struct {
	Digest  string
	Source  string // the repository it was read from; "" when not known
	Fetches int    // how many times the bytes were read wrong
	Err     error
}

func (e *DigestMismatchError) Error() string {
	src := e.Source
	if src == "" {
		src = "its source"
	}
	return fmt.Sprintf("blob %s read from %s does not match its digest (read %d time(s), not retried again): %v", e.Digest, src, e.Fetches, e.Err)
}

func (e *DigestMismatchError) Unwrap() error { return e.Err }

// mismatchLimit is how many wrong reads of one blob end its upload: one
// retry, for a flipped byte in transit; a source that serves wrong bytes
// twice will not serve right ones on the eighth try.
const mismatchLimit = 2

// sourcedLayer counts the reads of its bytes that fail the digest check.
type sourcedLayer struct {
	v1.Layer
	source     string
	mismatches *atomic.Int32
}

func (l *sourcedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &checkedReader{ReadCloser: rc, l: l}, nil
}

type checkedReader struct {
	io.ReadCloser
	l *sourcedLayer
}

func (r *checkedReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	// go-containerregistry's check (internal/verify, not importable) says
	// "error verifying sha256 checksum ..." or "error verifying size ...".
	if err != nil && !errors.Is(err, io.EOF) && strings.Contains(err.Error(), "error verifying ") {
		d, _ := r.l.Digest()
		err = &DigestMismatchError{Digest: d.String(), Source: r.l.source, Fetches: int(r.l.mismatches.Add(1)), Err: err}
	}
	return n, err
}

// Put writes a manifest or index (anything with RawManifest and MediaType)
// at ref, a tag or its digest, with one PUT. Its blobs or children must
// already be in the repository.
func (c *Client) Put(ctx context.Context, ref name.Reference, t remote.Taggable) error {
	e, err := c.registryEntry(ctx, ref.Context())
	if err != nil {
		return fmt.Errorf("putting manifest %s: %w", ref, err)
	}
	if err := e.pusher.Put(ctx, ref, t); err != nil {
		return fmt.Errorf("putting manifest %s: %w", ref, c.explain(err, ref.Context().RegistryStr()))
	}
	return nil
}

// explain turns a registry's refusal (401, 403) into an *AuthError naming
// the host and the credential it got, when the keychain can say which.
func (c *Client) explain(err error, host string) error {
	d, ok := c.keychain.(describer)
	if !ok || err == nil {
		return err
	}
	var terr *transport.Error
	status := errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden)
	if !status && !IsAuthFailure(err) {
		return err
	}
	return &AuthError{Host: host, Credential: d.Describe(host), Err: err}
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
