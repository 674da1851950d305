package publish

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
// write, whenever the same blob is mounted or the same manifest is put
// again. Two publishes into one repository do exactly that to each other:
// one puts a child manifest (or mounts a layer) the other put a moment
// before, and the other's index (or image) PUT, checking its references
// at that instant, reads an empty link and answers "DIGEST_INVALID ...;
// MANIFEST_BLOB_UNKNOWN ... sha256:<child>". The reference is there a few
// microseconds later. So after such an answer the references are made sure
// of again (repair) and the PUT is sent again, a few times within the
// client's budget.
const (
	putRefTries    = 5
	putRefMinDelay = 50 * time.Millisecond
)

// refsUnknown reports whether err is a registry's answer that a manifest
// names a blob or manifest it does not hold.
func refsUnknown(err error) bool {
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

// putManifest puts t at ref. When the registry answers that a reference is
// unknown, repair (if not nil) makes sure of the references again and the
// PUT is repeated after a short wait, at most putRefTries times in all and
// within the client's budget (MaxElapsed): a retry.Budget of its own, the
// waits from putRefMinDelay doubling; any other error is returned at once
// (the client's transport has retried what was worth it).
func (p *publisher) putManifest(ctx context.Context, ref name.Reference, t remote.Taggable, repair func(context.Context) error) error {
	b := retry.Budget{Attempts: putRefTries, MinBackoff: putRefMinDelay, MaxBackoff: putRefMinDelay << putRefTries, MaxElapsed: p.c.Budget().MaxElapsed}
	var last error
	tries, err := b.Do(ctx, func(ctx context.Context, try int) (*http.Response, error) {
		if try > 1 && repair != nil {
			if rerr := repair(ctx); rerr != nil {
				return nil, retry.Stop(fmt.Errorf("%w; making sure of its references again: %w", last, rerr))
			}
		}
		err := p.c.Put(ctx, ref, t)
		if refsUnknown(err) {
			last = err
			return nil, retry.Again(err)
		}
		return nil, retry.Stop(err)
	}, func(_ int, _ time.Duration, err error) {
		p.count(func(s *Summary) { s.RefRetries++ })
		p.progress("retry   %s: %v", ref, err)
	})
	if err != nil && tries > 1 && refsUnknown(err) {
		err = fmt.Errorf("%w (after %d tries: a reference was unknown to the registry each time)", err, tries)
	}
	return err
}
