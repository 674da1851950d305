package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/retry"
)

// Checking a push before doing the work
//
// A build pushes (and a publish writes) only after minutes or hours of
// work; a registry that is down, or that refuses the credential, would
// fail it only then. CheckPush asks each target repository first, as
// crane's remote.CheckPushPermission does: a token for push scope (a
// registry with a token server refuses a credential that may not push
// here), then the start of a blob upload (a registry with Basic auth, or
// Docker Hub, which hands out tokens it later refuses, answers 202 only
// to a credential that may push), cancelled at once (DELETE of the upload
// location). Nothing is stored.

// PushCheckBudget is CheckPush's retry budget: a registry that refuses
// connections fails the check within its waits (MaxWaits: 7.5 s at most),
// one that accepts connections and never answers after two attempts of
// 6 s; a registry dropping one request in five still passes (6 attempts).
var PushCheckBudget = retry.Budget{
	Attempts:      6,
	MaxElapsed:    12 * time.Second,
	MinBackoff:    250 * time.Millisecond,
	MaxBackoff:    2 * time.Second,
	MaxRetryAfter: 5 * time.Second,
	AnswerTimeout: 6 * time.Second,
}

// PushCheckError is a target repository that cannot be pushed to: its
// registry host did not answer, refused the credential (Err is then an
// *AuthError naming where the credential was looked for), or refused the
// push.
type PushCheckError struct {
	Repo string
	Host string
	// Unreachable: the host did not answer at all.
	Unreachable bool
	Err         error
}

func (e *PushCheckError) Error() string {
	if e.Unreachable {
		where := ""
		if IsLoopback(e.Host) {
			where = " (a registry on this machine: is it running?)"
		}
		return fmt.Sprintf("cannot push to %s: registry %s does not answer%s: %v", e.Repo, e.Host, where, e.Err)
	}
	return fmt.Sprintf("cannot push to %s: %v", e.Repo, e.Err)
}

func (e *PushCheckError) Unwrap() error { return e.Err }

// CheckPush checks that each repository's registry answers and accepts the
// credential opts.Keychain gives it for a push (a zero opts.Budget takes
// PushCheckBudget). Repositories are checked in order, each once; the
// errors are *PushCheckError values, joined.
func CheckPush(ctx context.Context, opts Options, repos ...string) error {
	if opts.Budget.IsZero() {
		opts.Budget = PushCheckBudget
	}
	c, err := New(opts)
	if err != nil {
		return err
	}
	var errs []error
	var done []string
	for _, s := range repos {
		if s == "" || slices.Contains(done, s) {
			continue
		}
		done = append(done, s)
		if err := c.checkPush(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Client) checkPush(ctx context.Context, s string) error {
	repo, err := c.ParseRepository(s)
	if err != nil {
		return &PushCheckError{Repo: s, Err: err}
	}
	host := repo.RegistryStr()
	fail := func(err error) error {
		var (
			gave  *GaveUpError
			down  *UnreachableError
			terr  *transport.Error
			authe *AuthError
		)
		unreachable := (errors.As(err, &gave) || errors.As(err, &down)) && !errors.As(err, &terr)
		if !unreachable && !errors.As(err, &authe) {
			err = c.explain(err, host)
		}
		return &PushCheckError{Repo: repo.String(), Host: host, Unreachable: unreachable, Err: err}
	}
	auth, err := authn.Resolve(ctx, c.keychain, repo)
	if err != nil {
		return fail(fmt.Errorf("resolving the credential: %w", err))
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, c.inner, []string{repo.Scope(transport.PushScope)})
	if err != nil {
		return fail(err)
	}
	hc := &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u := &url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: "/v2/" + repo.RepositoryStr() + "/blobs/uploads/"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return fail(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusAccepted); err != nil {
		return fail(err)
	}
	// Cancel the upload session started; a registry that keeps it until it
	// expires is no worse off.
	if loc, err := resp.Location(); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if del, err := http.NewRequestWithContext(cctx, http.MethodDelete, loc.String(), http.NoBody); err == nil {
			if r, err := hc.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	return nil
}
