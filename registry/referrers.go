package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Referrers asks the registry's referrers API (OCI distribution 1.1,
// GET /v2/<name>/referrers/<digest>) for what refers to d, every page within
// lim. supported is false, with no error, when the registry does not serve
// the API (404, 400 or 406, or an answer that is not an OCI index, as
// distribution 2.8 and GHCR answer); callers then read the referrers tag
// schema.
func (c *Client) Referrers(ctx context.Context, d name.Digest, lim ListLimits) (idx *v1.IndexManifest, supported bool, err error) {
	e, err := c.registryEntry(ctx, d.Context())
	if err != nil {
		return nil, false, fmt.Errorf("listing referrers of %s: %w", d, err)
	}
	u := &url.URL{Scheme: d.Context().Scheme(), Host: d.Context().RegistryStr(), Path: fmt.Sprintf("/v2/%s/referrers/%s", d.Context().RepositoryStr(), d.DigestStr())}
	what := "the referrers of " + d.String()
	supported = true
	err = c.pages(ctx, e.rt, u, string(types.OCIImageIndex), what, lim, func(resp *http.Response, body []byte) error {
		switch {
		case idx == nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotAcceptable):
			supported = false
			return errStop
		case resp.StatusCode != http.StatusOK:
			return statusError(resp, body)
		case idx == nil && resp.Header.Get("Content-Type") != string(types.OCIImageIndex):
			supported = false
			return errStop
		}
		var page v1.IndexManifest
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		if idx == nil {
			idx = &page
		} else {
			idx.Manifests = append(idx.Manifests, page.Manifests...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("listing referrers of %s: %w", d, c.explain(err, d.Context().RegistryStr()))
	}
	return idx, supported, nil
}

// Tags lists the tags of repo, every page within lim (a repository that
// does not exist has none).
func (c *Client) Tags(ctx context.Context, repo name.Repository, lim ListLimits) ([]string, error) {
	e, err := c.registryEntry(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", repo, err)
	}
	u := &url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/tags/list", repo.RepositoryStr()), RawQuery: "n=1000"}
	var tags []string
	err = c.pages(ctx, e.rt, u, "", "the tag list of "+repo.String(), lim, func(resp *http.Response, body []byte) error {
		if resp.StatusCode == http.StatusNotFound && tags == nil {
			return errStop
		}
		if resp.StatusCode != http.StatusOK {
			return statusError(resp, body)
		}
		var page struct {
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		tags = append(tags, page.Tags...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", repo, c.explain(err, repo.RegistryStr()))
	}
	return tags, nil
}

// IsNotFound reports whether err is a registry's 404 answer.
func IsNotFound(err error) bool { return isNotFound(err) }
