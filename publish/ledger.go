package publish

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

// Ledger is the publish ledger: JSON lines of core.Image, appended to a
// core.Log (one writer at a time: a second publish on the same ledger gets
// core.ErrInUse at once). Records, the last of each core.Image.ID winning:
//
//   - instance: one per-arch image, published in its per-arch repository
//     (Ref REPO@DIGEST, Tags, Size and MediaType of the manifest) or failed;
//   - index: one instance's multi-arch index, published or failed;
//   - blob: a blob uploaded into a repository (Ref REPO@DIGEST): failed
//     ("upload started") before the upload, published after it. Both are
//     places a resumed run can mount the blob from instead of uploading it
//     again.
//
// Safe for concurrent use.
type Ledger struct {
	log *core.Log
	now func() time.Time

	mu       sync.Mutex
	last     map[string]core.Image
	blobAt   map[digest.Digest][]string // blob digest -> repositories it was uploaded to
	damaged  []*core.LineError
	migrated bool
}

// OpenLedger opens (creating it if needed) and locks the ledger at path. A
// torn last line (a kill mid-write) is dropped; other damaged lines are
// skipped and listed by Damaged: the refs they were about are checked
// against the registry again, as if never published. A ledger in the older
// format is converted first (Migrated).
func OpenLedger(path string) (*Ledger, error) {
	return OpenLedgerContext(context.Background(), path)
}

// OpenLedgerContext is OpenLedger that stops reading when ctx is done. The
// ledger is read with the limits of every record file before any
// conversion: a regular file (not /dev/zero, a FIFO or a device) of at
// most core.MaxFileBytes, checked by its size before a byte is read.
func OpenLedgerContext(ctx context.Context, path string) (*Ledger, error) {
	migrated, bad, err := migrateLegacy(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("converting the publish ledger: %w", err)
	}
	log, recs, damaged, err := core.OpenLogContext(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("opening the publish ledger: %w", err)
	}
	l := &Ledger{log: log, now: time.Now, last: map[string]core.Image{}, blobAt: map[digest.Digest][]string{}, damaged: append(bad, damaged...), migrated: migrated}
	for _, r := range recs {
		l.apply(r)
	}
	return l, nil
}

// Migrated reports whether OpenLedger converted a ledger of the older
// format (the original is at Path()+".legacy").
func (l *Ledger) Migrated() bool { return l.migrated }

// Torn is the torn last line OpenLedger dropped (a run killed while
// appending it), nil when there was none.
func (l *Ledger) Torn() *core.LineError { return l.log.Torn() }

// Damaged returns the lines OpenLedger skipped.
func (l *Ledger) Damaged() []*core.LineError { return l.damaged }

// Path is the ledger file.
func (l *Ledger) Path() string { return l.log.Path() }

func (l *Ledger) apply(r core.Image) {
	l.last[r.ID()] = r
	if r.Kind != core.KindBlob {
		return
	}
	repo, _, _ := strings.Cut(r.Ref, "@")
	for _, have := range l.blobAt[r.Digest] {
		if have == repo {
			return
		}
	}
	l.blobAt[r.Digest] = append(l.blobAt[r.Digest], repo)
}

// Append validates r, stamps its time and writes it as one line.
func (l *Ledger) Append(r core.Image) error {
	if r.Time == "" {
		r.Time = core.Now(l.now())
	}
	if err := l.log.Append(r); err != nil {
		return fmt.Errorf("writing the publish ledger: %w", err)
	}
	l.mu.Lock()
	l.apply(r)
	l.mu.Unlock()
	return nil
}

// Lookup returns the last record about an instance image (kind instance,
// with its platform) or an index (kind index, no platform).
func (l *Ledger) Lookup(kind core.Kind, instanceID string, p core.Platform) (core.Image, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.last[core.Image{Kind: kind, InstanceID: instanceID, Platform: p}.ID()]
	return r, ok
}

// BlobRepos returns the repositories an upload of d was started or
// finished in, oldest first.
func (l *Ledger) BlobRepos(d digest.Digest) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.blobAt[d]...)
}

// Records returns the last record of every ID, sorted by ID.
func (l *Ledger) Records() []core.Image {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]core.Image, 0, len(l.last))
	for _, r := range l.last {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Close syncs the file and releases the lock.
func (l *Ledger) Close() error {
	if err := l.log.Close(); err != nil {
		return fmt.Errorf("closing the publish ledger: %w", err)
	}
	return nil
}

// IsInUse reports whether err is another process holding the ledger.
func IsInUse(err error) bool { return errors.Is(err, core.ErrInUse) }
