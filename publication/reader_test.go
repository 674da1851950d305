package publication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

func newReader(t *testing.T) *publication.Reader {
	t.Helper()
	c, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	return publication.New(c)
}

// isTagList reports whether resp answers a tag list request.
func isTagList(resp *http.Response) bool {
	return resp.Request.Method == http.MethodGet && strings.HasSuffix(resp.Request.URL.Path, "/tags/list")
}

// countTagLists is how many tag list requests reqs holds.
func countTagLists(reqs map[string]int) int {
	n := 0
	for k, c := range reqs {
		if strings.HasSuffix(k, "/tags/list") {
			n += c
		}
	}
	return n
}

// endless is a reader of n bytes of s repeated, made as it is read.
type endless struct {
	s string
	n int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && e.n > 0 {
		c := copy(p[k:min(len(p), k+int(min(e.n, int64(len(e.s)))))], e.s)
		k += c
		e.n -= int64(c)
	}
	return k, nil
}

// TestTagListLinkingToItself (issue 28: a registry whose tag list links to
// itself for ever made drift loop to 2.7 GB): listing the referrers of an
// image on a registry without the referrers API reads its tag list, and a
// tag list that links back to itself is refused after its first page, one
// whose links never end at the page limit, and one whose page is endless
// at the byte limit, one whose slow pages never end at the time limit;
// each with an error naming the listing and the bound.
// The registry is a real distribution 2.8; a proxy changes only the tag
// list's answer.
func TestTagListLinkingToItself(t *testing.T) {
	ctx := context.Background()
	slow := publication.Limits{Listing: registry.ListLimits{Time: 500 * time.Millisecond}}
	cases := []struct {
		name   string
		limits publication.Limits
		modify func(*http.Response) error
		pages  int    // tag list requests made; -1: not counted
		want   string // in the error
	}{
		{"links to itself", publication.Limits{}, func(resp *http.Response) error {
			if isTagList(resp) {
				resp.Header.Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", resp.Request.URL.RequestURI()))
			}
			return nil
		}, 1, "links back to"},
		{"links to a new page for ever", publication.Limits{}, func(resp *http.Response) error {
			if isTagList(resp) {
				n := len(resp.Request.URL.Query().Get("last"))
				resp.Header.Set("Link", fmt.Sprintf("<%s?n=1000&last=%s>; rel=\"next\"", resp.Request.URL.Path, strings.Repeat("a", n+1)))
			}
			return nil
		}, registry.DefaultListLimits.Pages, fmt.Sprintf("refused over the limit of %d pages", registry.DefaultListLimits.Pages)},
		{"slow pages for ever", slow, func(resp *http.Response) error {
			if isTagList(resp) {
				time.Sleep(100 * time.Millisecond)
				n := len(resp.Request.URL.Query().Get("last"))
				resp.Header.Set("Link", fmt.Sprintf("<%s?n=1000&last=%s>; rel=\"next\"", resp.Request.URL.Path, strings.Repeat("a", n+1)))
			}
			return nil
		}, -1, "refused over the limit of 500ms"},
		{"an endless page", publication.Limits{}, func(resp *http.Response) error {
			if isTagList(resp) {
				resp.Body.Close()
				body := io.MultiReader(strings.NewReader(`{"name":"x","tags":[`), &endless{s: `"sha256-0000000000000000.att",`, n: 1 << 40})
				resp.Body, resp.ContentLength = io.NopCloser(body), -1
				resp.Header.Del("Content-Length")
			}
			return nil
		}, 1, fmt.Sprintf("refused over the limit of %d bytes", registry.DefaultListLimits.Bytes)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := regtest.Start(t, regtest.Options{})
			up, _ := name.NewRepository(reg.Host+"/loop/img", name.Insecure)
			subject := regtest.PushRandomImage(t, up, 256, 1)
			d, err := remote.Get(up.Digest(subject.Digest.String()))
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Tag(up.Tag("v1"), d); err != nil {
				t.Fatal(err)
			}
			px := regtest.StartProxy(t, reg.Host, c.modify)
			repo, _ := name.NewRepository(px.Host+"/loop/img", name.Insecure)
			r := newReader(t)
			r.Limits = c.limits
			_, err = r.Referrers(ctx, repo, subject.Digest)
			var le *registry.LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "the tag list of "+repo.String()) {
				t.Fatalf("err = %v, want a *registry.LimitError naming the tag list of %s and %q", err, repo, c.want)
			}
			if n := countTagLists(px.Requests()); c.pages >= 0 && n != c.pages {
				t.Errorf("%d tag list requests, want %d", n, c.pages)
			}
			t.Log(err)
		})
	}
}

// rawIndex is an index's exact bytes as remote.Taggable.
type rawIndex []byte

func (r rawIndex) RawManifest() ([]byte, error)        { return r, nil }
func (r rawIndex) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }

// fallbackIndex is a referrers index of n statement descriptors: d n
// times when given (a registry checks that an index's children exist),
// else n made-up ones.
func fallbackIndex(n int, d *v1.Descriptor) []byte {
	var b bytes.Buffer
	b.WriteString(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		dg, size := fmt.Sprintf("sha256:%064x", i), int64(512)
		if d != nil {
			dg, size = d.Digest.String(), d.Size
		}
		fmt.Fprintf(&b, `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%d,"artifactType":"application/vnd.in-toto+json"}`, dg, size)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// TestOversizedFallbackIndex (issue 28: a fallback referrers index of
// 400,000 descriptors took 713 MB): a fallback index of more descriptors
// than the limit, on a real registry (10,001, 1.6 MB: distribution accepts
// up to 4 MiB), is refused by the reader and by a writer adding to it; one
// of 400,000 descriptors (a proxy serves it as the fallback tag's answer,
// 66 MB, with and without a Content-Length) is refused at the byte limit
// without being read whole.
func TestOversizedFallbackIndex(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Start(t, regtest.Options{})
	repo, _ := name.NewRepository(reg.Host+"/big/img", name.Insecure)
	subject := regtest.PushRandomImage(t, repo, 256, 1)
	r := newReader(t)
	w := &attest.Referrers{Client: r.Client, Settle: time.Millisecond}
	statement := func(n int) *attest.Artifact {
		a, err := attest.StatementArtifact(subject, attest.TestResultPredicate, fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","n":%d}`, n))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	st := statement(1)
	if err := w.Attach(ctx, repo, st); err != nil {
		t.Fatal(err)
	}
	tag := repo.Tag(publication.FallbackTag(subject.Digest))
	over := publication.DefaultLimits.Referrers + 1
	if err := r.Client.Put(ctx, tag, rawIndex(fallbackIndex(over, &st.Descriptor))); err != nil {
		t.Fatal(err)
	}
	_, err := r.Referrers(ctx, repo, subject.Digest)
	want := fmt.Sprintf("refused over the limit of %d referrers (it lists %d)", publication.DefaultLimits.Referrers, over)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tag.String()) {
		t.Errorf("reading a fallback index of %d descriptors: err = %v, want %q naming %s", over, err, want, tag)
	}
	// (This registry appends to the fallback index itself when an
	// artifact with a subject is put: the writer reads 10,002.)
	writerWant := fmt.Sprintf("refused over the limit of %d referrers", publication.DefaultLimits.Referrers)
	if err := w.Attach(ctx, repo, statement(2)); err == nil || !strings.Contains(err.Error(), writerWant) {
		t.Errorf("adding to a fallback index of %d descriptors: err = %v, want %q", over, err, writerWant)
	}

	const huge = 400000
	body := fallbackIndex(huge, nil)
	for _, withLength := range []bool{true, false} {
		t.Run(fmt.Sprintf("400,000 descriptors, Content-Length %v", withLength), func(t *testing.T) {
			px := regtest.StartProxy(t, reg.Host, func(resp *http.Response) error {
				if resp.Request.Method == http.MethodGet && strings.HasSuffix(resp.Request.URL.Path, "/manifests/"+tag.TagStr()) {
					resp.Body.Close()
					resp.Body, resp.StatusCode, resp.Status = io.NopCloser(bytes.NewReader(body)), http.StatusOK, "200 OK"
					resp.Header.Set("Content-Type", string(types.OCIImageIndex))
					resp.Header.Del("Docker-Content-Digest")
					resp.ContentLength = int64(len(body))
					resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
					if !withLength {
						resp.ContentLength = -1
						resp.Header.Del("Content-Length")
					}
				}
				return nil
			})
			prepo, _ := name.NewRepository(px.Host+"/big/img", name.Insecure)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := newReader(t).Referrers(ctx, prepo, subject.Digest)
			runtime.ReadMemStats(&after)
			limit := fmt.Sprintf("refused over the limit of %d bytes", publication.DefaultLimits.ManifestBytes)
			if err == nil || !strings.Contains(err.Error(), limit) {
				t.Fatalf("a fallback index of %d bytes: err = %v, want %q", len(body), err, limit)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte index refused, %.1f MiB allocated meanwhile (proxy included): %v", len(body), float64(alloc)/(1<<20), err)
			// Reading it whole would allocate its 66 MB at least once.
			if alloc > uint64(len(body))/2 {
				t.Errorf("%d bytes allocated while refusing a %d-byte index", alloc, len(body))
			}
		})
	}
}
