package attest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// hider sits under a client and, before the PUTs of one manifest (by tag),
// hides a reference of it in the real registry, as another publish's link
// rewrite does for an instant (distribution 2.8 truncates a link file,
// then writes it): the registry itself refuses the PUT for an unknown
// reference. After the refused PUT the reference is restored, unless the
// reference is to stay hidden.
type hider struct {
	next    http.RoundTripper
	tag     string // PUTs of .../manifests/<tag> are counted and hidden from
	hides   int    // how many PUTs meet a hidden reference (0: all)
	hide    func() error
	restore func() error

	mu   sync.Mutex
	puts int
	errs []error
}

func (h *hider) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || !strings.HasSuffix(req.URL.Path, "/manifests/"+h.tag) {
		return h.next.RoundTrip(req)
	}
	h.mu.Lock()
	h.puts++
	n := h.puts
	h.mu.Unlock()
	hiding := h.hides == 0 || n <= h.hides
	if hiding {
		h.note(h.hide())
	}
	resp, err := h.next.RoundTrip(req)
	if hiding && h.hides != 0 {
		h.note(h.restore())
	}
	return resp, err
}

func (h *hider) note(err error) {
	if err != nil {
		h.mu.Lock()
		h.errs = append(h.errs, err)
		h.mu.Unlock()
	}
}

// call sends one request straight to the registry (not through the
// client under test) and wants one of the statuses.
func call(method, url string, body []byte, contentType string, want ...int) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, w := range want {
		if resp.StatusCode == w {
			return nil
		}
	}
	return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, b)
}

// Two publishes attaching to the same images: 3 of 6 exited 1 on an
// attachment PUT refused with DIGEST_INVALID / MANIFEST_BLOB_UNKNOWN (the
// other's upload of the shared empty config, or its put of the same
// attachment, rewriting a link at that instant). An attachment PUT and a
// fallback referrers index PUT refused for an unknown reference are tried
// again as index PUTs are (registry.PutManifest); a reference that stays
// unknown still fails, after registry.RefTries PUTs. Real registry
// answers (distribution 2.8): the reference is deleted before the PUT and
// put back after it. Bounded by PUTs counted, not by time.
func TestAttachRetriesUnknownReference(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, tc := range []struct {
		name     string
		fallback bool // hide from the fallback index PUT (else from the attachment PUT)
		hides    int
		wantPuts int
		wantErr  bool
	}{
		{name: "attachment PUT meets a hidden layer once", hides: 1, wantPuts: 2},
		{name: "attachment PUT meets a hidden layer twice", hides: 2, wantPuts: 3},
		{name: "fallback index PUT meets a hidden attachment once", fallback: true, hides: 1, wantPuts: 2},
		{name: "attachment PUT meets a layer hidden for good", hides: 0, wantPuts: registry.RefTries, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, err := name.NewRepository(fmt.Sprintf("%s/putretry/img%d", reg.Host, i), name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			subject := regtest.PushRandomImage(t, repo, 256, 1)
			a := statement(t, subject, i)
			base := "http://" + reg.Host + "/v2/" + repo.RepositoryStr()
			h := &hider{next: http.DefaultTransport.(*http.Transport).Clone(), hides: tc.hides}
			if tc.fallback {
				// The fallback index lists the attachment, put a moment
				// before under its own tag: hide that manifest.
				h.tag = FallbackTag(subject.Digest)
				h.hide = func() error {
					return call(http.MethodDelete, base+"/manifests/"+a.Descriptor.Digest.String(), nil, "", http.StatusAccepted)
				}
				h.restore = func() error {
					return call(http.MethodPut, base+"/manifests/"+AttachmentTag(subject.Digest, a.Descriptor.Digest), a.Raw, string(types.OCIManifestSchema1), http.StatusCreated)
				}
			} else {
				h.tag = AttachmentTag(subject.Digest, a.Descriptor.Digest)
				layer := static.NewLayer(a.Blob, a.BlobType)
				ld, _, _ := v1.SHA256(bytes.NewReader(a.Blob))
				h.hide = func() error {
					return call(http.MethodDelete, base+"/blobs/"+ld.String(), nil, "", http.StatusAccepted, http.StatusNotFound)
				}
				h.restore = func() error { return remote.WriteLayer(repo, layer) }
			}
			r := &Referrers{Client: newClient(t, h), Settle: 10 * time.Millisecond}
			var retried int
			r.OnRetry = func(name.Reference, error) { retried++ }
			err = r.Attach(ctx, repo, a)
			if len(h.errs) > 0 {
				t.Fatalf("hiding or restoring the reference: %v", h.errs)
			}
			if h.puts != tc.wantPuts || retried != tc.wantPuts-1 {
				t.Errorf("%d PUTs of %s, %d retries reported; want %d and %d", h.puts, h.tag, retried, tc.wantPuts, tc.wantPuts-1)
			}
			if tc.wantErr {
				if err == nil || !registry.RefsUnknown(err) {
					t.Fatalf("Attach: %v; want the registry's unknown-reference answer", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			got, err := r.List(ctx, repo, subject.Digest)
			if err != nil || !contains(got, a.Descriptor.Digest) {
				t.Fatalf("List after the attach: %v, %v; want the attachment", got, err)
			}
			if tc.fallback {
				idx, err := remote.Referrers(repo.Digest(subject.Digest.String()))
				if err != nil {
					t.Fatal(err)
				}
				if m, _ := idx.IndexManifest(); m == nil || !contains(m.Manifests, a.Descriptor.Digest) {
					t.Errorf("the fallback index lacks the attachment: %+v", m)
				}
			}
		})
	}
}
