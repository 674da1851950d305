package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/retry"
)

// A manifest PUT that names blobs or child manifests the registry says it
// does not have is tried again when another writer may be the cause.
//
// Distribution 2.8 on filesystem storage rewrites a repository's link file
// (…/_layers/…/link, …/_manifests/revisions/…/link) in place, truncate then
// write, whenever the same blob is mounted or uploaded or the same manifest
// is put again. Two publishes into one repository do exactly that to each
// other: one puts a child manifest (or mounts a layer, or uploads the empty
// config every attachment shares) the other put a moment before, and the
// other's manifest PUT (an index, an image, an attachment, a fallback
// referrers index), checking its references at that instant, reads an empty
// link and answers "DIGEST_INVALID ...; MANIFEST_BLOB_UNKNOWN ...
// sha256:<ref>". The reference is there a few microseconds later. So after
// such an answer the references are made sure of again (PutRetry.Repair)
// and the PUT is sent again, a few times within the client's budget.
const (
	// RefTries is the most tries a manifest PUT gets when each is
	// refused for an unknown reference.
	RefTries       = 5
	putRefMinDelay = 50 * time.Millisecond
)

// RefsUnknown reports whether err is a registry's answer that a manifest
// names a blob or manifest it does not hold.
func RefsUnknown(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestBlobUnknownErrorCode, transport.BlobUnknownErrorCode:
			return true
		}
	}
	return false
}

// PutRetry is what PutManifest does between tries.
type PutRetry struct {
	// Repair makes sure of the manifest's references again before the
	// next try (nil: nothing; the reference another writer's link rewrite
	// hid is back a moment later).
	Repair func(context.Context) error
	// OnRetry is told of each refusal tried again (nil: nobody).
	OnRetry func(ref name.Reference, err error)
}

// PutManifest is Put, tried again when the registry answers that a
// reference is unknown (RefsUnknown): Repair (if set) runs and the PUT is
// repeated after a short wait, at most RefTries times in all and within the
// client budget's MaxElapsed (a retry.Budget of its own: waits with full
// jitter from 50 ms, doubling). Any other error is returned at once (the
// transport has retried what was worth it).
func (c *Client) PutManifest(ctx context.Context, ref name.Reference, t remote.Taggable, r PutRetry) error {
	b := retry.Budget{Attempts: RefTries, MinBackoff: putRefMinDelay, MaxBackoff: putRefMinDelay << RefTries, MaxElapsed: c.Budget().MaxElapsed}
	var last error
	tries, err := b.Do(ctx, func(ctx context.Context, try int) (*http.Response, error) {
		if try > 1 && r.Repair != nil {
			if rerr := r.Repair(ctx); rerr != nil {
				return nil, retry.Stop(fmt.Errorf("%w; making sure of its references again: %w", last, rerr))
			}
		}
		err := c.Put(ctx, ref, t)
		if RefsUnknown(err) {
			last = err
			return nil, retry.Again(err)
		}
		return nil, retry.Stop(err)
	}, func(_ int, _ time.Duration, err error) {
		if r.OnRetry != nil {
			r.OnRetry(ref, err)
		}
	})
	if err != nil && tries > 1 && RefsUnknown(err) {
		err = fmt.Errorf("%w (after %d tries: a reference was unknown to the registry each time)", err, tries)
	}
	return err
}
