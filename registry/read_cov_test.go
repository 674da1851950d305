package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/internal/regtest"
)

// fakeRegistry serves handler on 127.0.0.1, answering the /v2/ ping itself.
func fakeRegistry(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sha256Of(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// putRaw PUTs a manifest document straight to the registry (no client
// under test involved).
func putRaw(t *testing.T, host, repo, ref string, mt types.MediaType, raw []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/"+ref, strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", string(mt))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT %s: %s", ref, resp.Status)
	}
}

// emptyIndex is an OCI image index with no manifests, as the image-spec
// writes one.
const emptyIndex = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`

func TestManifestByTagAndDigest(t *testing.T) {
	host := regtest.InProcess(t).Host
	raw := []byte(emptyIndex)
	putRaw(t, host, "cov/manifest", "v1", types.OCIImageIndex, raw)
	c := newTestClient(t, testBudget)
	ctx := context.Background()
	want := sha256Of(raw)

	for _, s := range []string{host + "/cov/manifest:v1", host + "/cov/manifest@" + want} {
		ref, err := c.ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Manifest(ctx, ref, 1<<20)
		if err != nil {
			t.Fatalf("Manifest(%s): %v", s, err)
		}
		if string(m.Raw) != emptyIndex || m.Digest.String() != want || m.MediaType != types.OCIImageIndex {
			t.Errorf("Manifest(%s) = %q %s %s, want the stored bytes, %s, %s", s, m.Raw, m.Digest, m.MediaType, want, types.OCIImageIndex)
		}
	}

	// One byte under the document's size: refused, naming the reference
	// and the bound.
	ref, _ := c.ParseReference(host + "/cov/manifest:v1")
	_, err := c.Manifest(ctx, ref, int64(len(raw)-1))
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Manifest over the limit: %v, want a *LimitError", err)
	}
	wantMsg := fmt.Sprintf("manifest %s: refused over the limit of %d bytes", ref, len(raw)-1)
	if !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("error %q does not say %q", err, wantMsg)
	}

	// A tag that is not there: an error IsNotFound recognizes, naming it.
	missing, _ := c.ParseReference(host + "/cov/manifest:nope")
	_, err = c.Manifest(ctx, missing, 1<<20)
	if !IsNotFound(err) || !strings.Contains(err.Error(), missing.String()) {
		t.Errorf("Manifest of a missing tag: %v, want a 404 naming %s", err, missing)
	}
	if IsNotFound(errors.New("404 Not Found")) || IsNotFound(nil) {
		t.Error("IsNotFound takes text or nil for a 404")
	}
}

// A registry that serves, for a digest, bytes of another digest, and one
// that names no Content-Type or a length over the bound.
func TestManifestServedWrong(t *testing.T) {
	body := []byte(emptyIndex)
	var contentLength atomic.Int64
	srv := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		if n := contentLength.Load(); n > 0 {
			w.Header().Set("Content-Length", fmt.Sprint(n))
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Write(body) // no Content-Type: the document's mediaType is taken
	})
	c := newTestClient(t, testBudget)
	ctx := context.Background()
	other := "sha256:" + strings.Repeat("0", 64)
	ref, _ := c.ParseReference(hostOf(srv) + "/cov/wrong@" + other)
	_, err := c.Manifest(ctx, ref, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "served content of digest "+sha256Of(body)) || !strings.Contains(err.Error(), ref.String()) {
		t.Errorf("mismatched digest: %v, want the reference and the served digest named", err)
	}

	tag, _ := c.ParseReference(hostOf(srv) + "/cov/wrong:latest")
	m, err := c.Manifest(ctx, tag, 1<<20)
	if err != nil || m.MediaType != types.OCIImageIndex {
		t.Errorf("no Content-Type: %+v, %v; want the document's own mediaType", m, err)
	}

	// A Content-Length over the bound is refused before the body is read.
	contentLength.Store(1 << 30)
	_, err = c.Manifest(ctx, tag, 4096)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "4096 bytes" {
		t.Errorf("Content-Length 1 GiB with a 4096-byte bound: %v", err)
	}
}

func TestTagsPaged(t *testing.T) {
	// A tag list served in pages linked by RFC 5988 Link headers, as the
	// distribution spec's /v2/<name>/tags/list?n=&last= pagination does.
	pages := map[string]struct {
		tags []string
		link string
	}{
		"":  {[]string{"a", "b"}, `</v2/cov/tags/tags/list?n=2&last=b>; rel="next"`},
		"b": {[]string{"c", "d"}, `</v2/cov/tags/tags/list?n=2&last=d>; rel=next`},
		"d": {[]string{"e"}, ""},
	}
	srv := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v2/cov/tags/") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		p := pages[r.URL.Query().Get("last")]
		if p.link != "" {
			w.Header().Set("Link", p.link)
		}
		json.NewEncoder(w).Encode(map[string]any{"name": "cov/tags", "tags": p.tags})
	})
	c := newTestClient(t, testBudget)
	ctx := context.Background()
	repo := mustRepo(t, c, hostOf(srv)+"/cov/tags")
	got, err := c.Tags(ctx, repo, ListLimits{})
	if err != nil || strings.Join(got, ",") != "a,b,c,d,e" {
		t.Errorf("Tags = %v, %v; want a,b,c,d,e", got, err)
	}

	// Two pages allowed: the third is refused, naming the list and the bound.
	_, err = c.Tags(ctx, repo, ListLimits{Pages: 2})
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "the tag list of "+repo.String()) || !strings.Contains(err.Error(), "2 pages") {
		t.Errorf("Tags within 2 pages: %v", err)
	}

	// A byte bound over all pages: the first page alone is 40-odd bytes.
	_, err = c.Tags(ctx, repo, ListLimits{Bytes: 60})
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "60 bytes") || !strings.Contains(err.Error(), "on page 2") {
		t.Errorf("Tags within 60 bytes: %v", err)
	}

	// A repository the registry does not know has no tags.
	none, err := c.Tags(ctx, mustRepo(t, c, hostOf(srv)+"/cov/absent"), ListLimits{})
	if err != nil || len(none) != 0 {
		t.Errorf("Tags of an unknown repository = %v, %v; want none, no error", none, err)
	}
}

func TestTagsLinksRefused(t *testing.T) {
	cases := []struct {
		name, link string
		status     int
		body       string
		want       []string
	}{
		{"link back to itself", `</v2/cov/loop/tags/list?n=1000>; rel="next"`, 200, `{"tags":["x"]}`,
			[]string{"one read per page", "page 1 links back"}},
		{"link to another host", `<http://198.51.100.7/v2/cov/loop/tags/list?last=x>; rel="next"`, 200, `{"tags":["x"]}`,
			[]string{"the tag list of", "another host (http://198.51.100.7): not followed"}},
		{"unbracketed link", `/v2/cov/loop/tags/list?last=x; rel="next"`, 200, `{"tags":["x"]}`,
			[]string{"unreadable Link header"}},
		{"unreadable answer", "", 200, `{"tags":`, []string{"reading the answer"}},
		{"registry error", "", 500, `{"errors":[{"code":"UNKNOWN","message":"storage broke"}]}`, []string{"storage broke"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.link != "" {
					w.Header().Set("Link", tc.link)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := newTestClient(t, testBudget)
			repo := mustRepo(t, c, hostOf(srv)+"/cov/loop")
			_, err := c.Tags(context.Background(), repo, ListLimits{})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "listing tags of "+repo.String()) {
				t.Errorf("error %q does not name the repository", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A registry that sends pages slowly: the listing's time bound ends it with
// a LimitError naming the time, not a bare context error.
func TestTagsTimeBound(t *testing.T) {
	srv := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := newTestClient(t, testBudget)
	_, err := c.Tags(context.Background(), mustRepo(t, c, hostOf(srv)+"/cov/slow"), ListLimits{Time: 100 * time.Millisecond})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "100ms" || le.Why != "still reading pages" {
		t.Errorf("slow tag list: %v, want the 100ms bound named", err)
	}
}

func TestListLimitsDefaults(t *testing.T) {
	got := ListLimits{Pages: 3}.withDefaults()
	if got.Pages != 3 || got.Bytes != 16<<20 || got.Time != 2*time.Minute {
		t.Errorf("ListLimits{Pages: 3}.withDefaults() = %+v", got)
	}
	got = ListLimits{Pages: -1, Bytes: 10, Time: time.Second}.withDefaults()
	if got.Pages != 100 || got.Bytes != 10 || got.Time != time.Second {
		t.Errorf("withDefaults kept a negative or dropped a set field: %+v", got)
	}
	e := &LimitError{What: "the tag list of r", Limit: "3 pages"}
	if e.Error() != "the tag list of r: refused over the limit of 3 pages" {
		t.Errorf("LimitError without Why: %q", e.Error())
	}
}

func TestReferrers(t *testing.T) {
	subject := "sha256:" + strings.Repeat("a", 64)
	desc := func(n byte) v1.Descriptor {
		return v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: 500, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string(n), 64)},
			ArtifactType: "application/vnd.in-toto+json"}
	}
	index := func(ds ...v1.Descriptor) []byte {
		b, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: ds})
		return b
	}
	cases := []struct {
		name          string
		serve         func(w http.ResponseWriter, r *http.Request)
		wantSupported bool
		wantDigests   []string
		wantErr       string
	}{
		{"distribution 2.8: 404", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }, false, nil, ""},
		{"400", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(400) }, false, nil, ""},
		{"406", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(406) }, false, nil, ""},
		{"200 that is not an index (GHCR)", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html></html>")
		}, false, nil, ""},
		{"two pages", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			if r.URL.Query().Get("page") == "" {
				w.Header().Set("Link", `<`+r.URL.Path+`?page=2>; rel="next"`)
				w.Write(index(desc('1'), desc('2')))
				return
			}
			w.Write(index(desc('3')))
		}, true, []string{"1", "2", "3"}, ""},
		{"none", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			w.Write(index())
		}, true, nil, ""},
		{"registry error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"errors":[{"code":"UNKNOWN","message":"index broke"}]}`)
		}, false, nil, "index broke"},
		{"unreadable index", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			io.WriteString(w, `{"manifests": [`)
		}, false, nil, "reading the answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var path atomic.Value
			srv := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
				path.Store(r.URL.Path)
				tc.serve(w, r)
			})
			c := newTestClient(t, testBudget)
			d, err := name.NewDigest(hostOf(srv) + "/cov/subject@" + subject)
			if err != nil {
				t.Fatal(err)
			}
			idx, supported, err := c.Referrers(context.Background(), d, ListLimits{})
			if p, _ := path.Load().(string); p != "/v2/cov/subject/referrers/"+subject {
				t.Errorf("asked %q, want the OCI 1.1 referrers path", p)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "listing referrers of "+d.String()) {
					t.Errorf("err = %v, want %q naming %s", err, tc.wantErr, d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if supported != tc.wantSupported {
				t.Errorf("supported = %v, want %v", supported, tc.wantSupported)
			}
			var got []string
			if idx != nil {
				for _, m := range idx.Manifests {
					got = append(got, m.Digest.Hex[:1])
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.wantDigests, ",") {
				t.Errorf("referrers %v, want %v", got, tc.wantDigests)
			}
		})
	}
}

func TestRefsUnknown(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&transport.Error{StatusCode: 400, Errors: []transport.Diagnostic{{Code: transport.ManifestBlobUnknownErrorCode}}}, true},
		{fmt.Errorf("putting: %w", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.DigestInvalidErrorCode}, {Code: transport.BlobUnknownErrorCode}}}), true},
		{&transport.Error{StatusCode: 400, Errors: []transport.Diagnostic{{Code: transport.ManifestInvalidErrorCode}}}, false},
		{errors.New("MANIFEST_BLOB_UNKNOWN"), false},
		{nil, false},
	}
	for i, c := range cases {
		if got := RefsUnknown(c.err); got != c.want {
			t.Errorf("%d: RefsUnknown(%v) = %v, want %v", i, c.err, got, c.want)
		}
	}
}
