package publish

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Record kinds in the ledger.
const (
	KindImage = "image" // one per-arch image pushed to its per-arch repository
	KindIndex = "index" // one instance's multi-arch index (children copied, index put)
	KindBlob  = "blob"  // a blob upload to Repo was started (Pushed=false) or finished (Pushed=true)
)

// Record is one ledger line. The ledger is JSON lines, append-only; the last
// record for a key (kind, instance, platform; for blobs kind and digest) wins.
type Record struct {
	Time       string `json:"time"`
	Kind       string `json:"kind"`
	InstanceID string `json:"instance_id,omitempty"`
	Platform   string `json:"platform,omitempty"`
	// Ref is where the thing was written: the tagged per-arch image, the
	// tagged index, or for a blob the repository.
	Ref string `json:"ref,omitempty"`
	// Digest is the manifest, index or blob digest.
	Digest string `json:"digest"`
	// Size and MediaType describe the manifest (images only), so an index
	// can be assembled from the ledger alone.
	Size      int64  `json:"size,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	// SpecKey is the build input key the content tag was made from.
	SpecKey  string `json:"spec_key,omitempty"`
	Verified *bool  `json:"verified,omitempty"`
	Pushed   bool   `json:"pushed"`
	Error    string `json:"error,omitempty"`
}

// Key identifies what a record is about.
func (r Record) Key() string {
	if r.Kind == KindBlob {
		return r.Kind + "\x00" + r.Digest + "\x00" + r.Ref
	}
	return r.Kind + "\x00" + r.InstanceID + "\x00" + r.Platform
}

// Ledger is the publish ledger: instance -> platform -> digest, verified,
// pushed, error. Safe for concurrent use.
type Ledger struct {
	path string

	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	last   map[string]Record
	blobAt map[string][]string // blob digest -> repositories where an upload was started or done
	now    func() time.Time
}

// OpenLedger reads the ledger at path (if it exists) and opens it for
// appending. A torn last line (the process was killed mid-write) is ignored.
func OpenLedger(path string) (*Ledger, error) {
	l := &Ledger{path: path, last: map[string]Record{}, blobAt: map[string][]string{}, now: time.Now}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	r := bufio.NewReader(f)
	lineNo := 0
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			lineNo++
			var rec Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: parsing ledger record: %w", path, lineNo, jerr)
			}
			l.apply(rec)
			good += int64(len(line))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading ledger %s: %w", path, err)
		}
	}
	// Drop a torn tail so the next record starts on its own line.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncating torn ledger tail: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seeking ledger: %w", err)
	}
	l.f = f
	l.w = bufio.NewWriter(f)
	return l, nil
}

func (l *Ledger) apply(rec Record) {
	l.last[rec.Key()] = rec
	if rec.Kind == KindBlob && rec.Ref != "" {
		for _, r := range l.blobAt[rec.Digest] {
			if r == rec.Ref {
				return
			}
		}
		l.blobAt[rec.Digest] = append(l.blobAt[rec.Digest], rec.Ref)
	}
}

// Append writes a record and flushes it to the file (one write per record,
// so a kill leaves at most one torn line).
func (l *Ledger) Append(rec Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec.Time == "" {
		rec.Time = l.now().UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding ledger record: %w", err)
	}
	l.apply(rec)
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing ledger %s: %w", l.path, err)
	}
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("writing ledger %s: %w", l.path, err)
	}
	return nil
}

// Lookup returns the last record for kind/instance/platform.
func (l *Ledger) Lookup(kind, instanceID, platform string) (Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.last[Record{Kind: kind, InstanceID: instanceID, Platform: platform}.Key()]
	return r, ok
}

// BlobRepos returns the repositories where an upload of digest was started
// or finished, oldest first (candidates to mount from).
func (l *Ledger) BlobRepos(digest string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.blobAt[digest]...)
}

// Records returns the last record of every key, sorted by key.
func (l *Ledger) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.last))
	for k := range l.last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Record, 0, len(keys))
	for _, k := range keys {
		out = append(out, l.last[k])
	}
	return out
}

// Close flushes and closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	ferr := l.w.Flush()
	cerr := l.f.Close()
	l.f = nil
	if err := errors.Join(ferr, cerr); err != nil {
		return fmt.Errorf("closing ledger %s: %w", l.path, err)
	}
	return nil
}
