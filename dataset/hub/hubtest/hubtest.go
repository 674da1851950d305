// Package hubtest is a stand-in for the Hugging Face Hub in tests: a real
// HTTP server (httptest) answering the URLs package hub uses, the way the
// hub answers them, from dataset repositories a test sets up with real
// files. It counts requests, and can fail, cut short or stall answers.
//
// What it answers (as huggingface.co does):
//
//	GET /api/datasets/{owner}/{name}/revision/{rev}[?blobs=true]
//	    200 {"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs"}], "cardData"};
//	    401 X-Error-Code: RepoNotFound for a dataset it does not have (or
//	    without the token it was told to require); 404 RevisionNotFound.
//	GET /datasets/{owner}/{name}/resolve/{rev}/{path}
//	    LFS files (parquet, or over 10 MiB): 302 to /cdn/{sha256} on
//	    "localhost" instead of "127.0.0.1" (another host, as the hub's CDN
//	    is), with X-Repo-Commit, X-Linked-Etag and X-Linked-Size;
//	    other files: 200 with ETag and X-Repo-Commit; 404 EntryNotFound.
//	GET /cdn/{sha256}   the LFS object.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault makes the answers for one path (as requested, unescaped) go wrong.
type Fault struct {
	// Unavailable is how many of the next answers are 503.
	Unavailable int
	// Truncate is how many of the next answers send half of the body (with
	// the full Content-Length) and drop the connection.
	Truncate int
	// Stall makes each answer send half of the body, then wait this long
	// before the rest.
	Stall time.Duration
}

// Server is the stand-in hub.
type Server struct {
	*httptest.Server
	// Token, when set, is required (Authorization: Bearer) on API and
	// resolve requests; without it the answer is 401 RepoNotFound.
	Token string
	// CDN, when set, is the base URL LFS redirects go to (e.g. another
	// server on Handler: the same host on another port, or another
	// scheme); default http://localhost:<port>.
	CDN string

	mu       sync.Mutex
	repos    map[string]*repo
	faults   map[string]*Fault
	requests map[string]int
	total    int
	cdnAuth  int
	objects  map[string][]byte // sha256 -> LFS object
}

type repo struct {
	branches map[string]string // branch or tag -> commit
	commits  map[string]*commit
}

type commit struct {
	files    map[string][]byte
	cardData any
}

// Handler serves the stand-in hub; another server on it shares its state
// (a CDN on another port or scheme).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// New starts a stand-in hub, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{repos: map[string]*repo{}, faults: map[string]*Fault{}, requests: map[string]int{}, objects: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Commit adds a commit holding files (path -> content) and the dataset
// card's metadata cardData (nil for none) to dataset name, points branch
// (and each of also) at it, and returns its id.
func (s *Server) Commit(name, branch string, files map[string][]byte, cardData any, also ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[name]
	if r == nil {
		r = &repo{branches: map[string]string{}, commits: map[string]*commit{}}
		s.repos[name] = r
	}
	h := sha1.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00", name, branch, len(r.commits))
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		sum := sha256.Sum256(files[p])
		fmt.Fprintf(h, "%s\x00%x\x00", p, sum)
		if isLFS(p, files[p]) {
			s.objects[hex.EncodeToString(sum[:])] = files[p]
		}
	}
	sha := hex.EncodeToString(h.Sum(nil))
	r.commits[sha] = &commit{files: files, cardData: cardData}
	r.branches[branch] = sha
	for _, b := range also {
		r.branches[b] = sha
	}
	return sha
}

// SetFault sets the fault of a path, e.g. "/cdn/<sha256>" or
// "/api/datasets/o/n/revision/main".
func (s *Server) SetFault(p string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[p] = &f
}

// Requests is the number of requests served so far.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// RequestsTo is the number of requests for one path.
func (s *Server) RequestsTo(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[p]
}

// CDNAuthorized is the number of CDN requests that carried an
// Authorization header (a token must not follow the redirect).
func (s *Server) CDNAuthorized() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cdnAuth
}

// ObjectPath is the CDN path of a file's content.
func ObjectPath(content []byte) string {
	sum := sha256.Sum256(content)
	return "/cdn/" + hex.EncodeToString(sum[:])
}

func isLFS(p string, b []byte) bool {
	return strings.HasSuffix(p, ".parquet") || len(b) > 10<<20
}

func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.total++
	s.requests[r.URL.Path]++
	fault := s.faults[r.URL.Path]
	var f Fault
	if fault != nil {
		f = *fault
		if fault.Unavailable > 0 {
			fault.Unavailable--
		}
		if fault.Truncate > 0 {
			fault.Truncate--
		}
	}
	s.mu.Unlock()
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if f.Unavailable > 0 {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i := range segs {
		segs[i], _ = url.PathUnescape(segs[i])
	}
	switch {
	case len(segs) == 2 && segs[0] == "cdn":
		s.serveCDN(w, r, segs[1], f)
	case len(segs) == 6 && segs[0] == "api" && segs[1] == "datasets" && segs[4] == "revision":
		s.serveInfo(w, r, segs[2]+"/"+segs[3], segs[5])
	case len(segs) >= 6 && segs[0] == "datasets" && segs[3] == "resolve":
		s.serveResolve(w, r, segs[1]+"/"+segs[2], segs[4], strings.Join(segs[5:], "/"), f)
	default:
		http.NotFound(w, r)
	}
}

// lookup finds the commit rev names in dataset name, answering the error
// itself when there is none.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, name, rev string) (string, *commit) {
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[name]
	if rp == nil {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return "", nil
	}
	sha := rev
	if b, ok := rp.branches[rev]; ok {
		sha = b
	}
	c := rp.commits[sha]
	if c == nil {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return "", nil
	}
	return sha, c
}

func (s *Server) serveInfo(w http.ResponseWriter, r *http.Request, name, rev string) {
	sha, c := s.lookup(w, r, name, rev)
	if c == nil {
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	siblings := []map[string]any{}
	for _, p := range paths {
		b := c.files[p]
		sib := map[string]any{"rfilename": p}
		if blobs {
			sib["size"] = len(b)
			sib["blobId"] = gitBlobID(b)
			if isLFS(p, b) {
				sum := sha256.Sum256(b)
				sib["lfs"] = map[string]any{"size": len(b), "sha256": hex.EncodeToString(sum[:]), "pointerSize": 134}
			}
		}
		siblings = append(siblings, sib)
	}
	info := map[string]any{"id": name, "sha": sha, "private": false, "gated": false, "disabled": false,
		"lastModified": "2026-08-10T00:00:00.000Z", "siblings": siblings}
	if c.cardData != nil {
		info["cardData"] = c.cardData
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(info)
}

func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, name, rev, p string, f Fault) {
	sha, c := s.lookup(w, r, name, rev)
	if c == nil {
		return
	}
	b, ok := c.files[p]
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	w.Header().Set("X-Repo-Commit", sha)
	if isLFS(p, b) {
		sum := sha256.Sum256(b)
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		s.mu.Lock()
		base := s.CDN
		s.mu.Unlock()
		if base == "" {
			_, port, _ := strings.Cut(strings.TrimPrefix(s.URL, "http://"), ":")
			base = "http://localhost:" + port
		}
		http.Redirect(w, r, base+"/cdn/"+hex.EncodeToString(sum[:]), http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitBlobID(b)+`"`)
	send(w, b, f)
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request, sum string, f Fault) {
	s.mu.Lock()
	if r.Header.Get("Authorization") != "" {
		s.cdnAuth++
	}
	b, ok := s.objects[sum]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	send(w, b, f)
}

// send writes b, or half of it and then drops the connection (Truncate),
// or half, a pause, then the rest (Stall).
func send(w http.ResponseWriter, b []byte, f Fault) {
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	if f.Truncate == 0 && f.Stall == 0 {
		w.Write(b)
		return
	}
	half := len(b) / 2
	w.Write(b[:half])
	w.(http.Flusher).Flush()
	if f.Truncate > 0 {
		panic(http.ErrAbortHandler) // the server drops the connection
	}
	time.Sleep(f.Stall)
	w.Write(b[half:])
}

// Card is the cardData of a dataset whose default config lists one path
// pattern per split, as the SWE-bench datasets' cards do.
func Card(splitPatterns map[string]string) any {
	splits := make([]string, 0, len(splitPatterns))
	for sp := range splitPatterns {
		splits = append(splits, sp)
	}
	sort.Strings(splits)
	var files []map[string]string
	for _, sp := range splits {
		files = append(files, map[string]string{"split": sp, "path": splitPatterns[sp]})
	}
	return map[string]any{"configs": []map[string]any{{"config_name": "default", "data_files": files}}}
}
