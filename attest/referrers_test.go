package attest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// counter counts the requests and bytes a client sends and receives.
type counter struct {
	next               http.RoundTripper
	requests, up, down atomic.Int64
}

type countBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	if r.ContentLength > 0 {
		c.up.Add(r.ContentLength)
	}
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = countBody{resp.Body, &c.down}
	}
	return resp, err
}

func newClient(t testing.TB, base http.RoundTripper) *registry.Client {
	t.Helper()
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	c, err := registry.New(registry.Options{MaxRPS: -1, Keychain: regtest.Anonymous(), Base: base})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func statement(t testing.TB, subject v1.Descriptor, i int) *Artifact {
	t.Helper()
	// A minimal in-toto statement; its content only has to differ.
	st := fmt.Sprintf(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":%q}}],"predicateType":%q,"predicate":{"result":"PASSED","passedTests":["writer-%d"]}}`, subject.Digest.Hex, TestResultPredicate, i)
	a, err := StatementArtifact(subject, TestResultPredicate, []byte(st))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConcurrentWritersOneImage: eight writers, each with its own client
// and Referrers (as eight processes would be), attach to one image at once
// on distribution 2.8 (no referrers API). Every attachment is found by List
// and by the plain referrers tag schema (go-containerregistry's
// remote.Referrers, what other tools read), over several rounds. The same
// race with go-containerregistry's own subject handling (read, add, write,
// no re-check) is measured for comparison.
func TestConcurrentWritersOneImage(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const writers, rounds = 8, 3
	for round := 0; round < rounds; round++ {
		repo, err := name.NewRepository(fmt.Sprintf("%s/conc/img%d", reg.Host, round), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		subject := regtest.PushRandomImage(t, repo, 512, 2)
		arts := make([]*Artifact, writers)
		for i := range arts {
			arts[i] = statement(t, subject, round*100+i)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &Referrers{Client: newClient(t, nil)}
				<-start
				errs[i] = r.Attach(ctx, repo, arts[i])
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d writer %d: %v", round, i, err)
			}
		}
		r := &Referrers{Client: newClient(t, nil)}
		got, err := r.List(ctx, repo, subject.Digest)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Referrers(repo.Digest(subject.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range arts {
			if !contains(got, a.Descriptor.Digest) {
				t.Errorf("round %d: writer %d's attachment %s not listed", round, i, a.Descriptor.Digest)
			}
			if !contains(im.Manifests, a.Descriptor.Digest) {
				t.Errorf("round %d: writer %d's attachment %s missing from the fallback index %s", round, i, a.Descriptor.Digest, FallbackTag(subject.Digest))
			}
		}
		if len(got) != writers || len(im.Manifests) != writers {
			t.Errorf("round %d: List %d, fallback index %d referrers, want %d", round, len(got), len(im.Manifests), writers)
		}
		stmts, err := r.Statements(ctx, repo, subject.Digest, TestResultPredicate)
		if err != nil || len(stmts) != writers {
			t.Errorf("round %d: %d statements (%v), want %d", round, len(stmts), err, writers)
		}
	}

	// The same race through go-containerregistry's remote.Write (its
	// referrers tag update is a read-modify-write without a re-check).
	lost := 0
	for round := 0; round < rounds; round++ {
		repo, _ := name.NewRepository(fmt.Sprintf("%s/conc/ggcr%d", reg.Host, round), name.Insecure)
		subject := regtest.PushRandomImage(t, repo, 512, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < writers; i++ {
			a := statement(t, subject, 1000+round*100+i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				img, err := artifactImage(a)
				if err != nil {
					t.Error(err)
					return
				}
				<-start
				if err := remote.Write(repo.Digest(a.Descriptor.Digest.String()), img); err != nil {
					t.Errorf("ggcr writer: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		idx, err := remote.Referrers(repo.Digest(subject.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		im, _ := idx.IndexManifest()
		lost += writers - len(im.Manifests)
	}
	t.Logf("go-containerregistry's remote.Write, %d rounds of %d concurrent writers: %d of %d attachments missing from the fallback index", rounds, writers, lost, rounds*writers)
}

// artifactImage is a as a v1.Image for remote.Write.
func artifactImage(a *Artifact) (v1.Image, error) {
	return rawImage{a}, nil
}

type rawImage struct{ a *Artifact }

func (r rawImage) RawManifest() ([]byte, error)        { return r.a.Raw, nil }
func (r rawImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (r rawImage) Digest() (v1.Hash, error)            { return r.a.Descriptor.Digest, nil }
func (r rawImage) Size() (int64, error)                { return r.a.Descriptor.Size, nil }
func (r rawImage) Manifest() (*v1.Manifest, error)     { return v1.ParseManifest(bytesReader(r.a.Raw)) }
func (r rawImage) ConfigName() (v1.Hash, error)        { m, _ := r.Manifest(); return m.Config.Digest, nil }
func (r rawImage) ConfigFile() (*v1.ConfigFile, error) { return &v1.ConfigFile{}, nil }
func (r rawImage) RawConfigFile() ([]byte, error)      { return EmptyConfig, nil }
func (r rawImage) Layers() ([]v1.Layer, error) {
	return []v1.Layer{static.NewLayer(r.a.Blob, r.a.BlobType)}, nil
}
func (r rawImage) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l := static.NewLayer(r.a.Blob, r.a.BlobType)
	if d, _ := l.Digest(); d == h {
		return l, nil
	}
	return static.NewLayer(EmptyConfig, "application/vnd.oci.empty.v1+json"), nil
}
func (r rawImage) LayerByDiffID(h v1.Hash) (v1.Layer, error) { return r.LayerByDigest(h) }
func (r rawImage) ConfigLayer() (v1.Layer, error) {
	return static.NewLayer(EmptyConfig, "application/vnd.oci.empty.v1+json"), nil
}

// TestAttachCost measures one attachment on distribution 2.8: requests and
// bytes of a first attachment (the referrers API probe included), of a
// later one with the probe cached, and of reading them back.
func TestAttachCost(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx := context.Background()
	repo, _ := name.NewRepository(reg.Host+"/cost/img", name.Insecure)
	cnt := &counter{next: http.DefaultTransport.(*http.Transport).Clone()}
	r := &Referrers{Client: newClient(t, cnt)}
	var lines []string
	for i := 0; i < 3; i++ {
		subject := regtest.PushRandomImage(t, repo, 512, 2)
		a := statement(t, subject, i)
		r0, u0, d0 := cnt.requests.Load(), cnt.up.Load(), cnt.down.Load()
		begin := time.Now()
		if err := r.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
		el := time.Since(begin)
		lines = append(lines, fmt.Sprintf("attach %d: %d requests, %d bytes up, %d down, %v", i+1, cnt.requests.Load()-r0, cnt.up.Load()-u0, cnt.down.Load()-d0, el.Round(time.Millisecond)))
		r0, u0, d0 = cnt.requests.Load(), cnt.up.Load(), cnt.down.Load()
		begin = time.Now()
		st, err := r.Statements(ctx, repo, subject.Digest, TestResultPredicate)
		if err != nil || len(st) != 1 {
			t.Fatalf("read back: %d statements, %v", len(st), err)
		}
		lines = append(lines, fmt.Sprintf("read %d: %d requests, %d bytes up, %d down, %v", i+1, cnt.requests.Load()-r0, cnt.up.Load()-u0, cnt.down.Load()-d0, time.Since(begin).Round(time.Millisecond)))
	}
	for _, l := range lines {
		t.Log(l)
	}
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// TestListReadsEveryForm: on a registry serving the referrers API
// (go-containerregistry's pkg/registry) Add writes no fallback tag and List
// reads the API; on distribution 2.8, an attachment whose fallback index
// entry another tool erased is still found through its attachment tag.
func TestListReadsEveryForm(t *testing.T) {
	ctx := context.Background()
	t.Run("referrers API", func(t *testing.T) {
		srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(true), ggcrregistry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		host := strings.TrimPrefix(srv.URL, "http://")
		repo, _ := name.NewRepository(host+"/api/img", name.Insecure)
		subject := regtest.PushRandomImage(t, repo, 512, 2)
		r := &Referrers{Client: newClient(t, nil)}
		a := statement(t, subject, 1)
		if err := r.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Head(repo.Tag(FallbackTag(subject.Digest))); err == nil {
			t.Error("a fallback tag was written on a registry serving the referrers API")
		}
		got, err := r.List(ctx, repo, subject.Digest)
		// (pkg/registry answers the config's media type as artifactType,
		// the 1.1 spec's rule before artifactType existed: not checked.)
		if err != nil || len(got) != 1 || got[0].Digest != a.Descriptor.Digest {
			t.Errorf("List: %+v %v", got, err)
		}
	})
	t.Run("fallback erased", func(t *testing.T) {
		reg := regtest.Start(t, regtest.Options{})
		repo, _ := name.NewRepository(reg.Host+"/erased/img", name.Insecure)
		subject := regtest.PushRandomImage(t, repo, 512, 2)
		r := &Referrers{Client: newClient(t, nil), Settle: 10 * time.Millisecond}
		a, b := statement(t, subject, 1), statement(t, subject, 2)
		for _, x := range []*Artifact{a, b} {
			if err := r.Attach(ctx, repo, x); err != nil {
				t.Fatal(err)
			}
		}
		// Another tool rewrites the index from a stale read: b only.
		if err := r.Client.Put(ctx, repo.Tag(FallbackTag(subject.Digest)), fallbackIndex([]v1.Descriptor{b.Descriptor})); err != nil {
			t.Fatal(err)
		}
		got, err := r.List(ctx, repo, subject.Digest)
		if err != nil || len(got) != 2 || !contains(got, a.Descriptor.Digest) || !contains(got, b.Descriptor.Digest) {
			t.Errorf("List after the erasure: %+v %v", got, err)
		}
	})
}
