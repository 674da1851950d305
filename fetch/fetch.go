// Package fetch downloads the few files upstream SWE-bench v4.1.0 fetches
// while generating environment scripts (requirements.txt / environment.yml
// from GitHub raw at environment_setup_commit), with retries and an on-disk
// cache, so that a run that once had the network can be repeated offline.
//
// What upstream does with those files (candidate URLs, "-r" includes,
// REPLACE_REQ_PACKAGES) is package envfile, which asks an envfile.Source for
// each URL; pipeline resolves the files a dataset needs through this client
// before rendering (render does no I/O).
//
// Cache: one file per URL in CacheDir, named by the hex sha256 of the URL
// (always the raw.githubusercontent.com form, whatever BaseURL is), written
// through a temporary file and a rename. A 200 answer is reused forever
// (the URLs name a commit, so the content cannot change). A 404/410 leaves a
// "<key>.notfound" marker that only offline runs trust, so an offline run
// picks the same candidate as the online run did, while a later online run
// asks again. Offline, a URL in neither form is an error naming the URL and
// the cache directory.
//
// Within one Client (one run) every URL is requested at most once: a
// failure is remembered and returned again without a request, and a host
// that gave no answer at all (no DNS, connection refused, timeouts) after
// the retries is not asked again: later URLs on it fail at once with an
// error matching ErrUnreachable. Unreachable lists those URLs, so a command
// can say which files it needs and how to get them. Retries and downloads
// still waiting after ProgressAfter are reported to Options.Log.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"golang.org/x/sync/singleflight"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/envfile"
	"github.com/swebuild/swebuild/retry"
)

// DefaultBaseURL is where upstream fetches from (SWE_BENCH_URL_RAW).
const DefaultBaseURL = "https://raw.githubusercontent.com"

// Defaults for Options fields left zero.
const (
	DefaultMaxBodyBytes  = 64 << 20
	DefaultProgressAfter = 5 * time.Second
)

// DefaultBudget is a download's retry budget (package retry): 5 attempts of
// at most 30 s each (the whole attempt, body included), waits of at most
// 0.5 + 1 + 2 + 4 s between them (or a 429/503's Retry-After, at most
// 2 min), within 5 min in all.
var DefaultBudget = retry.Budget{
	Attempts:      5,
	AnswerTimeout: 30 * time.Second,
	MinBackoff:    250 * time.Millisecond,
	MaxBackoff:    30 * time.Second,
	MaxRetryAfter: 2 * time.Minute,
	MaxElapsed:    5 * time.Minute,
	Statuses:      retry.Statuses,
}

// ErrOffline is wrapped by the error Get returns in offline mode for a URL
// that is not in the cache.
var ErrOffline = errors.New("offline")

// ErrUnreachable is wrapped by the error Get returns for a URL whose host
// gave no answer (after the retries) in this run.
var ErrUnreachable = errors.New("unreachable")

// ErrNotFound matches (errors.Is) an *HTTPError with status 404 or 410, and
// FirstOf's error when no candidate exists.
var ErrNotFound = errors.New("not found")

// HTTPError is a final non-200 answer.
type HTTPError struct {
	URL        string
	StatusCode int
	Status     string // e.g. "404 Not Found"
	Attempts   int    // requests made; 0 when the answer came from the cache
}

func (e *HTTPError) Error() string {
	switch {
	case e.Attempts == 0:
		return fmt.Sprintf("GET %s: %s (cached answer)", e.URL, e.Status)
	case e.Attempts > 1:
		return fmt.Sprintf("GET %s: %s after %d attempts", e.URL, e.Status, e.Attempts)
	}
	return fmt.Sprintf("GET %s: %s", e.URL, e.Status)
}

// Is makes errors.Is(err, ErrNotFound) true for 404 and 410.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && (e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusGone)
}

// Options configures a Client. The zero value is usable.
type Options struct {
	// CacheDir holds cached bodies; required (swebuild uses
	// <cache root>/http).
	CacheDir string
	// Offline forbids network access: only cached answers are returned.
	Offline bool
	// BaseURL receives the requests for URLs under DefaultBaseURL (tests
	// point it at an httptest server). URLs, cache keys and messages keep
	// the DefaultBaseURL form. Default: DefaultBaseURL.
	BaseURL string
	// Budget bounds each download's attempts (AnswerTimeout: one whole
	// attempt, body included); zero fields take DefaultBudget's. Retried:
	// connection errors and retry.Statuses; never a 404.
	Budget retry.Budget
	// MaxBodyBytes caps a response body, and a cached body read back.
	// Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// HTTPClient is the underlying client (its Timeout is overridden by
	// Budget.AnswerTimeout). Default: a pooled client honouring proxy
	// variables.
	HTTPClient *http.Client
	// Log receives a line per retry and per ProgressAfter a download is
	// still waiting, from each download's goroutine (written through
	// core.SyncWriter). Default: nothing is logged.
	Log io.Writer
	// ProgressAfter is how long a download runs before Log hears of it,
	// and then how often. Default: DefaultProgressAfter.
	ProgressAfter time.Duration
}

// Client fetches URLs through the cache. It is safe for concurrent use;
// concurrent Gets of one URL make a single request.
type Client struct {
	dir           string
	offline       bool
	base          string
	maxBody       int64
	budget        retry.Budget
	http          *http.Client
	group         singleflight.Group
	log           io.Writer
	progressAfter time.Duration

	mu          sync.Mutex
	failed      map[string]error // URL -> its failure in this run
	down        map[string]error // host -> why it is not asked again
	unreachable map[string]bool  // URLs that failed for want of an answer
}

// New makes a Client.
func New(opts Options) (*Client, error) {
	c := &Client{
		dir:           opts.CacheDir,
		offline:       opts.Offline,
		base:          strings.TrimSuffix(opts.BaseURL, "/"),
		maxBody:       opts.MaxBodyBytes,
		budget:        opts.Budget.Or(DefaultBudget),
		log:           opts.Log,
		progressAfter: opts.ProgressAfter,
		failed:        map[string]error{},
		down:          map[string]error{},
		unreachable:   map[string]bool{},
	}
	if c.log == nil {
		c.log = io.Discard
	} else {
		c.log = core.SyncWriter(c.log)
	}
	if c.progressAfter <= 0 {
		c.progressAfter = DefaultProgressAfter
	}
	if c.dir == "" {
		return nil, errors.New("fetch: no cache directory given")
	}
	if c.base == "" {
		c.base = DefaultBaseURL
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxBodyBytes
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = cleanhttp.DefaultPooledClient()
	} else {
		copied := *hc
		hc = &copied
	}
	hc.Timeout = c.budget.AnswerTimeout
	c.http = hc
	return c, nil
}

// CacheDir is the directory the client caches in.
func (c *Client) CacheDir() string { return c.dir }

// noAnswer is a download that got no HTTP answer (DNS, connection, timeout).
type noAnswer struct {
	err   error // the whole message
	cause error // the network error
}

func (e *noAnswer) Error() string { return e.err.Error() }
func (e *noAnswer) Unwrap() error { return e.err }

// cacheKey names a URL's cache file: the hex sha256 of the URL.
func cacheKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:])
}

// notFoundSuffix marks a cached 404/410: "<key>.notfound" holds the status.
// Offline runs trust it (so FirstOf falls through to the same candidate as
// the online run did); online runs ask again, so a transient 404 does not
// stick.
const notFoundSuffix = ".notfound"

// Get returns the body of url (status 200), from the cache when there, else
// downloading and caching it. Offline, a URL not in the cache is an error
// wrapping ErrOffline. A 404 is an *HTTPError matching ErrNotFound.
func (c *Client) Get(ctx context.Context, url string) ([]byte, error) {
	key := cacheKey(url)
	path := filepath.Join(c.dir, key)
	if b, err := c.readCached(path); err == nil {
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if c.offline {
		if status, err := os.ReadFile(path + notFoundSuffix); err == nil {
			code, _ := strconv.Atoi(strings.Fields(string(status) + " 0")[0])
			return nil, &HTTPError{URL: url, StatusCode: code, Status: strings.TrimSpace(string(status))}
		}
		return nil, fmt.Errorf("%w: %s is not in the cache (%s); run once without --offline", ErrOffline, url, c.dir)
	}
	if err := c.remembered(url); err != nil {
		return nil, err
	}
	for {
		v, err, shared := c.group.Do(key, func() (any, error) { return c.downloadOnce(ctx, url, path) })
		if err != nil {
			// The shared download ran under another caller's context; if
			// that one was cancelled and ours is not, try again.
			if shared && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				continue
			}
			return nil, err
		}
		b := v.([]byte)
		if shared {
			b = append([]byte(nil), b...) // each caller may change its copy
		}
		return b, nil
	}
}

// remembered is the failure of url, or of its host, earlier in this run.
func (c *Client) remembered(url string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err, ok := c.failed[url]; ok {
		return err
	}
	host := hostOf(url)
	if why, ok := c.down[host]; ok {
		c.unreachable[url] = true
		return fmt.Errorf("GET %s: not asked: %w: %s gave no answer earlier in this run (%v)", url, ErrUnreachable, host, why)
	}
	return nil
}

// downloadOnce is download, remembering a failure (not a cancellation of
// the caller's context) for the rest of the run; a failure without any
// answer marks the URL's host down.
func (c *Client) downloadOnce(ctx context.Context, url, path string) ([]byte, error) {
	if err := c.remembered(url); err != nil {
		return nil, err
	}
	stop := c.watch(url)
	b, err := c.download(ctx, url, path)
	stop()
	if err == nil || ctx.Err() != nil {
		return b, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var na *noAnswer
	if errors.As(err, &na) {
		// No HTTP answer at all: the host is not asked again.
		c.down[hostOf(url)] = na.cause
		c.unreachable[url] = true
		err = fmt.Errorf("%w (%w)", err, ErrUnreachable)
	}
	c.failed[url] = err
	return nil, err
}

// Unreachable returns the URLs that could not be fetched in this run
// because their host gave no answer (asked, or not asked after an earlier
// URL on it gave none), sorted.
func (c *Client) Unreachable() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.unreachable))
}

// watch reports to the log, every progressAfter, that url is still being
// downloaded; stop ends it.
func (c *Client) watch(url string) (stop func()) {
	if c.log == io.Discard {
		return func() {}
	}
	start := time.Now()
	t := time.NewTicker(c.progressAfter)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(c.log, "fetch: GET %s: still waiting after %s\n", url, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// hostOf is the host of a URL ("" when it has none).
func hostOf(u string) string {
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		rest, _ = strings.CutPrefix(u, "http://")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// target is where a request for url is sent.
func (c *Client) target(url string) string {
	if c.base != DefaultBaseURL && strings.HasPrefix(url, DefaultBaseURL+"/") {
		return c.base + url[len(DefaultBaseURL):]
	}
	return url
}

func (c *Client) download(ctx context.Context, url, path string) ([]byte, error) {
	// Another process may have filled the cache since Get looked.
	if b, err := c.readCached(path); err == nil {
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var body []byte
	answered := false // some attempt got an HTTP answer
	attempts, err := c.budget.Do(ctx, func(ctx context.Context, n int) (*http.Response, error) {
		if n > 1 {
			fmt.Fprintf(c.log, "fetch: GET %s: retry %d of %d\n", url, n-1, c.budget.Attempts-1)
		}
		b, resp, err := c.attempt(ctx, url)
		answered = answered || resp != nil
		body = b
		return resp, err
	}, nil)
	var herr *HTTPError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		if !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %v", ctx.Err(), err)
		}
		return nil, fmt.Errorf("GET %s: %w", url, err)
	case errors.As(err, &herr):
		herr.Attempts = attempts
		if errors.Is(herr, ErrNotFound) {
			if err := writeAtomic(path+notFoundSuffix, []byte(herr.Status+"\n")); err != nil {
				return nil, err
			}
		}
		return nil, herr
	case !answered && attempts > 1:
		return nil, &noAnswer{fmt.Errorf("GET %s: %w (after %d attempts)", url, err, attempts), err}
	case !answered:
		return nil, &noAnswer{fmt.Errorf("GET %s: %w", url, err), err}
	default:
		return nil, err
	}
	if err := writeAtomic(path, body); err != nil {
		return nil, err
	}
	os.Remove(path + notFoundSuffix)
	return body, nil
}

// attempt makes one GET of url: the body of a 200 answer, or the answer
// (its body drained and closed) and an *HTTPError for another status, or
// no answer and the transport's error. A body that cannot be read whole is
// not retried.
func (c *Client) attempt(ctx context.Context, url string) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.target(url), nil)
	if err != nil {
		return nil, nil, retry.Stop(fmt.Errorf("GET %s: %w", url, err))
	}
	req.Header.Set("User-Agent", "swebuild (+https://github.com/swebuild/swebuild)")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, resp, &HTTPError{URL: url, StatusCode: resp.StatusCode, Status: resp.Status, Attempts: 1}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, resp, retry.Stop(fmt.Errorf("GET %s: reading body: %w", url, err))
	}
	if int64(len(body)) > c.maxBody {
		return nil, resp, retry.Stop(fmt.Errorf("GET %s: body larger than %d bytes", url, c.maxBody))
	}
	return body, resp, nil
}

// readCached reads a cached body, refusing one larger than MaxBodyBytes
// (nothing this client writes is; a larger file was put there by something
// else). A missing file is an error matching fs.ErrNotExist.
func (c *Client) readCached(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("fetch cache: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("fetch cache: %w", err)
	}
	if int64(len(b)) > c.maxBody {
		return nil, fmt.Errorf("fetch cache: %s is larger than the limit of %d bytes a body", path, c.maxBody)
	}
	return b, nil
}

// writeAtomic writes data to path (its directory made if missing) through
// core.WriteBytesAtomic, so readers see the whole file or none.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("fetch cache: %w", err)
	}
	if err := core.WriteBytesAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("fetch cache: %w", err)
	}
	return nil
}

// Fetch is Get for callers that move on when a file does not exist (an
// envfile.Source): found is false for a 404 or 410, the body is decoded as
// upstream's requests does (envfile.DecodeText), and any other
// failure (offline miss, network, 5xx after retries) is an error.
func (c *Client) Fetch(ctx context.Context, url string) (body string, found bool, err error) {
	b, err := c.Get(ctx, url)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return envfile.DecodeText(b), true, nil
}

// FirstOf returns the first of urls that exists, trying them in order as
// upstream does: a 404 (or 410) moves on to the next candidate; any other
// failure stops (upstream moves on after any non-200 answer, but a
// transient error must not silently pick a different file).
func (c *Client) FirstOf(ctx context.Context, urls []string) (string, []byte, error) {
	var missing []string
	for _, u := range urls {
		b, err := c.Get(ctx, u)
		if err == nil {
			return u, b, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return "", nil, err
		}
		missing = append(missing, u)
	}
	if len(missing) == 0 {
		return "", nil, errors.New("fetch: no candidate URLs")
	}
	return "", nil, fmt.Errorf("%w: none of the candidates exists: %s", ErrNotFound, strings.Join(missing, ", "))
}
