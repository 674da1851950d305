// Package publication reads published images through the project's
// registry client (its one credential source, its token realm route, its
// retry budget), with every read bounded: the one way check, sizes, drift,
// diff-images and verify --images read a publication.
//
// A published set is a repository prefix holding, per instance, the
// per-arch images REPO/sweb.eval.<arch>.<id> and the index
// REPO/sweb.eval.<id> (names from package manifests), or the pinned
// references of a build metadata file or publish ledger. The reader reads
// each index, HEADs each of its children in the index's own repository
// (where a pull of that platform looks), resolves an image for a platform,
// lists referrers (the referrers API, else the sha256-<hex> fallback tag
// and the attachment tags) and reads blobs. It is modelled on
// go-containerregistry's remote package and oras-go's one target
// interface: one reader, whatever the command.
//
// Bounds (Limits): a manifest or index over 4 MiB is refused (the size
// distribution accepts in a PUT); a referrers answer or fallback index of
// more than 10,000 descriptors is refused; a listing (a tag list or a
// referrers answer) is bounded in pages, bytes and time, and a page linking
// back to a page already read is refused at once.
package publication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/registry"
)

// Limits bound what one read may cost. Zero fields take DefaultLimits'.
type Limits struct {
	// Listing bounds one tag list or referrers answer, all its pages.
	Listing registry.ListLimits
	// ManifestBytes bounds one manifest or index, a fallback referrers
	// index included.
	ManifestBytes int64
	// Referrers bounds the descriptors of one referrers answer or
	// fallback index.
	Referrers int
}

// DefaultLimits: registry.DefaultListLimits, 4 MiB per manifest (what
// distribution accepts in a PUT), 10,000 referrers per image.
var DefaultLimits = Limits{Listing: registry.DefaultListLimits, ManifestBytes: 4 << 20, Referrers: 10000}

func (l Limits) withDefaults() Limits {
	if l.ManifestBytes <= 0 {
		l.ManifestBytes = DefaultLimits.ManifestBytes
	}
	if l.Referrers <= 0 {
		l.Referrers = DefaultLimits.Referrers
	}
	return l
}

// Reader reads publications through one registry client. Safe for
// concurrent use; its zero value is not usable: set Client.
type Reader struct {
	Client *registry.Client
	Limits Limits
	// Jobs is how many references a set read asks at once (default 8).
	Jobs int
}

// New returns a Reader over c with the default limits.
func New(c *registry.Client) *Reader { return &Reader{Client: c} }

func (r *Reader) limits() Limits { return r.Limits.withDefaults() }

func (r *Reader) jobs() int {
	if r.Jobs <= 0 {
		return 8
	}
	return r.Jobs
}

// ErrNotFound is wrapped by reads of what the registry says does not exist.
var ErrNotFound = errors.New("not found in the registry")

// RefusedError is a registry refusing the login (HTTP 401) or the access
// (403) for a reference: the host, and which credential it got when the
// client's credential source can say.
type RefusedError struct {
	Host       string
	Status     int
	Credential string
	Err        error
}

func (e *RefusedError) Error() string {
	s := "login refused by " + e.Host
	if e.Status == http.StatusForbidden {
		s = "access denied by " + e.Host
	}
	if e.Credential != "" {
		s += " (" + e.Credential + ")"
	}
	return s
}

func (e *RefusedError) Unwrap() error { return e.Err }

// AnswerError is a registry answer other than found, not found or refused
// (a 5xx after the client's retries, a 400).
type AnswerError struct {
	Status int
	Err    error
}

func (e *AnswerError) Error() string { return fmt.Sprintf("registry answered %d: %v", e.Status, e.Err) }
func (e *AnswerError) Unwrap() error { return e.Err }

// classify sorts a read's error: a 404 (missing) is neither; a refusal,
// another HTTP answer or a bound is this reference's problem (a
// *RefusedError, *AnswerError or *registry.LimitError); anything else (the
// registry unreachable after the client's budget) is hard, for the caller
// to stop on.
func classify(err error, host string) (problem, hard error) {
	if err == nil {
		return nil, nil
	}
	var ae *registry.AuthError
	var terr *transport.Error
	status := 0
	if errors.As(err, &terr) {
		status = terr.StatusCode
	}
	switch {
	case errors.As(err, &ae):
		st := status
		if st == 0 {
			st = http.StatusUnauthorized
		}
		return &RefusedError{Host: ae.Host, Status: st, Credential: ae.Credential, Err: err}, nil
	case status == http.StatusNotFound:
		return nil, nil
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &RefusedError{Host: host, Status: status, Err: err}, nil
	case status != 0:
		return &AnswerError{Status: status, Err: err}, nil
	}
	var le *registry.LimitError
	if errors.As(err, &le) {
		return err, nil
	}
	return nil, err
}

// Found is what the registry said about one reference.
type Found struct {
	// Name is the reference asked (REPO:TAG or REPO@DIGEST).
	Name    string
	Present bool
	// Descriptor is the manifest's (digest, size, media type) when
	// present.
	Descriptor v1.Descriptor
	// Problem is why the reference could not be read although the
	// registry answered: a *RefusedError, an *AnswerError, a
	// *registry.LimitError; nil when present or missing.
	Problem error
}

// Head asks for ref with one HEAD. The error is for a name that does not
// parse or a registry that could not be asked; a missing or refused
// reference is in the Found.
func (r *Reader) Head(ctx context.Context, ref string) (Found, error) {
	f := Found{Name: ref}
	parsed, err := r.Client.ParseReference(ref)
	if err != nil {
		return f, err
	}
	d, err := r.Client.Head(ctx, parsed)
	problem, hard := classify(err, parsed.Context().RegistryStr())
	if hard != nil {
		return f, hard
	}
	f.Problem = problem
	if err == nil && d != nil {
		f.Present, f.Descriptor = true, *d
	}
	return f, nil
}

// HeadAll asks for every ref with one HEAD each, Jobs at a time, in order.
func (r *Reader) HeadAll(ctx context.Context, refs []string) ([]Found, error) {
	out := make([]Found, len(refs))
	err := r.each(ctx, len(refs), func(ctx context.Context, i int) error {
		f, err := r.Head(ctx, refs[i])
		out[i] = f
		return err
	})
	return out, err
}

// Manifest fetches the manifest or index ref names, bounded by
// Limits.ManifestBytes. A missing one is an error wrapping ErrNotFound.
func (r *Reader) Manifest(ctx context.Context, ref name.Reference) (*registry.Manifest, error) {
	m, err := r.Client.Manifest(ctx, ref, r.limits().ManifestBytes)
	if err != nil {
		return nil, notFound(err)
	}
	return m, nil
}

// Blob opens the blob dg in repo (one streamed GET).
func (r *Reader) Blob(ctx context.Context, repo name.Repository, dg v1.Hash) (io.ReadCloser, error) {
	l, err := r.Client.Layer(ctx, repo.Digest(dg.String()))
	if err != nil {
		return nil, notFound(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s@%s: %w", repo, dg, notFound(err))
	}
	return rc, nil
}

// ReadBlob reads the blob l describes from repo into memory: refused above
// limit bytes (by its descriptor, and again while reading), and checked
// against its digest. what names the blob in errors ("statement",
// "document").
func (r *Reader) ReadBlob(ctx context.Context, repo name.Repository, l v1.Descriptor, limit int64, what string) ([]byte, error) {
	if l.Size > limit {
		return nil, fmt.Errorf("%s %s: %d bytes, more than %d", what, l.Digest, l.Size, limit)
	}
	rc, err := r.Blob(ctx, repo, l.Digest)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, l.Digest, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: more than %d bytes", what, l.Digest, limit)
	}
	if h, _, _ := v1.SHA256(bytesReader(b)); h != l.Digest {
		return nil, fmt.Errorf("%s %s: content digest mismatch", what, l.Digest)
	}
	return b, nil
}

// notFound wraps ErrNotFound into a registry's 404 (or its
// MANIFEST_UNKNOWN, NAME_UNKNOWN, BLOB_UNKNOWN codes), keeping its message.
func notFound(err error) error {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return err
	}
	if terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		}
	}
	return err
}

// each runs f for 0..n-1, Jobs at a time; the first error cancels the
// others and is returned.
func (r *Reader) each(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.jobs())
	for i := range n {
		g.Go(func() error { return f(gctx, i) })
	}
	return g.Wait()
}
