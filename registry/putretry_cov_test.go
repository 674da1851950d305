package registry

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rawManifest is a manifest document to put (remote.Taggable).
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// refusingRegistry is the in-process registry behind a front that answers
// the first refuse manifest PUTs as distribution does when a reference is
// missing (400 MANIFEST_BLOB_UNKNOWN, distribution spec's error codes), or
// with status/code when code is set.
func refusingRegistry(t *testing.T, refuse int32, status int, code string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var puts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			if n := puts.Add(1); n <= refuse || refuse < 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				io.WriteString(w, `{"errors":[{"code":"`+code+`","message":"blob unknown to registry","detail":"sha256:`+strings.Repeat("b", 64)+`"}]}`)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &puts
}

func TestPutManifestRetriesUnknownReferences(t *testing.T) {
	doc := rawManifest{raw: []byte(emptyIndex), mt: types.OCIImageIndex}
	cases := []struct {
		name        string
		refuse      int32 // -1: every PUT
		status      int
		code        string
		repairErr   error
		wantPuts    int32
		wantRepairs int
		wantErr     []string
	}{
		{name: "accepted at once", refuse: 0, status: 400, code: "MANIFEST_BLOB_UNKNOWN", wantPuts: 1},
		{name: "accepted on the third try", refuse: 2, status: 400, code: "MANIFEST_BLOB_UNKNOWN", wantPuts: 3, wantRepairs: 2},
		{name: "BLOB_UNKNOWN too", refuse: 1, status: 404, code: "BLOB_UNKNOWN", wantPuts: 2, wantRepairs: 1},
		{name: "refused every time", refuse: -1, status: 400, code: "MANIFEST_BLOB_UNKNOWN", wantPuts: RefTries, wantRepairs: RefTries - 1,
			wantErr: []string{"MANIFEST_BLOB_UNKNOWN", "after 5 tries: a reference was unknown to the registry each time"}},
		{name: "another refusal is returned at once", refuse: -1, status: 400, code: "MANIFEST_INVALID", wantPuts: 1,
			wantErr: []string{"MANIFEST_INVALID"}},
		{name: "a failed repair ends the tries", refuse: -1, status: 400, code: "MANIFEST_BLOB_UNKNOWN", repairErr: errors.New("child put refused"),
			wantPuts: 1, wantRepairs: 1, wantErr: []string{"MANIFEST_BLOB_UNKNOWN", "making sure of its references again: child put refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, puts := refusingRegistry(t, tc.refuse, tc.status, tc.code)
			c := newTestClient(t, testBudget)
			ref, err := c.ParseReference(hostOf(srv) + "/cov/put:latest")
			if err != nil {
				t.Fatal(err)
			}
			repairs := 0
			var told []string
			err = c.PutManifest(context.Background(), ref, doc, PutRetry{
				Repair: func(context.Context) error { repairs++; return tc.repairErr },
				OnRetry: func(r name.Reference, err error) {
					told = append(told, r.String())
				},
			})
			if got := puts.Load(); got != tc.wantPuts {
				t.Errorf("%d PUTs, want %d", got, tc.wantPuts)
			}
			if repairs != tc.wantRepairs {
				t.Errorf("%d repairs, want %d", repairs, tc.wantRepairs)
			}
			if tc.repairErr == nil && len(told) != tc.wantRepairs {
				t.Errorf("OnRetry told %d times, want %d", len(told), tc.wantRepairs)
			}
			for _, r := range told {
				if r != ref.String() {
					t.Errorf("OnRetry told of %s, want %s", r, ref)
				}
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("PutManifest: %v", err)
				}
				// The document is there, by its tag.
				m, err := c.Manifest(context.Background(), ref, 1<<20)
				if err != nil || string(m.Raw) != emptyIndex {
					t.Errorf("after the put: %v, %v", m, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "putting manifest "+ref.String()) {
				t.Errorf("error %q does not name %s", err, ref)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
