package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/retry"
)

// fixture is a set of tiny "built" images in one OCI layout: per platform a
// base layer shared by every instance, plus instLayers random layers per
// image. x86-only ids get no arm64 image. stage() pushes them to a staging
// registry and points the records there instead (a copy between
// registries).
type fixture struct {
	dir     string
	built   []core.Image     // the records Publish gets
	blobs   map[string]int64 // unique blob digest -> size (layers and configs)
	digests map[string]string
	images  map[string]v1.Image // "id platform" -> image
}

func (f *fixture) uniqueBlobBytes() int64 {
	var n int64
	for _, s := range f.blobs {
		n += s
	}
	return n
}

// recs is a copy of the records, as Publish takes them.
func (f *fixture) recs() []core.Image { return append([]core.Image(nil), f.built...) }

func makeFixture(t testing.TB, ids []string, x86only map[string]bool, layerSize int64, instLayers int) *fixture {
	t.Helper()
	dir := t.TempDir()
	var adds []mutate.IndexAddendum
	f := &fixture{dir: dir, blobs: map[string]int64{}, digests: map[string]string{}, images: map[string]v1.Image{}}
	base := map[string]v1.Layer{}
	for _, plat := range []string{"linux/amd64", "linux/arm64"} {
		l, err := random.Layer(layerSize, types.OCILayer)
		if err != nil {
			t.Fatal(err)
		}
		base[plat] = l
	}
	yes := true
	for _, id := range ids {
		plats := []string{"linux/amd64", "linux/arm64"}
		if x86only[id] {
			plats = plats[:1]
		}
		for _, plat := range plats {
			layers := []v1.Layer{base[plat]}
			for i := 0; i < instLayers; i++ {
				l, err := random.Layer(layerSize/4+int64(i)+1, types.OCILayer)
				if err != nil {
					t.Fatal(err)
				}
				layers = append(layers, l)
			}
			img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layers...)
			if err != nil {
				t.Fatal(err)
			}
			osName, arch, _ := strings.Cut(plat, "/")
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture = osName, arch
			cf.Config.Labels = map[string]string{"instance": id}
			img, err = mutate.ConfigFile(img, cf)
			if err != nil {
				t.Fatal(err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img})
			dg, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				d, _ := l.Digest()
				s, _ := l.Size()
				f.blobs[d.String()] = s
			}
			cl, err := partial.ConfigLayer(img)
			if err != nil {
				t.Fatal(err)
			}
			cd, _ := cl.Digest()
			cs, _ := cl.Size()
			f.blobs[cd.String()] = cs
			p, _ := core.ParsePlatform(plat)
			f.digests[id+" "+plat] = dg.String()
			f.images[id+" "+plat] = img
			f.built = append(f.built, core.Image{
				Kind: core.KindInstance, InstanceID: id, Platform: p,
				Digest: digest.Digest(dg.String()), OCILayout: filepath.Join(dir, "oci"),
				SpecKey: "spec-" + id + "-" + p.Arch(), BaseCommit: "0123456789abcdef", Verified: &yes, Status: core.StatusBuilt,
			})
		}
	}
	// One write of the whole layout (AppendImage rewrites index.json each time).
	if _, err := layout.Write(filepath.Join(dir, "oci"), mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	return f
}

// stage pushes every image by digest to host/repo (a staging registry, with
// go-containerregistry directly: setup, not the code under test) and makes
// the records name it at refHost (the host, or a proxy in front of it)
// instead of the OCI layout.
func (f *fixture) stage(t testing.TB, host, refHost, repo string) {
	t.Helper()
	todo := map[name.Reference]remote.Taggable{}
	for i := range f.built {
		im := &f.built[i]
		ref, err := name.ParseReference(host + "/" + repo + "@" + im.Digest.String())
		if err != nil {
			t.Fatal(err)
		}
		todo[ref] = f.images[im.InstanceID+" "+im.Platform.String()]
		im.Ref, im.OCILayout = refHost+"/"+repo+"@"+im.Digest.String(), ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := remote.MultiWrite(todo, remote.WithContext(ctx), remote.WithJobs(4)); err != nil {
		t.Fatalf("staging the fixture on %s: %v", host, err)
	}
}

// writeMetadata writes the fixture's metadata file (JSON lines of
// core.Image, as the builder writes it) for the CLI.
func (f *fixture) writeMetadata(t testing.TB) string {
	t.Helper()
	p := filepath.Join(f.dir, "metadata.jsonl")
	if err := core.WriteFile(p, f.built); err != nil {
		t.Fatal(err)
	}
	return p
}

// testBudget retries like the default but waits less: a faulted request
// is retried within milliseconds (Retry-After is capped at 2 s).
var testBudget = retry.Budget{Attempts: 8, MaxElapsed: time.Minute, MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, MaxRetryAfter: 2 * time.Second}

// testClient returns a registry client with testBudget.
func testClient(t testing.TB, rps float64) *registry.Client {
	t.Helper()
	c, err := registry.New(registry.Options{MaxRPS: rps, Budget: testBudget, Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// needSkopeo returns the skopeo path or skips (fails under CI).
func needSkopeo(t testing.TB) string {
	t.Helper()
	return stacktest.LookPath(t, "skopeo")
}

// skopeoRaw fetches a manifest's raw bytes independently of our code.
func skopeoRaw(t testing.TB, ref string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+ref)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("skopeo inspect --raw %s: %v: %s", ref, err, stderr.String())
	}
	return out, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// checkPublished verifies with skopeo, against the registry directly, that
// every instance in f has a complete index (every platform built, each child
// present in the index repository with the built digest) and that each
// per-arch image is present with its built digest. It returns problems.
func checkPublished(t testing.TB, host, prefix string, f *fixture) []string {
	t.Helper()
	n := manifests.Namer{Repo: host + "/" + prefix}
	byID := map[string][]core.Image{}
	for _, im := range f.built {
		byID[im.InstanceID] = append(byID[im.InstanceID], im)
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var problems []string
	for _, id := range ids {
		imgs := byID[id]
		raw, err := skopeoRaw(t, n.IndexRepo(id)+":latest")
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		var idx v1.IndexManifest
		if err := json.Unmarshal(raw, &idx); err != nil {
			problems = append(problems, fmt.Sprintf("%s: index JSON: %v", id, err))
			continue
		}
		if idx.Annotations[manifests.AnnotationInstanceID] != id {
			problems = append(problems, fmt.Sprintf("%s: index annotation instance id %q", id, idx.Annotations[manifests.AnnotationInstanceID]))
		}
		want := map[string]string{}
		for _, im := range imgs {
			want[im.Platform.String()] = im.Digest.String()
		}
		got := map[string]string{}
		for _, d := range idx.Manifests {
			got[d.Platform.OS+"/"+d.Platform.Architecture] = d.Digest.String()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			problems = append(problems, fmt.Sprintf("%s: index lists %v, built %v", id, got, want))
		}
		for _, d := range idx.Manifests {
			craw, err := skopeoRaw(t, n.IndexRepo(id)+"@"+d.Digest.String())
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: PARTIAL INDEX: %v", id, err))
				continue
			}
			if sha(craw) != d.Digest.String() {
				problems = append(problems, fmt.Sprintf("%s: child bytes digest %s != %s", id, sha(craw), d.Digest))
			}
		}
		for _, im := range imgs {
			araw, err := skopeoRaw(t, n.ArchRepo(im.Platform.Arch(), id)+":latest")
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if sha(araw) != im.Digest.String() {
				problems = append(problems, fmt.Sprintf("%s %s: per-arch latest is %s, built %s", id, im.Platform, sha(araw), im.Digest))
			}
		}
	}
	return problems
}

// repoCount is how many destination repositories a fixture's blobs go to:
// per image its per-arch repository and its index repository.
func (f *fixture) blobPlacements() int {
	n := 0
	for _, im := range f.built {
		img := f.images[im.InstanceID+" "+im.Platform.String()]
		ls, _ := img.Layers()
		n += 2 * (len(ls) + 1)
	}
	return n
}
