// Package registry talks to OCI registries for swebuild: go-containerregistry's
// remote package over a go-retryablehttp transport with exponential backoff
// and jitter, Retry-After honoured on 429/503, a global request-rate and
// concurrency limit per Client, credentials from the environment, the Docker
// config and its credential helpers, digest existence checks before uploads
// and cross-repository blob mounts.
//
// Transport stack, outermost first:
//
//	auth (ggcr bearer/basic, built once per registry: one /v2/ ping per registry per run)
//	  -> retries (go-retryablehttp for replayable requests)
//	    -> limiter (rate + concurrency, applied to every attempt)
//	      -> net/http transport
//
// Streaming blob bodies are never buffered for replay; their upload is retried
// as a whole by UploadBlob, which repeats the existence check first, so a blob
// that reached the registry is never sent twice.
//
// Nothing in this package prints or logs credentials or request headers; the
// debug log (Options.Logf) carries method, host, path and status only.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Defaults for Options.
const (
	DefaultMaxRPS        = 50
	DefaultConcurrency   = 8
	DefaultMaxRetries    = 8
	DefaultMinBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultOpAttempts    = 6
)

// Options configure a Client. Zero values take the defaults above.
type Options struct {
	// MaxRPS is the global request-rate limit (requests per second, every
	// attempt counted). 0 means DefaultMaxRPS; negative means unlimited.
	MaxRPS float64
	// Concurrency is the maximum number of requests in flight.
	Concurrency int
	// MaxRetries is the number of HTTP-level retries of a replayable request.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps how long a Retry-After header can make us wait.
	MaxRetryAfter time.Duration
	// OpAttempts is how many times a whole operation (a blob upload, a
	// manifest put) is attempted when its HTTP retries are exhausted or its
	// streaming body failed.
	OpAttempts int
	// Keychain resolves credentials; nil means Keychain(DefaultAuthEnv).
	Keychain authn.Keychain
	// Insecure allows plain HTTP to non-loopback registries.
	Insecure bool
	// Logf, if set, receives debug lines (never credentials or headers).
	Logf func(format string, args ...any)
	// Base is the innermost transport; nil means a clone of http.DefaultTransport.
	Base http.RoundTripper
}

// Client is safe for concurrent use; all requests through it share one
// rate and concurrency limit.
type Client struct {
	opts     Options
	keychain authn.Keychain
	inner    http.RoundTripper // retries -> limiter -> base

	mu     sync.Mutex
	authed map[string]*authEntry // per registry
}

type authEntry struct {
	once sync.Once
	rt   http.RoundTripper
	err  error
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
	if opts.MaxRPS == 0 {
		opts.MaxRPS = DefaultMaxRPS
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.OpAttempts <= 0 {
		opts.OpAttempts = DefaultOpAttempts
	}
	kc := opts.Keychain
	if kc == nil {
		var err error
		if kc, err = Keychain(DefaultAuthEnv); err != nil {
			return nil, err
		}
	}
	base := opts.Base
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = opts.Concurrency * 2
		t.ResponseHeaderTimeout = 5 * time.Minute
		base = t
	}
	lim := &limitedTransport{base: base, lim: newLimiter(opts.MaxRPS, opts.Concurrency), logf: opts.Logf}
	return &Client{
		opts:     opts,
		keychain: kc,
		inner:    newRetryTransport(lim, opts),
		authed:   map[string]*authEntry{},
	}, nil
}

// ParseReference parses an image reference; plain HTTP is used for loopback
// registries and, with Options.Insecure, for any registry.
func (c *Client) ParseReference(s string) (name.Reference, error) {
	var opts []name.Option
	if c.opts.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("parsing image reference %q: %w", s, err)
	}
	return ref, nil
}

// ParseRepository parses a repository name like ParseReference.
func (c *Client) ParseRepository(s string) (name.Repository, error) {
	var opts []name.Option
	if c.opts.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(s, opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("parsing repository %q: %w", s, err)
	}
	return repo, nil
}

// transportFor returns the authenticated transport for repo's registry,
// built once per registry (one /v2/ ping). Bearer scopes for further
// repositories are added on demand from the registry's challenges.
func (c *Client) transportFor(ctx context.Context, repo name.Repository) (http.RoundTripper, error) {
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
		scopes := []string{repo.Scope(transport.PushScope)}
		e.rt, e.err = transport.NewWithContext(ctx, repo.Registry, auth, c.inner, scopes)
		if e.err != nil {
			e.err = fmt.Errorf("authenticating to %s: %w", key, e.err)
		}
	})
	if e.err != nil {
		// Let a later call try again (the registry may have been down).
		c.mu.Lock()
		if c.authed[key] == e {
			delete(c.authed, key)
		}
		c.mu.Unlock()
		return nil, e.err
	}
	return e.rt, nil
}

func (c *Client) remoteOptions(ctx context.Context, repo name.Repository) ([]remote.Option, error) {
	rt, err := c.transportFor(ctx, repo)
	if err != nil {
		return nil, err
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt), // a *transport.Wrapper: ggcr adds no second auth or retry layer
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithJobs(1),
		remote.WithUserAgent("swebuild"),
	}, nil
}

// Head returns the descriptor of ref (tag or digest) with one HEAD request,
// or nil and no error when the registry answers 404.
func (c *Client) Head(ctx context.Context, ref name.Reference) (*v1.Descriptor, error) {
	var desc *v1.Descriptor
	err := c.retryOp(ctx, func() error {
		opts, err := c.remoteOptions(ctx, ref.Context())
		if err != nil {
			return err
		}
		d, err := remote.Head(ref, opts...)
		if err != nil {
			if isNotFound(err) {
				desc = nil
				return nil
			}
			return err
		}
		desc = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", ref, err)
	}
	return desc, nil
}

// Image returns a lazily fetched remote image (for copying from another
// registry or repository by digest).
func (c *Client) Image(ctx context.Context, ref name.Reference) (v1.Image, error) {
	var img v1.Image
	err := c.retryOp(ctx, func() error {
		opts, err := c.remoteOptions(ctx, ref.Context())
		if err != nil {
			return err
		}
		img, err = remote.Image(ref, opts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fetching image %s: %w", ref, err)
	}
	return img, nil
}

// UploadBlob makes sure blob l exists in repo. ggcr first checks it by
// digest (HEAD); when absent and mountFrom is a repository on the same
// registry, it asks for a cross-repository mount; only then does it upload.
// The whole sequence, existence check included, is retried on transient
// failures.
func (c *Client) UploadBlob(ctx context.Context, repo name.Repository, l v1.Layer, mountFrom *name.Repository) error {
	h, err := l.Digest()
	if err != nil {
		return fmt.Errorf("digesting blob for %s: %w", repo, err)
	}
	layer := l
	if mountFrom != nil && mountFrom.RegistryStr() == repo.RegistryStr() && mountFrom.RepositoryStr() != repo.RepositoryStr() {
		layer = &remote.MountableLayer{Layer: l, Reference: mountFrom.Digest(h.String())}
	}
	err = c.retryOp(ctx, func() error {
		opts, err := c.remoteOptions(ctx, repo)
		if err != nil {
			return err
		}
		return remote.WriteLayer(repo, layer, opts...)
	})
	if err != nil {
		return fmt.Errorf("uploading blob %s to %s: %w", h, repo, err)
	}
	return nil
}

// PutManifest writes a manifest or index (anything with RawManifest and
// MediaType) at ref, a tag or its digest. Its blobs or children must
// already be in the repository.
func (c *Client) PutManifest(ctx context.Context, ref name.Reference, t remote.Taggable) error {
	err := c.retryOp(ctx, func() error {
		opts, err := c.remoteOptions(ctx, ref.Context())
		if err != nil {
			return err
		}
		return remote.Put(ref, t, opts...)
	})
	if err != nil {
		return fmt.Errorf("putting manifest %s: %w", ref, err)
	}
	return nil
}

// retryOp runs op up to OpAttempts times with exponential backoff and jitter
// while its error is transient.
func (c *Client) retryOp(ctx context.Context, op func() error) error {
	var err error
	for attempt := 0; attempt < c.opts.OpAttempts; attempt++ {
		if attempt > 0 {
			d := jitter(c.opts.MinBackoff, c.opts.MaxBackoff, attempt)
			if c.opts.Logf != nil {
				c.opts.Logf("retrying in %s after: %v", d.Round(time.Millisecond), err)
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		err = op()
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Transient reports whether err is worth retrying: network errors and
// 408/429/5xx (except 501) answers. Context cancellation and other 4xx
// answers are permanent.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch {
		case terr.StatusCode == http.StatusRequestTimeout, terr.StatusCode == http.StatusTooManyRequests:
			return true
		case terr.StatusCode >= 500 && terr.StatusCode != http.StatusNotImplemented:
			return true
		case terr.StatusCode >= 400:
			return false
		}
		return true
	}
	return true
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
