package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
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
// within the client's budget (MaxElapsed); any other error is returned at
// once.
func (p *publisher) putManifest(ctx context.Context, ref name.Reference, t remote.Taggable, repair func(context.Context) error) error {
	deadline := time.Now().Add(p.c.Budget().MaxElapsed)
	delay := putRefMinDelay
	for try := 1; ; try++ {
		err := p.c.Put(ctx, ref, t)
		if err == nil || !refsUnknown(err) || try >= putRefTries || time.Now().Add(delay).After(deadline) {
			if err != nil && try > 1 {
				err = fmt.Errorf("%w (after %d tries: a reference was unknown to the registry each time)", err, try)
			}
			return err
		}
		p.count(func(s *Summary) { s.RefRetries++ })
		p.progress("retry   %s: %v", ref, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
		if repair != nil {
			if rerr := repair(ctx); rerr != nil {
				return fmt.Errorf("%w; making sure of its references again: %w", err, rerr)
			}
		}
	}
}
