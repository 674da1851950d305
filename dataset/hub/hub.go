// Package hub downloads SWE-bench datasets from the Hugging Face Hub by name,
// the way huggingface_hub and datasets find and fetch them, and keeps them
// in a cache by commit so that a later run (or an offline one) reads the
// very same bytes.
//
// # What it asks the hub
//
//   - GET {endpoint}/api/datasets/{name}/revision/{revision}?blobs=true: the
//     commit a branch or tag points to ("sha"), the files at that commit
//     with their sizes and LFS sha256 ("siblings") and the dataset card's
//     configs ("cardData"); the revision is escaped as one path segment
//     ("refs%2Fconvert%2Fparquet");
//   - GET {endpoint}/datasets/{name}/resolve/{commit}/{path}: a file, always
//     at the commit found above, never at a branch; LFS files answer with a
//     redirect to a CDN on another host, which is followed without the
//     token: it goes only to the endpoint's scheme, host and port (Go's
//     client alone keeps it for the same host name on another port or
//     scheme, and for subdomains).
//
// The files of a split are found as datasets finds them (see splits): the
// card's default config, else data/{split}-NNNNN-of-NNNNN.*, else the
// parquet conversion layout, else split keywords. When the default branch
// holds no file swebuild can read (.parquet, .jsonl, .json), the hub's
// parquet conversion (the branch refs/convert/parquet) is used instead, at
// its own commit.
//
// Errors follow the hub's X-Error-Code header: RepoNotFound (401 without a
// token, for private and gated datasets too), RevisionNotFound,
// EntryNotFound, GatedRepo.
//
// # Cache
//
// Under Options.CacheDir:
//
//	datasets/{owner}/{name}/refs/{escaped revision}.json  a branch or tag -> commit, and when it was asked
//	datasets/{owner}/{name}/{commit}/revision.json        the files and configs at the commit
//	datasets/{owner}/{name}/{commit}/files/{path}         downloaded files, checked against size and sha256
//	datasets/{owner}/{name}/{commit}/sha256/{path}        the sha256 of a downloaded file the hub lists none for (outside LFS)
//
// A cached file is used only when its size and sha256 match what the hub
// lists (or, outside LFS, what was recorded at download); otherwise it is
// downloaded again, or, offline, it is an error naming the file.
//
// A commit's entries never change. A branch or tag is asked again once its
// entry is older than Options.RefTTL; offline, the entry is used whatever
// its age. Everything is written through a temporary file and a rename.
//
// # Budget
//
// Each request (one API call, or one file) has a retry budget (package
// retry, Options.Budget): at most Budget.Attempts attempts within
// Budget.MaxElapsed, waits included. An attempt fails when connecting and
// receiving the headers takes longer than Budget.AnswerTimeout, or when the
// body stops for Options.StallTimeout. Retried: connection errors,
// retry.Statuses (408, 429, 500, 502, 503, 504), bodies that end early or
// do not match the size and sha256 the hub listed. Never retried: other
// answers (401, 403, 404 are answers), a body over the size limit, a
// redirect loop. The wait after n failed attempts is a backoff with full
// jitter in [MinBackoff, MinBackoff * 2^n] (at most MaxBackoff), or what a
// 429/503's Retry-After asks, at most MaxRetryAfter. With the defaults a
// request gives up after 5 attempts (4 waits of at most 1+2+4+8 s) or 15
// minutes, whichever comes first.
package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/retry"
)

// DefaultEndpoint is the hub (huggingface_hub's default HF_ENDPOINT).
const DefaultEndpoint = "https://huggingface.co"

// ConvertRevision is the branch holding the hub's parquet conversion.
const ConvertRevision = "refs/convert/parquet"

// Defaults of Options fields left zero.
const (
	DefaultRefTTL       = time.Hour
	DefaultMaxFileBytes = 1 << 30
	// DefaultStallTimeout is how long a body may send nothing.
	DefaultStallTimeout = time.Minute
	// maxAPIBytes caps an API answer (a file listing): the revision answer
	// of a SWE-bench dataset is a few KB.
	maxAPIBytes = 64 << 20
)

// DefaultBudget is a request's retry budget when Options.Budget leaves a
// field zero (see the package documentation).
var DefaultBudget = retry.Budget{
	Attempts:      5,
	MinBackoff:    500 * time.Millisecond,
	MaxBackoff:    30 * time.Second,
	MaxRetryAfter: 2 * time.Minute,
	AnswerTimeout: 30 * time.Second,
	MaxElapsed:    15 * time.Minute,
	Statuses:      retry.Statuses,
}

// Options configures a Client.
type Options struct {
	// Endpoint is the hub's base URL. Default DefaultEndpoint.
	Endpoint string
	// Token, when set, is sent as "Authorization: Bearer" to the endpoint.
	Token string
	// CacheDir holds downloaded datasets; required.
	CacheDir string
	// Offline makes no request: everything comes from the cache.
	Offline bool
	// RefTTL is how long a branch or tag is trusted to still point to the
	// commit it pointed to. Default DefaultRefTTL.
	RefTTL time.Duration
	// MaxFileBytes caps a downloaded file. Default DefaultMaxFileBytes.
	MaxFileBytes int64
	// Budget bounds each request; zero fields take DefaultBudget's.
	Budget retry.Budget
	// StallTimeout ends an attempt whose body sends nothing for this long.
	// Default DefaultStallTimeout.
	StallTimeout time.Duration
	// HTTPClient makes the requests. Default: a pooled client honouring
	// the proxy variables.
	HTTPClient *http.Client
	// Log, when not nil, gets a line per download.
	Log io.Writer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Client downloads datasets from the hub through the cache. It is safe for
// concurrent use.
type Client struct {
	endpoint string
	token    string
	dir      string
	offline  bool
	ttl      time.Duration
	maxFile  int64
	budget   retry.Budget
	stall    time.Duration
	http     *http.Client
	log      io.Writer
	now      func() time.Time
	requests atomic.Int64
}

// New makes a Client.
func New(opts Options) (*Client, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("hub: no cache directory given")
	}
	c := &Client{
		endpoint: strings.TrimSuffix(opts.Endpoint, "/"),
		token:    opts.Token,
		dir:      opts.CacheDir,
		offline:  opts.Offline,
		ttl:      opts.RefTTL,
		maxFile:  opts.MaxFileBytes,
		budget:   opts.Budget.Or(DefaultBudget),
		stall:    opts.StallTimeout,
		http:     opts.HTTPClient,
		log:      opts.Log,
		now:      opts.Now,
	}
	if c.endpoint == "" {
		c.endpoint = DefaultEndpoint
	}
	if u, err := url.Parse(c.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hub: endpoint %q is not an http(s) URL", opts.Endpoint)
	}
	if c.ttl <= 0 {
		c.ttl = DefaultRefTTL
	}
	if c.stall <= 0 {
		c.stall = DefaultStallTimeout
	}
	if c.maxFile <= 0 {
		c.maxFile = DefaultMaxFileBytes
	}
	if c.http == nil {
		c.http = cleanhttp.DefaultPooledClient()
	}
	c.http = tokenOnlyToOrigin(c.http)
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Requests is the number of HTTP requests the client has made (each
// attempt counts).
func (c *Client) Requests() int64 { return c.requests.Load() }

// Snapshot is a split of a dataset at one commit, on disk.
type Snapshot struct {
	Name     string // owner/name
	Revision string // the commit the files were read at
	Split    string
	Files    []File // in path order
}

// File is one data file of a snapshot.
type File struct {
	RepoFile
	Local string // the cached copy
}

// String is NAME@COMMIT:SPLIT, the pinned form of the snapshot's Ref.
func (s *Snapshot) String() string { return s.Name + "@" + s.Revision + ":" + s.Split }

// URI names a file of the snapshot as huggingface_hub's HfFileSystem does,
// hf://datasets/NAME@COMMIT/PATH, for messages.
func (s *Snapshot) URI(f File) string {
	return "hf://datasets/" + s.Name + "@" + s.Revision + "/" + f.Path
}

// Errors the hub's answers map to (errors.Is).
var (
	ErrRepoNotFound     = errors.New("dataset not found")
	ErrRevisionNotFound = errors.New("revision not found")
	ErrEntryNotFound    = errors.New("file not found")
	ErrGated            = errors.New("gated dataset")
	ErrNoSplit          = errors.New("no such split")
	ErrOffline          = errors.New("offline")
	ErrTooLarge         = errors.New("over the size limit")
)

// HTTPError is a final answer other than 200.
type HTTPError struct {
	URL        string
	StatusCode int
	Status     string
	Code       string // X-Error-Code
	Message    string // X-Error-Message
	Attempts   int
}

func (e *HTTPError) Error() string {
	s := "GET " + e.URL + ": " + e.Status
	if e.Code != "" {
		s += " (" + e.Code
		if e.Message != "" {
			s += ": " + e.Message
		}
		s += ")"
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return s
}

// Is maps the hub's error codes, as huggingface_hub's hf_raise_for_status
// does (a 401 on a repository URL without another code is RepoNotFound).
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrRepoNotFound:
		return e.Code == "RepoNotFound" || e.Code == "" && e.StatusCode == http.StatusUnauthorized
	case ErrRevisionNotFound:
		return e.Code == "RevisionNotFound"
	case ErrEntryNotFound:
		return e.Code == "EntryNotFound" || e.Code == "" && e.StatusCode == http.StatusNotFound
	case ErrGated:
		return e.Code == "GatedRepo"
	}
	return false
}

// Fetch downloads (or finds in the cache) the split ref names and returns
// it pinned to a commit.
func (c *Client) Fetch(ctx context.Context, ref Ref) (*Snapshot, error) {
	if ref.Name == "" {
		return nil, errors.New("hub: no dataset name")
	}
	split := ref.Split
	if split == "" {
		split = DefaultSplit
	}
	revName := ref.Revision
	if revName == "" {
		revName = DefaultRevision
	}
	rev, err := c.revision(ctx, ref.Name, revName)
	if err != nil {
		return nil, err
	}
	splits, err := rev.splits()
	if err != nil {
		return nil, fmt.Errorf("dataset %s@%s: %w", ref.Name, rev.SHA, err)
	}
	if ref.Revision == "" && !anyReadable(splits) {
		// Nothing swebuild reads on the default branch: the hub's own
		// parquet conversion, when there is one.
		conv, cerr := c.revision(ctx, ref.Name, ConvertRevision)
		switch {
		case cerr == nil:
			if cs, err := conv.splits(); err == nil && len(cs) > 0 {
				rev, splits = conv, cs
			}
		case !errors.Is(cerr, ErrRevisionNotFound):
			return nil, cerr
		}
	}
	files, ok := splits[split]
	if !ok {
		if len(splits) == 0 {
			return nil, fmt.Errorf("dataset %s@%s: %w %q: the dataset has no data files", ref.Name, rev.SHA, ErrNoSplit, split)
		}
		return nil, fmt.Errorf("dataset %s@%s: %w %q; its splits: %s", ref.Name, rev.SHA, ErrNoSplit, split, strings.Join(splitNames(splits), ", "))
	}
	if strings.HasPrefix(split, "partial-") {
		return nil, fmt.Errorf("dataset %s@%s: split %q is only a partial parquet conversion", ref.Name, rev.SHA, split)
	}
	var unreadable []string
	snap := &Snapshot{Name: ref.Name, Revision: rev.SHA, Split: split}
	for _, f := range files {
		if !readable(f.Path) {
			unreadable = append(unreadable, f.Path)
			continue
		}
		snap.Files = append(snap.Files, File{RepoFile: f})
	}
	if len(snap.Files) == 0 {
		if len(unreadable) > 0 {
			return nil, fmt.Errorf("dataset %s@%s: split %q has only files swebuild does not read (it reads .parquet, .jsonl, .json): %s", ref.Name, rev.SHA, split, strings.Join(unreadable, ", "))
		}
		return nil, fmt.Errorf("dataset %s@%s: split %q has no data files", ref.Name, rev.SHA, split)
	}
	for i := range snap.Files {
		if err := c.file(ctx, snap, &snap.Files[i]); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

func anyReadable(splits map[string][]RepoFile) bool {
	for _, files := range splits {
		for _, f := range files {
			if readable(f.Path) {
				return true
			}
		}
	}
	return false
}

// repoDir is the cache directory of a dataset.
func (c *Client) repoDir(name string) string {
	return filepath.Join(c.dir, "datasets", filepath.FromSlash(name))
}

// refEntry is a cached branch or tag.
type refEntry struct {
	SHA  string    `json:"sha"`
	Time time.Time `json:"time"`
}

// revision returns the files and configs of name at revName (a branch, tag
// or commit), from the cache when it may be trusted.
func (c *Client) revision(ctx context.Context, name, revName string) (*revision, error) {
	dir := c.repoDir(name)
	refPath := filepath.Join(dir, "refs", url.PathEscape(revName)+".json")
	sha := ""
	if isCommit(revName) {
		sha = revName
	} else if b, err := readSmall(refPath); err == nil {
		var e refEntry
		if json.Unmarshal(b, &e) == nil && isCommit(e.SHA) && (c.offline || c.now().Sub(e.Time) < c.ttl) {
			sha = e.SHA
		}
	}
	if sha != "" {
		if rev, err := readRevision(filepath.Join(dir, sha, "revision.json")); err == nil && rev.SHA == sha {
			return rev, nil
		}
	}
	if c.offline {
		what := fmt.Sprintf("dataset %s revision %s", name, revName)
		if sha != "" && sha != revName {
			what += " (commit " + sha + ")"
		}
		return nil, fmt.Errorf("%w: %s is not in the cache (%s)", ErrOffline, what, dir)
	}
	u := c.endpoint + "/api/datasets/" + name + "/revision/" + url.PathEscape(revName) + "?blobs=true"
	var body []byte
	_, err := c.get(ctx, u, func(r io.Reader, _ *http.Response) error {
		b, err := io.ReadAll(io.LimitReader(r, maxAPIBytes+1))
		if err != nil {
			return retry.Again(err)
		}
		if len(b) > maxAPIBytes {
			return fmt.Errorf("the answer is larger than %d bytes", maxAPIBytes)
		}
		body = b
		return nil
	})
	if err != nil {
		return nil, c.describe(name, revName, err)
	}
	rev, err := parseInfo(body)
	if err != nil {
		return nil, fmt.Errorf("dataset %s revision %s: %s: %w", name, revName, u, err)
	}
	if isCommit(revName) && rev.SHA != revName {
		return nil, fmt.Errorf("dataset %s: asked for commit %s, the hub answered with commit %s", name, revName, rev.SHA)
	}
	b, _ := json.Marshal(rev)
	if err := writeAtomic(filepath.Join(dir, rev.SHA, "revision.json"), b); err != nil {
		return nil, err
	}
	if !isCommit(revName) {
		e, _ := json.Marshal(refEntry{SHA: rev.SHA, Time: c.now().UTC()})
		if err := writeAtomic(refPath, e); err != nil {
			return nil, err
		}
	}
	return rev, nil
}

// describe words a failed API request about a dataset.
func (c *Client) describe(name, revName string, err error) error {
	switch {
	case errors.Is(err, ErrRevisionNotFound):
		return fmt.Errorf("dataset %s has no revision %q: %w", name, revName, err)
	case errors.Is(err, ErrGated):
		return fmt.Errorf("dataset %s is gated: accept its conditions on the hub and use a token of that account: %w", name, err)
	case errors.Is(err, ErrRepoNotFound):
		hint := "a private or gated dataset needs a token"
		if c.token != "" {
			hint = "or the token sent has no access to it"
		}
		return fmt.Errorf("dataset %s not found on %s (%s): %w", name, c.endpoint, hint, err)
	}
	return fmt.Errorf("dataset %s revision %s: %w", name, revName, err)
}

func readRevision(path string) (*revision, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	var rev revision
	if err := json.Unmarshal(b, &rev); err != nil {
		return nil, err
	}
	for _, f := range rev.Files {
		if !safeRepoPath(f.Path) {
			return nil, fmt.Errorf("%s: file %q is not a plain relative path", path, f.Path)
		}
	}
	return &rev, nil
}

// readSmall reads a cache entry swebuild wrote (a few KB), refusing one
// over the API answer limit.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAPIBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAPIBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxAPIBytes)
	}
	return b, nil
}

// file puts f of snap in the cache (unless it is there) and sets f.Local.
func (c *Client) file(ctx context.Context, snap *Snapshot, f *File) error {
	local := filepath.Join(c.repoDir(snap.Name), snap.Revision, "files", filepath.FromSlash(f.Path))
	f.Local = local
	what := fmt.Sprintf("dataset %s: %s", snap, f.Path)
	sidecar := filepath.Join(c.repoDir(snap.Name), snap.Revision, "sha256", filepath.FromSlash(f.Path))
	if fi, err := os.Stat(local); err == nil {
		if f.Size == 0 || fi.Size() == f.Size {
			ok, err := c.cachedIntact(local, sidecar, f)
			if ok || err != nil {
				if err != nil {
					err = fmt.Errorf("%s: %w", what, err)
				}
				return err
			}
			if c.log != nil {
				fmt.Fprintf(c.log, "cached %s %s does not match its sha256; downloading it again\n", snap, f.Path)
			}
		}
		// A copy of another size or other bytes: not one this client
		// wrote. Fetch again.
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if c.offline {
		return fmt.Errorf("%w: %s is not in the cache (%s)", ErrOffline, what, local)
	}
	if f.Size > c.maxFile {
		return fmt.Errorf("%s: %d bytes: %w of %d bytes a file", what, f.Size, ErrTooLarge, c.maxFile)
	}
	if c.log != nil {
		fmt.Fprintf(c.log, "downloading %s %s (%d bytes)\n", snap, f.Path, f.Size)
	}
	u := c.endpoint + "/datasets/" + snap.Name + "/resolve/" + snap.Revision + "/" + escapePath(f.Path)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var sum string // of the bytes downloaded
	// Each attempt writes a temporary file that replaces local only once
	// its size and sha256 are right (core.WriteAtomic).
	_, err := c.get(ctx, u, func(r io.Reader, resp *http.Response) error {
		if resp.ContentLength > c.maxFile {
			return fmt.Errorf("%d bytes: %w of %d bytes a file", resp.ContentLength, ErrTooLarge, c.maxFile)
		}
		return core.WriteAtomic(local, 0o644, func(w io.Writer) error {
			var h hash.Hash = sha256.New()
			n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, c.maxFile+1))
			switch {
			case err != nil:
				return retry.Again(fmt.Errorf("truncated: %d of %s bytes (%w)", n, sizeOr(f.Size, resp.ContentLength), err))
			case n > c.maxFile:
				return fmt.Errorf("more than %d bytes: %w of %d bytes a file", c.maxFile, ErrTooLarge, c.maxFile)
			case f.Size > 0 && n != f.Size:
				return retry.Again(fmt.Errorf("truncated: %d of %d bytes", n, f.Size))
			}
			if sum = hex.EncodeToString(h.Sum(nil)); f.SHA256 != "" && sum != f.SHA256 {
				return retry.Again(fmt.Errorf("sha256 %s, the hub lists %s", sum, f.SHA256))
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%s: downloading: %w", what, err)
	}
	if f.SHA256 == "" {
		// The hub lists no digest for a file outside LFS: keep the one of
		// the bytes downloaded, to check the cached copy against.
		if err := os.MkdirAll(filepath.Dir(sidecar), 0o755); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := writeAtomic(sidecar, []byte(sum+"\n")); err != nil {
			return fmt.Errorf("%s: recording its sha256: %w", what, err)
		}
	}
	return nil
}

// cachedIntact reports whether the cached copy local of f has the sha256
// the hub lists for it, or, for a file the hub lists none for, the one
// recorded at download (sidecar). A copy that does not match is an error
// offline (nothing to fetch it again from) and false online. A copy with no
// digest to check (written by a version that kept none) is trusted by its
// size, as it was then.
func (c *Client) cachedIntact(local, sidecar string, f *File) (bool, error) {
	want, from := f.SHA256, "the hub lists"
	if want == "" {
		b, err := readSmall(sidecar)
		if err != nil {
			return true, nil
		}
		want, from = strings.TrimSpace(string(b)), "recorded when it was downloaded"
	}
	got, err := fileSHA256(local)
	if err != nil {
		return false, err
	}
	if got == want {
		return true, nil
	}
	if c.offline {
		return false, fmt.Errorf("%w: the cached copy %s has sha256 %s, not the %s %s (remove it, or fetch online)", ErrOffline, local, got, from, want)
	}
	return false, nil
}

// fileSHA256 is the hex sha256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sizeOr(listed, contentLength int64) string {
	switch {
	case listed > 0:
		return fmt.Sprint(listed)
	case contentLength >= 0:
		return fmt.Sprint(contentLength)
	}
	return "?"
}

// escapePath escapes each part of a repository path (huggingface_hub's
// quote(filename), which keeps '/').
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// writeAtomic writes data to path (its directory made if missing) through
// core.WriteBytesAtomic.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if err := core.WriteBytesAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	return nil
}

// errStalled and errNoHeaders end an attempt that waited too long.
var (
	errStalled   = errors.New("no data for too long")
	errNoHeaders = errors.New("no answer in time")
)

// stallReader resets the attempt's timer on every read that brings data.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.d)
	}
	return n, err
}

// get sends GET u until an attempt gets a 200 whose body read accepts,
// within the budget (see the package documentation). read consumes the
// body; an error it marks retry.Again makes another attempt.
func (c *Client) get(ctx context.Context, u string, read func(io.Reader, *http.Response) error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.budget.MaxElapsed)
	defer cancel()
	n, err := c.budget.Do(ctx, func(ctx context.Context, _ int) (*http.Response, error) {
		return c.attempt(ctx, u, read)
	}, nil)
	if err == nil {
		return n, nil
	}
	var herr *HTTPError
	if errors.As(err, &herr) {
		herr.Attempts = n
		return n, err
	}
	if ctx.Err() != nil {
		if cerr := context.Cause(ctx); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%v)", err, cerr)
		}
	}
	if n > 1 {
		err = fmt.Errorf("%w, after %d attempts", err, n)
	}
	return n, err
}

// attempt makes one request. It returns the response (its body closed) for
// the retry policy, and an *HTTPError for a final status other than 200.
func (c *Client) attempt(ctx context.Context, u string, read func(io.Reader, *http.Response) error) (*http.Response, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var reading atomic.Bool // the headers came: the timer now measures stalls
	timer := time.AfterFunc(c.budget.AnswerTimeout, func() {
		if reading.Load() {
			cancel(errStalled)
		} else {
			cancel(errNoHeaders)
		}
	})
	defer timer.Stop()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "swebuild")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("GET %s: %w", u, cause)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return resp, &HTTPError{URL: u, StatusCode: resp.StatusCode, Status: resp.Status,
			Code: resp.Header.Get("X-Error-Code"), Message: resp.Header.Get("X-Error-Message"), Attempts: 1}
	}
	reading.Store(true)
	timer.Reset(c.stall)
	err = read(&stallReader{r: resp.Body, timer: timer, d: c.stall}, resp)
	if err != nil && ctx.Err() == nil {
		if cause := context.Cause(actx); errors.Is(cause, errStalled) || errors.Is(cause, errNoHeaders) {
			return resp, retry.Again(fmt.Errorf("%w: %v", errStalled, err))
		}
	}
	return resp, err
}

// tokenOnlyToOrigin returns a copy of hc whose redirects carry no
// Authorization header unless they stay on the first request's scheme, host
// and port (http.Client keeps it for the same host name on any port or
// scheme, and for a subdomain). hc's own redirect policy still applies.
func tokenOnlyToOrigin(hc *http.Client) *http.Client {
	cp := *hc
	next := hc.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && origin(req.URL) != origin(via[0].URL) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return retry.Stop(errors.New("stopped after 10 redirects"))
		}
		return nil
	}
	return &cp
}

// origin is scheme://host:port with the scheme's default port filled in.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
