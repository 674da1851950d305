package regtest

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PushRandomImage pushes a random OCI image (layers layers of size bytes) to
// repo by digest, anonymously, and returns its descriptor: a subject for
// tests that attach referrers.
func PushRandomImage(tb testing.TB, repo name.Repository, size, layers int64) v1.Descriptor {
	tb.Helper()
	img, err := random.Image(size, layers)
	if err != nil {
		tb.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	dg, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(repo.Digest(dg.String()), img); err != nil {
		tb.Fatalf("pushing a random image to %s: %v", repo, err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		tb.Fatal(err)
	}
	return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: dg, Size: int64(len(raw))}
}
