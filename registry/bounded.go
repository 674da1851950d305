package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Reads with a bound. go-containerregistry reads a manifest up to 100 MiB
// and follows a tag list's Link header for as long as the registry sends
// one; a hostile or broken registry can make either cost gigabytes (a
// fallback referrers index of 400,000 descriptors took 713 MB, a tag list
// linking to itself grew without end). Everything a publication reader
// reads goes through these instead.

// ListLimits bound one listing (a tag list or a referrers answer): the
// pages followed, the bytes read over all pages, the time it may take.
// Zero fields take DefaultListLimits'.
type ListLimits struct {
	Pages int
	Bytes int64
	Time  time.Duration
}

// DefaultListLimits: 100 pages, 16 MiB, 2 minutes. A repository's tags at
// distribution's page size of 100 (GHCR's 1,000 is larger) fit 10,000 tags;
// a real tag list is a few hundred bytes per tag.
var DefaultListLimits = ListLimits{Pages: 100, Bytes: 16 << 20, Time: 2 * time.Minute}

func (l ListLimits) withDefaults() ListLimits {
	d := DefaultListLimits
	if l.Pages <= 0 {
		l.Pages = d.Pages
	}
	if l.Bytes <= 0 {
		l.Bytes = d.Bytes
	}
	if l.Time <= 0 {
		l.Time = d.Time
	}
	return l
}

// LimitError is a read refused for going over a bound.
type LimitError struct {
	What  string // "the tag list of REPO", "manifest REF"
	Limit string // which bound, e.g. "100 pages", "4194304 bytes"
	Why   string // optional detail
}

func (e *LimitError) Error() string {
	s := fmt.Sprintf("%s: refused over the limit of %s", e.What, e.Limit)
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}

// Manifest is a manifest or index as the registry served it.
type Manifest struct {
	Raw       []byte
	MediaType types.MediaType
	Digest    v1.Hash
}

// manifestAccept is every manifest type a publication holds.
var manifestAccept = strings.Join([]string{
	string(types.OCIImageIndex), string(types.OCIManifestSchema1),
	string(types.DockerManifestList), string(types.DockerManifestSchema2),
}, ",")

// Manifest fetches the manifest or index ref names with one GET, refused
// when it is over limit bytes (by its Content-Length before anything is
// read, else while reading). A manifest fetched by digest must match it.
// A 404 is an error IsNotFound recognizes.
func (c *Client) Manifest(ctx context.Context, ref name.Reference, limit int64) (*Manifest, error) {
	e, err := c.registryEntry(ctx, ref.Context())
	if err != nil {
		return nil, fmt.Errorf("fetching manifest %s: %w", ref, err)
	}
	u := url.URL{Scheme: ref.Context().Scheme(), Host: ref.Context().RegistryStr(),
		Path: fmt.Sprintf("/v2/%s/manifests/%s", ref.Context().RepositoryStr(), ref.Identifier())}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", manifestAccept)
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("fetching manifest %s: %w", ref, err)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, fmt.Errorf("fetching manifest %s: %w", ref, c.explain(err, ref.Context().RegistryStr()))
	}
	raw, err := readBounded(resp, limit, func() error {
		return &LimitError{What: "manifest " + ref.String(), Limit: strconv.FormatInt(limit, 10) + " bytes"}
	})
	if err != nil {
		return nil, fmt.Errorf("fetching manifest %s: %w", ref, err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if d, ok := ref.(name.Digest); ok && d.DigestStr() != h.String() {
		return nil, fmt.Errorf("fetching manifest %s: the registry served content of digest %s", ref, h)
	}
	mt := types.MediaType(resp.Header.Get("Content-Type"))
	if mt == "" || !(mt.IsIndex() || mt.IsImage()) {
		// A registry that does not say: the document's own mediaType.
		if m, err := v1.ParseIndexManifest(bytes.NewReader(raw)); err == nil && m.MediaType != "" {
			mt = m.MediaType
		}
	}
	return &Manifest{Raw: raw, MediaType: mt, Digest: h}, nil
}

// readBounded reads resp's body, refusing it (tooBig's error) when its
// Content-Length or its bytes go over limit.
func readBounded(resp *http.Response, limit int64, tooBig func() error) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, tooBig()
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooBig()
	}
	return b, nil
}

// pages reads a paginated listing from first, following the answer's Link
// header (rel="next", on the same registry host) within lim: each page's
// body goes to page. A link back to a page already read is refused at
// once; so is a link to another host. what names the listing in errors.
// stop, when page returns it, ends the listing without error (a registry
// not serving an API).
func (c *Client) pages(ctx context.Context, rt http.RoundTripper, first *url.URL, accept, what string, lim ListLimits, page func(resp *http.Response, body []byte) error) error {
	lim = lim.withDefaults()
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Time, &LimitError{What: what, Limit: lim.Time.String(), Why: "still reading pages"})
	defer cancel()
	seen := map[string]bool{}
	var read int64
	next := first
	for n := 1; next != nil; n++ {
		if n > lim.Pages {
			return &LimitError{What: what, Limit: fmt.Sprintf("%d pages", lim.Pages), Why: "the registry kept linking to a next page"}
		}
		seen[next.String()] = true
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		if err != nil {
			return err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return err
		}
		body, err := readBounded(resp, lim.Bytes-read, func() error {
			return &LimitError{What: what, Limit: strconv.FormatInt(lim.Bytes, 10) + " bytes", Why: fmt.Sprintf("on page %d", n)}
		})
		resp.Body.Close()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				return cause
			}
			return err
		}
		read += int64(len(body))
		if err := page(resp, body); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
		next, err = nextPage(resp, req.URL)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if next != nil && seen[next.String()] {
			return &LimitError{What: what, Limit: "one read per page", Why: fmt.Sprintf("page %d links back to %s, already read", n, next.Redacted())}
		}
	}
	return nil
}

// statusError is the registry's error answer resp (its body already read
// into body), as go-containerregistry reports one.
func statusError(resp *http.Response, body []byte) error {
	r := *resp
	r.Body = io.NopCloser(bytes.NewReader(body))
	return transport.CheckError(&r, http.StatusOK)
}

// errStop ends a listing early without error.
var errStop = errors.New("stop listing")

// nextPage is the rel="next" link of resp, resolved against the page's
// URL; nil when there is none. A link to another host or scheme is an error
// (the credential of this registry must not follow it).
func nextPage(resp *http.Response, at *url.URL) (*url.URL, error) {
	for _, v := range resp.Header.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) && !strings.Contains(strings.ReplaceAll(params, " ", ""), "rel=next") {
				continue
			}
			target = strings.TrimSpace(target)
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				return nil, fmt.Errorf("unreadable Link header %q", v)
			}
			u, err := url.Parse(target[1 : len(target)-1])
			if err != nil {
				return nil, fmt.Errorf("unreadable Link header %q: %w", v, err)
			}
			u = at.ResolveReference(u)
			if u.Host != at.Host || u.Scheme != at.Scheme {
				return nil, fmt.Errorf("the next page is on another host (%s://%s): not followed", u.Scheme, u.Host)
			}
			return u, nil
		}
	}
	return nil, nil
}
