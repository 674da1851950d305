package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// maxReferrersIndex bounds a referrers answer (an index of descriptors).
const maxReferrersIndex = 4 << 20

// Referrers asks the registry's referrers API (OCI distribution 1.1,
// GET /v2/<name>/referrers/<digest>) for what refers to d. supported is
// false, with no error, when the registry does not serve the API (404, 400
// or 406, or an answer that is not an OCI index, as distribution 2.8 and
// GHCR answer); callers then read the referrers tag schema.
func (c *Client) Referrers(ctx context.Context, d name.Digest) (idx *v1.IndexManifest, supported bool, err error) {
	e, err := c.registryEntry(ctx, d.Context())
	if err != nil {
		return nil, false, fmt.Errorf("listing referrers of %s: %w", d, err)
	}
	scheme := d.Context().Scheme()
	u := url.URL{Scheme: scheme, Host: d.Context().RegistryStr(), Path: fmt.Sprintf("/v2/%s/referrers/%s", d.Context().RepositoryStr(), d.DigestStr())}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", string(types.OCIImageIndex))
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return nil, false, fmt.Errorf("listing referrers of %s: %w", d, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusNotAcceptable:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, false, nil
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("listing referrers of %s: %w", d, transport.CheckError(resp, http.StatusOK))
	case resp.Header.Get("Content-Type") != string(types.OCIImageIndex):
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, false, nil
	}
	idx, err = v1.ParseIndexManifest(io.LimitReader(resp.Body, maxReferrersIndex))
	if err != nil {
		return nil, true, fmt.Errorf("listing referrers of %s: %w", d, err)
	}
	return idx, true, nil
}

// Tags lists the tags of repo (every page).
func (c *Client) Tags(ctx context.Context, repo name.Repository) ([]string, error) {
	e, err := c.registryEntry(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", repo, err)
	}
	tags, err := remote.List(repo, append(c.remoteOptions(e.rt), remote.WithContext(ctx))...)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing tags of %s: %w", repo, err)
	}
	return tags, nil
}

// IsNotFound reports whether err is a registry's 404 answer.
func IsNotFound(err error) bool { return isNotFound(err) }
