package publish

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// putManifest against a real distribution 2.8: an index whose child is not
// in the repository is refused with MANIFEST_BLOB_UNKNOWN; the repair puts
// the child and the index goes again. A refusal of another kind is not
// retried, and a repair that never helps ends after registry.RefTries tries.
func TestPutManifestRetriesUnknownReference(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})
	garbage := rawPut{raw: []byte(`{"schemaVersion":3}`), mt: types.OCIManifestSchema1}

	for _, tc := range []struct {
		name        string
		repo        string
		put         remote.Taggable
		fixOnRepair int // the repair call that writes the child (0: never)
		wantRepairs int
		wantErr     string // "" for success
	}{
		{name: "child written by the first repair", repo: "fixed", put: idx, fixOnRepair: 1, wantRepairs: 1},
		{name: "child written by the third repair", repo: "late", put: idx, fixOnRepair: 3, wantRepairs: 3},
		{name: "child never written", repo: "never", put: idx, wantRepairs: registry.RefTries - 1, wantErr: "MANIFEST_BLOB_UNKNOWN"},
		// distribution 2.8 answers schemaVersion 3 with UNKNOWN (a 500 the
		// transport retries on its own budget), not an unknown reference.
		{name: "another refusal is not repaired", repo: "invalid", put: garbage, wantRepairs: 0, wantErr: "UNKNOWN: unknown error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &publisher{c: testClient(t, -1), opts: Options{Progress: io.Discard}}
			repo, err := p.c.ParseRepository(reg.Host + "/" + tc.repo)
			if err != nil {
				t.Fatal(err)
			}
			repairs := 0
			repair := func(ctx context.Context) error {
				repairs++
				if repairs == tc.fixOnRepair {
					return remote.Write(repo.Digest(mustDigest(t, img)), img, remote.WithContext(ctx))
				}
				return nil
			}
			err = p.putManifest(ctx, repo.Tag("latest"), tc.put, repair)
			if repairs != tc.wantRepairs || p.sum.RefRetries != tc.wantRepairs {
				t.Errorf("repairs %d, RefRetries %d, want %d each", repairs, p.sum.RefRetries, tc.wantRepairs)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("put: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("put: %v, want an error with %s", err, tc.wantErr)
			case tc.wantErr == "":
				d, err := p.c.Head(ctx, repo.Tag("latest"))
				if err != nil || d == nil {
					t.Fatalf("index not there after the put: %v %v", d, err)
				}
			}
			if tc.wantErr != "" && tc.wantRepairs > 0 && !registry.RefsUnknown(err) {
				t.Errorf("error %v is not a registry's unknown-reference answer", err)
			}
		})
	}
}

func mustDigest(t *testing.T, img v1.Image) string {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// rawPut is a manifest body as is, for a PUT the registry must refuse.
type rawPut struct {
	raw []byte
	mt  types.MediaType
}

func (r rawPut) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawPut) MediaType() (types.MediaType, error) { return r.mt, nil }
