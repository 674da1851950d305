package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
)

// fixture is a set of tiny "built" images in one OCI layout: per platform a
// base layer shared by every instance, plus instLayers random layers per
// image. x86-only ids get no arm64 image.
type fixture struct {
	dir     string
	recs    []core.Image
	blobs   map[string]int64 // unique blob digest -> size (layers and configs)
	digests map[string]string
}

func (f *fixture) uniqueBlobBytes() int64 {
	var n int64
	for _, s := range f.blobs {
		n += s
	}
	return n
}

func makeFixture(t testing.TB, ids []string, x86only map[string]bool, layerSize int64, instLayers int) *fixture {
	t.Helper()
	dir := t.TempDir()
	var adds []mutate.IndexAddendum
	f := &fixture{dir: dir, blobs: map[string]int64{}, digests: map[string]string{}}
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
			arch2, _ := manifests.ArchForPlatform(plat)
			f.digests[id+" "+plat] = dg.String()
			f.recs = append(f.recs, core.Image{
				Kind: core.KindInstance, InstanceID: id, Platform: core.Platform(plat), Status: core.StatusBuilt,
				Digest: digest.Digest(dg.String()), OCILayout: filepath.Join(dir, "oci"),
				SpecKey: "spec-" + id + "-" + arch2, BaseCommit: "0123456789abcdef", Verified: &yes,
			})
		}
	}
	// One write of the whole layout (AppendImage rewrites index.json each time).
	if _, err := layout.Write(filepath.Join(dir, "oci"), mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	return f
}

// testClient returns a registry client tuned for tests: short backoff,
// Retry-After capped at 2s.
func testClient(t testing.TB, rps float64) *registry.Client {
	t.Helper()
	c, err := registry.New(registry.Options{MaxRPS: rps, MinBackoff: 20 * 1e6, MaxBackoff: 500 * 1e6, MaxRetryAfter: 2 * 1e9, OpAttempts: 8, Keychain: anonKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// needSkopeo returns the skopeo path or skips (fails under CI).
func needSkopeo(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("skopeo")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("skopeo missing (apt-get install -y skopeo)")
		}
		t.Skip("skopeo missing (apt-get install -y skopeo)")
	}
	return p
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
	for _, im := range f.recs {
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
			arch := im.Platform.Arch()
			araw, err := skopeoRaw(t, n.ArchRepo(arch, id)+":latest")
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
