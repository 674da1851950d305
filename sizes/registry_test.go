package sizes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/publish"
)

// regFixture is a real registry holding two small image sets pushed by the
// test: A in swebuild naming under swebuild/, B in Epoch naming under
// epoch-research/. Requests from sizes go through a counting proxy.
type regFixture struct {
	reg       *regtest.Registry
	proxyHost string
	counts    *requestCounter
	dataset   string
	// pushed refs per set (registry host, not the proxy), by "id platform".
	a, b map[string]string
}

// Instances of the fixture dataset; A lacks matplotlib, B lacks
// django__django-11133. sympy__sympy-20590 and -20591 are byte-identical
// images in A (one config for two manifests); B's sympy__sympy-20590 is a
// two-platform index.
var fixtureIDs = []struct{ id, repo string }{
	{"astropy__astropy-12907", "astropy/astropy"},
	{"django__django-11099", "django/django"},
	{"django__django-11133", "django/django"},
	{"matplotlib__matplotlib-23314", "matplotlib/matplotlib"},
	{"sympy__sympy-20590", "sympy/sympy"},
	{"sympy__sympy-20591", "sympy/sympy"},
}

func needTool(t *testing.T, tool string) {
	t.Helper()
	stacktest.LookPath(t, tool)
}

func startFixture(t *testing.T) *regFixture {
	t.Helper()
	reg := regtest.Start(t, regtest.Options{})
	f := &regFixture{reg: reg, a: map[string]string{}, b: map[string]string{}}
	rng := rand.New(rand.NewSource(7))
	layer := func(kib int64) v1.Layer {
		l, err := random.Layer(kib*1024, types.DockerLayer, random.WithSource(rand.NewSource(rng.Int63())))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	image := func(arch string, layers ...v1.Layer) v1.Image {
		base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: arch, RootFS: v1.RootFS{Type: "layers"}})
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(base, layers...)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	push := func(ref string, img v1.Image) {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(r, img); err != nil {
			t.Fatalf("pushing %s: %v", ref, err)
		}
	}
	aRef := func(id, arch string) string {
		return reg.Host + "/swebuild/sweb.eval." + arch + "." + strings.ReplaceAll(id, "__", "_1776_") + ":latest"
	}
	bRef := func(id, arch string) string {
		return reg.Host + "/epoch-research/swe-bench.eval." + arch + "." + id + ":latest"
	}

	// Set A: two shared base layers, one env layer per repo, one instance layer.
	base1, base2 := layer(300), layer(120)
	envDjango, envAstropy, envSympy := layer(260), layer(400), layer(180)
	for _, x := range []struct {
		id  string
		env v1.Layer
	}{{"django__django-11099", envDjango}, {"django__django-11133", envDjango}, {"astropy__astropy-12907", envAstropy}} {
		ref := aRef(x.id, "x86_64")
		push(ref, image("amd64", base1, base2, x.env, layer(40)))
		f.a[x.id+" linux/amd64"] = ref
	}
	sympy := image("amd64", base1, base2, envSympy, layer(50))
	for _, id := range []string{"sympy__sympy-20590", "sympy__sympy-20591"} {
		push(aRef(id, "x86_64"), sympy)
		f.a[id+" linux/amd64"] = aRef(id, "x86_64")
	}
	armBase := layer(280)
	push(aRef("django__django-11099", "arm64"), image("arm64", armBase, envDjango, layer(40)))
	f.a["django__django-11099 linux/arm64"] = aRef("django__django-11099", "arm64")

	// Set B: bigger, one base, no env sharing.
	bBase := layer(500)
	for _, id := range []string{"astropy__astropy-12907", "django__django-11099", "matplotlib__matplotlib-23314", "sympy__sympy-20591"} {
		push(bRef(id, "x86_64"), image("amd64", bBase, layer(350), layer(60)))
		f.b[id+" linux/amd64"] = bRef(id, "x86_64")
	}
	amd, arm := image("amd64", bBase, layer(330), layer(70)), image("arm64", layer(450), layer(330), layer(70))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	idxRef, err := name.ParseReference(bRef("sympy__sympy-20590", "x86_64"))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(idxRef, idx); err != nil {
		t.Fatalf("pushing index: %v", err)
	}
	f.b["sympy__sympy-20590 linux/amd64"] = idxRef.String()

	f.proxyHost, f.counts = startCountingProxy(t, reg.Host)
	var ds strings.Builder
	for _, x := range fixtureIDs {
		ds.WriteString(x.id + "\n")
	}
	f.dataset = filepath.Join(t.TempDir(), "ids.txt")
	if err := os.WriteFile(f.dataset, []byte(ds.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// requestCounter counts registry API requests by kind.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

func startCountingProxy(t *testing.T, target string) (string, *requestCounter) {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCounter{n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch p := r.URL.Path; {
		case p == "/v2/" || p == "/v2":
			kind = "ping"
		case strings.Contains(p, "/manifests/"):
			kind = "manifest"
		case strings.Contains(p, "/blobs/"):
			kind = "blob"
		}
		c.add(r.Method + " " + kind)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), c
}

// skopeoImageManifest returns the image manifest of ref as skopeo sees it,
// following an index to its amd64 child, and the manifest's digest.
func skopeoImageManifest(t *testing.T, ref, platform string) (v1.Manifest, string) {
	t.Helper()
	raw := skopeoRaw(t, ref)
	var probe struct {
		MediaType string `json:"mediaType"`
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				Architecture string `json:"architecture"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		t.Fatalf("parsing %s: %v", ref, err)
	}
	if len(probe.Manifests) > 0 {
		arch := strings.Split(platform, "/")[1]
		found := false
		for _, m := range probe.Manifests {
			if m.Platform.Architecture == arch {
				repo := ref[:strings.LastIndex(ref, ":")]
				raw = skopeoRaw(t, repo+"@"+m.Digest)
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%s: no %s child", ref, platform)
		}
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("parsing manifest of %s: %v", ref, err)
	}
	sum := sha256.Sum256(raw)
	return m, "sha256:" + hex.EncodeToString(sum[:])
}

func skopeoRaw(t *testing.T, ref string) []byte {
	t.Helper()
	out, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+ref).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("skopeo inspect --raw %s: %v\n%s", ref, err, msg)
	}
	return out
}

// independent recomputes a set's figures from skopeo's view of the
// manifests, with no code shared with the package.
type independent struct {
	compressed map[string]int64 // "id platform" -> sum of layer sizes
	layers     map[string]int
	shared     map[string]int
	digest     map[string]string
	naive      int64
	unique     int64
	uniqueN    int
	repoUnique map[string]int64
	layerSets  map[string][]v1.Descriptor
}

func computeIndependent(t *testing.T, refs map[string]string, repoOf func(id string) string) independent {
	ind := independent{compressed: map[string]int64{}, layers: map[string]int{}, shared: map[string]int{}, digest: map[string]string{},
		repoUnique: map[string]int64{}, layerSets: map[string][]v1.Descriptor{}}
	users := map[string]int{}
	uniq := map[string]int64{}
	repoUniq := map[string]map[string]int64{}
	for key, ref := range refs {
		platform := strings.Fields(key)[1]
		m, d := skopeoImageManifest(t, ref, platform)
		ind.digest[key] = d
		ind.layerSets[key] = m.Layers
		seen := map[string]bool{}
		repo := repoOf(strings.Fields(key)[0])
		if repoUniq[repo] == nil {
			repoUniq[repo] = map[string]int64{}
		}
		for _, l := range m.Layers {
			ind.compressed[key] += l.Size
			ind.naive += l.Size
			uniq[l.Digest.String()] = l.Size
			repoUniq[repo][l.Digest.String()] = l.Size
			if !seen[l.Digest.String()] {
				users[l.Digest.String()]++
				seen[l.Digest.String()] = true
			}
		}
		ind.layers[key] = len(m.Layers)
	}
	for key, ls := range ind.layerSets {
		seen := map[string]bool{}
		for _, l := range ls {
			if !seen[l.Digest.String()] && users[l.Digest.String()] > 1 {
				ind.shared[key]++
			}
			seen[l.Digest.String()] = true
		}
	}
	for _, n := range uniq {
		ind.unique += n
	}
	ind.uniqueN = len(uniq)
	for repo, m := range repoUniq {
		for _, n := range m {
			ind.repoUnique[repo] += n
		}
	}
	return ind
}

func fixtureRepo(id string) string {
	for _, x := range fixtureIDs {
		if x.id == id {
			return x.repo
		}
	}
	return ""
}

func amd64Only(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasSuffix(k, " linux/amd64") {
			out[k] = v
		}
	}
	return out
}

func TestRealRegistry(t *testing.T) {
	needTool(t, "skopeo")
	f := startFixture(t)
	ctx := context.Background()
	setA := "swebuild:" + f.proxyHost + "/swebuild"
	setB := "epoch:" + f.proxyHost + "/epoch-research"

	t.Run("sizes equal skopeo and request count", func(t *testing.T) {
		f.counts.take()
		rep, err := Run(ctx, Config{Images: setA, Dataset: f.dataset, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		counts := f.counts.take()
		checkAgainstSkopeo(t, rep.A, amd64Only(f.a))
		// N manifest requests (6 dataset ids, 5 present) plus one per
		// unique config (the two sympy images share theirs: 4), nothing else
		// but one ping per repository transport.
		want := map[string]int{"GET manifest": 6, "GET blob": 4}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("%s requests = %d, want %d (all: %v)", k, counts[k], v, counts)
			}
		}
		for k, v := range counts {
			if _, ok := want[k]; !ok && k != "GET ping" {
				t.Errorf("unexpected %d %q requests", v, k)
			}
		}
		if counts["GET ping"] > 6 {
			t.Errorf("%d pings for 6 repositories", counts["GET ping"])
		}
		if got := rep.A.Images[3]; got.InstanceID != "matplotlib__matplotlib-23314" || got.Status != StatusMissing {
			t.Errorf("matplotlib image = %+v, want missing", got)
		}
		if rep.A.Totals.Missing != 1 || rep.A.Totals.Errors != 0 || len(rep.Problems()) != 0 {
			t.Errorf("totals %+v problems %q", rep.A.Totals, rep.Problems())
		}
	})

	t.Run("A against B with an index in B", func(t *testing.T) {
		f.counts.take()
		rep, err := Run(ctx, Config{Images: setA, Against: setB, Dataset: f.dataset, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		counts := f.counts.take()
		checkAgainstSkopeo(t, rep.A, amd64Only(f.a))
		checkAgainstSkopeo(t, rep.B, f.b)
		// A: 6 manifests + 4 configs; B: 6 manifests + 1 index child,
		// 5 configs (all B images differ).
		if counts["GET manifest"] != 13 || counts["GET blob"] != 9 {
			t.Errorf("requests = %v, want 13 manifest GETs and 9 blob GETs", counts)
		}
		c := rep.Comparison
		// Common: astropy, django-11099, sympy-20590, sympy-20591.
		if c.CommonImages != 4 {
			t.Errorf("common images = %d, want 4", c.CommonImages)
		}
		indA := computeIndependent(t, pick(f.a, "astropy__astropy-12907", "django__django-11099", "sympy__sympy-20590", "sympy__sympy-20591"), fixtureRepo)
		indB := computeIndependent(t, pick(f.b, "astropy__astropy-12907", "django__django-11099", "sympy__sympy-20590", "sympy__sympy-20591"), fixtureRepo)
		if c.A.UniqueCompressedBytes != indA.unique || c.B.UniqueCompressedBytes != indB.unique {
			t.Errorf("common unique = %d / %d, skopeo says %d / %d", c.A.UniqueCompressedBytes, c.B.UniqueCompressedBytes, indA.unique, indB.unique)
		}
		want := round4((float64(indA.unique)/float64(indB.unique) - 1) * 100)
		if c.GrowthPercent == nil || *c.GrowthPercent != want {
			t.Errorf("growth = %v, want %v", c.GrowthPercent, want)
		}
		if want >= 0 {
			t.Fatalf("fixture B should be bigger than A (growth %v)", want)
		}
		// A is smaller than B: a limit of 0% passes; B against A fails.
		zero := 0.0
		rep2, err := Run(ctx, Config{Images: setB, Against: setA, Dataset: f.dataset, MaxGrowthPercent: &zero, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		if !rep2.GrowthExceeded || len(rep2.Problems()) != 1 || !strings.Contains(rep2.Problems()[0], "size regression") {
			t.Errorf("B against A with limit 0%%: exceeded %v problems %q", rep2.GrowthExceeded, rep2.Problems())
		}
	})

	t.Run("arm64", func(t *testing.T) {
		rep, err := Run(ctx, Config{Images: setA, Dataset: f.dataset, Platforms: []core.Platform{core.ARM64}, Options: Options{Jobs: 2}})
		if err != nil {
			t.Fatal(err)
		}
		var ok []string
		for _, img := range rep.A.Images {
			if img.Status == StatusOK {
				ok = append(ok, img.InstanceID+" "+img.Platform.String())
			} else if img.Status != StatusMissing {
				t.Errorf("%s: status %s (%s), want missing", img.InstanceID, img.Status, img.Error)
			}
		}
		if strings.Join(ok, ",") != "django__django-11099 linux/arm64" {
			t.Errorf("measured %v, want only django__django-11099 linux/arm64", ok)
		}
		// matplotlib__matplotlib-23314 is in upstream's USE_X86: builder/spec
		// gives it no arm64 image, so it is not looked up at all.
		if rep.A.PlatformSkipped != 1 || len(rep.A.Images) != 5 || findImage(rep.A, "matplotlib__matplotlib-23314 linux/arm64") != nil {
			t.Errorf("platform skipped %d, images %d; want 1 and 5", rep.A.PlatformSkipped, len(rep.A.Images))
		}
		checkAgainstSkopeo(t, rep.A, map[string]string{"django__django-11099 linux/arm64": f.a["django__django-11099 linux/arm64"]})
	})

	t.Run("uncompressed once per layer and cached", func(t *testing.T) {
		cache := t.TempDir()
		f.counts.take()
		rep, err := Run(ctx, Config{Images: setA, Dataset: f.dataset, Options: Options{Jobs: 4, Uncompressed: true, CacheDir: cache}})
		if err != nil {
			t.Fatal(err)
		}
		counts := f.counts.take()
		ind := computeIndependent(t, amd64Only(f.a), fixtureRepo)
		// 4 configs + every unique layer once.
		if counts["GET blob"] != 4+ind.uniqueN {
			t.Errorf("blob GETs = %d, want %d (4 configs + %d unique layers)", counts["GET blob"], 4+ind.uniqueN, ind.uniqueN)
		}
		// Independent uncompressed sizes: skopeo copy to a dir, gzip -dc.
		layerU := map[string]int64{}
		for key, ref := range amd64Only(f.a) {
			dir := filepath.Join(t.TempDir(), "img")
			if out, err := exec.Command("skopeo", "copy", "--src-tls-verify=false", "docker://"+ref, "dir:"+dir).CombinedOutput(); err != nil {
				t.Fatalf("skopeo copy %s: %v\n%s", ref, err, out)
			}
			for _, l := range ind.layerSets[key] {
				out, err := exec.Command("sh", "-c", `gzip -dc "$1" | wc -c`, "sh", filepath.Join(dir, l.Digest.Hex)).Output()
				if err != nil {
					t.Fatalf("gzip -dc layer %s: %v", l.Digest, err)
				}
				n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				layerU[l.Digest.String()] = n
			}
		}
		var naiveU, uniqueU int64
		for key, ls := range ind.layerSets {
			var sum int64
			for _, l := range ls {
				sum += layerU[l.Digest.String()]
			}
			naiveU += sum
			img := findImage(rep.A, key)
			if img == nil || img.UncompressedBytes == nil || *img.UncompressedBytes != sum {
				t.Errorf("%s: uncompressed = %v, gzip -dc says %d", key, img, sum)
			}
		}
		for _, n := range layerU {
			uniqueU += n
		}
		tt := rep.A.Totals
		if tt.NaiveUncompressedBytes == nil || *tt.NaiveUncompressedBytes != naiveU || tt.UniqueUncompressedBytes == nil || *tt.UniqueUncompressedBytes != uniqueU {
			t.Errorf("uncompressed totals = %v / %v, want %d / %d", tt.NaiveUncompressedBytes, tt.UniqueUncompressedBytes, naiveU, uniqueU)
		}
		// Second run: every layer size comes from the cache.
		rep2, err := Run(ctx, Config{Images: setA, Dataset: f.dataset, Options: Options{Jobs: 4, Uncompressed: true, CacheDir: cache}})
		if err != nil {
			t.Fatal(err)
		}
		if counts := f.counts.take(); counts["GET blob"] != 4 {
			t.Errorf("cached run: blob GETs = %d, want 4 (configs only)", counts["GET blob"])
		}
		if *rep2.A.Totals.UniqueUncompressedBytes != uniqueU {
			t.Errorf("cached run unique uncompressed = %d, want %d", *rep2.A.Totals.UniqueUncompressedBytes, uniqueU)
		}
	})

	t.Run("publish ledger as A, scheme B takes its pairs", func(t *testing.T) {
		ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
		l, err := publish.OpenLedger(ledgerPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range sortedKeys(amd64Only(f.a)) {
			_, d := skopeoImageManifest(t, f.a[k], "linux/amd64")
			rec := core.Image{Kind: core.KindInstance, InstanceID: strings.Fields(k)[0], Platform: core.AMD64,
				Ref: pinRef(strings.Replace(f.a[k], f.reg.Host, f.proxyHost, 1), d), Digest: digest.Digest(d), SpecKey: "k", Status: core.StatusPublished}
			if err := l.Append(rec); err != nil {
				t.Fatal(err)
			}
		}
		// A failed push is in the set, reported missing.
		if err := l.Append(core.Image{Kind: core.KindInstance, InstanceID: "matplotlib__matplotlib-23314", Platform: core.AMD64,
			Digest: digest.Digest("sha256:" + strings.Repeat("0", 64)), Status: core.StatusFailed, Error: "push failed"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		f.counts.take()
		rep, err := Run(ctx, Config{Images: ledgerPath, Against: setB, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		counts := f.counts.take()
		checkAgainstSkopeo(t, rep.A, amd64Only(f.a))
		if rep.A.Totals.Images != 6 || rep.A.Totals.Missing != 1 || rep.B.Totals.Images != 6 || rep.B.Totals.Missing != 1 {
			t.Errorf("A images %d missing %d, B images %d missing %d; want 6 1 6 1", rep.A.Totals.Images, rep.A.Totals.Missing, rep.B.Totals.Images, rep.B.Totals.Missing)
		}
		// A: 5 manifests by digest (the failed push is not looked up) + 4
		// configs; B: 6 manifests + 1 index child + 5 configs.
		if counts["GET manifest"] != 12 || counts["GET blob"] != 9 {
			t.Errorf("requests = %v, want 12 manifest GETs and 9 blob GETs", counts)
		}
	})

	t.Run("build metadata file", func(t *testing.T) {
		var md []core.Image
		for _, k := range sortedKeys(f.a) {
			platform := strings.Fields(k)[1]
			_, d := skopeoImageManifest(t, f.a[k], platform)
			ref := strings.Replace(f.a[k], f.reg.Host, f.proxyHost, 1)
			pl, err := core.ParsePlatform(platform)
			if err != nil {
				t.Fatal(err)
			}
			md = append(md, core.Image{Kind: core.KindInstance, InstanceID: strings.Fields(k)[0], Platform: pl,
				Digest: digest.Digest(d), Ref: ref[:strings.LastIndex(ref, ":")] + "@" + d, SpecKey: "k", Status: core.StatusBuilt})
		}
		mdPath := filepath.Join(t.TempDir(), "metadata.jsonl")
		if err := core.WriteFile(mdPath, md); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(ctx, Config{Images: mdPath, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstSkopeo(t, rep.A, f.a)
		// --platform filters a file's images.
		rep, err = Run(ctx, Config{Images: mdPath, Platforms: []core.Platform{core.ARM64}, PlatformsGiven: true, Options: Options{Jobs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.A.Images) != 1 || rep.A.Images[0].Platform != core.ARM64 || rep.A.Images[0].Status != StatusOK {
			t.Errorf("arm64-only images = %+v", rep.A.Images)
		}
	})
}

func pick(m map[string]string, ids ...string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		out[id+" linux/amd64"] = m[id+" linux/amd64"]
	}
	return out
}

func findImage(s *Set, key string) *Image {
	for i := range s.Images {
		if s.Images[i].InstanceID+" "+s.Images[i].Platform.String() == key {
			return &s.Images[i]
		}
	}
	return nil
}

// checkAgainstSkopeo compares every measured image and the set totals with
// the figures computed from skopeo's manifests; refs are the images that
// exist (everything else must be reported missing).
func checkAgainstSkopeo(t *testing.T, s *Set, refs map[string]string) {
	t.Helper()
	ind := computeIndependent(t, refs, fixtureRepo)
	var measured []string
	for _, img := range s.Images {
		key := img.InstanceID + " " + img.Platform.String()
		if _, exists := refs[key]; !exists {
			if img.Status != StatusMissing {
				t.Errorf("%s %s: status %s (%s), want missing", s.Label, key, img.Status, img.Error)
			}
			continue
		}
		measured = append(measured, key)
		if img.Status != StatusOK {
			t.Errorf("%s %s: status %s: %s", s.Label, key, img.Status, img.Error)
			continue
		}
		if img.CompressedBytes != ind.compressed[key] || img.Layers != ind.layers[key] || img.SharedLayers != ind.shared[key] || img.Digest != ind.digest[key] {
			t.Errorf("%s %s: compressed %d layers %d shared %d digest %s; skopeo: %d %d %d %s", s.Label, key,
				img.CompressedBytes, img.Layers, img.SharedLayers, img.Digest, ind.compressed[key], ind.layers[key], ind.shared[key], ind.digest[key])
		}
	}
	sort.Strings(measured)
	if len(measured) != len(refs) {
		t.Errorf("%s: measured %v, want all of %d refs", s.Label, measured, len(refs))
	}
	tt := s.Totals
	if tt.NaiveCompressedBytes != ind.naive || tt.UniqueCompressedBytes != ind.unique || tt.UniqueLayers != ind.uniqueN {
		t.Errorf("%s totals: naive %d unique %d unique layers %d; skopeo: %d %d %d", s.Label,
			tt.NaiveCompressedBytes, tt.UniqueCompressedBytes, tt.UniqueLayers, ind.naive, ind.unique, ind.uniqueN)
	}
	if ind.unique >= ind.naive && len(refs) > 1 {
		t.Errorf("%s: fixture has no shared layers (unique %d, naive %d)", s.Label, ind.unique, ind.naive)
	}
	for _, rt := range s.Repos {
		if rt.Measured > 0 && rt.UniqueCompressedBytes != ind.repoUnique[rt.Repo] {
			t.Errorf("%s repo %s: unique %d, skopeo %d", s.Label, rt.Repo, rt.UniqueCompressedBytes, ind.repoUnique[rt.Repo])
		}
	}
}
