package publish

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/registry"
)

// putManifest puts t at ref with the registry client's retry of a PUT
// refused for an unknown reference (registry.PutManifest: another publish
// into the same repository rewriting a link file at that instant), repair
// (if not nil) making sure of the references before each new try; each
// retry is counted (Summary.RefRetries) and shown. Attachments and fallback
// referrers indexes get the same retry (attest.Referrers).
func (p *publisher) putManifest(ctx context.Context, ref name.Reference, t remote.Taggable, repair func(context.Context) error) error {
	return p.c.PutManifest(ctx, ref, t, registry.PutRetry{Repair: repair, OnRetry: p.onRefRetry})
}

// onRefRetry counts and shows a PUT tried again for an unknown reference.
func (p *publisher) onRefRetry(ref name.Reference, err error) {
	p.count(func(s *Summary) { s.RefRetries++ })
	p.progress("retry   %s: %v", ref, err)
}
