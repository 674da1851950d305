package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// counter is a reverse proxy in front of the test registry that counts
// requests per method and path.
type counter struct {
	mu   sync.Mutex
	reqs map[string]int
	host string
}

func startCounter(t *testing.T, upstream string) *counter {
	t.Helper()
	c := &counter{reqs: map[string]int{}}
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.reqs[r.Method+" "+r.URL.Path]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.host = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.reqs
	c.reqs = map[string]int{}
	return out
}

type anonKeychain struct{}

func (anonKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

// testDataset writes three SWE-bench Verified records to a JSONL file: two
// built for both platforms and django__django-10097, which is in upstream's
// USE_X86 (no arm64 image).
func testDataset(t *testing.T) (path string, ids []string) {
	t.Helper()
	ids = []string{"astropy__astropy-12907", "django__django-10097", "sympy__sympy-20590"}
	src := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		for _, id := range ids {
			if bytes.Contains(sc.Bytes(), []byte(`"instance_id":"`+id+`"`)) {
				out.Write(sc.Bytes())
				out.WriteByte('\n')
			}
		}
	}
	if bytes.Count(out.Bytes(), []byte("\n")) != len(ids) {
		t.Fatalf("found %d of %d records in %s", bytes.Count(out.Bytes(), []byte("\n")), len(ids), src)
	}
	path = filepath.Join(t.TempDir(), "dataset.jsonl")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, ids
}

// buildRecords makes one small random image per instance and platform in
// an OCI layout and returns the build records publish takes, and the
// per-arch digests by "id platform".
func buildRecords(t *testing.T, insts []core.Instance, platforms func(*core.Instance) []core.Platform) ([]core.Image, map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	var adds []mutate.IndexAddendum
	var recs []core.Image
	digests := map[string]string{}
	yes := true
	for i := range insts {
		inst := &insts[i]
		for _, p := range platforms(inst) {
			img, err := random.Image(512, 1)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture = p.OCI().OS, p.OCI().Architecture
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img})
			dg, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			digests[inst.InstanceID+" "+p.String()] = dg.String()
			recs = append(recs, core.Image{Kind: core.KindInstance, InstanceID: inst.InstanceID, Platform: p,
				Digest: digest.Digest(dg.String()), OCILayout: dir, SpecKey: "spec-" + inst.InstanceID + "-" + p.Arch(),
				BaseCommit: inst.BaseCommit, Verified: &yes, Status: core.StatusBuilt})
		}
	}
	if _, err := layout.Write(dir, mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	return recs, digests
}

// TestCheckRealRegistry publishes three instances with swebuild's own
// publish to a real registry (distribution 2.8, internal/regtest), then
// checks them through a counting proxy: all present, at most one request
// per reference, the digests file matches what was built and what publish
// recorded; then one per-arch manifest is deleted and check names exactly
// that gap.
func TestCheckRealRegistry(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	px := startCounter(t, reg.Host)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dsPath, ids := testDataset(t)
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{Dataset: dsPath, Pins: "default", CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	platforms := loaded.Renderer.Tables.Platforms
	if n := len(platforms(&loaded.Instances[1])); n != 1 || loaded.Instances[1].InstanceID != "django__django-10097" {
		t.Fatalf("django__django-10097 (USE_X86) has %d platforms", n)
	}
	recs, built := buildRecords(t, loaded.Instances, platforms)

	repo := reg.Host + "/swebench"
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	sum, err := publish.Run(ctx, recs, publish.RunOptions{Options: publish.Options{Repo: repo, Jobs: 2, Version: "test"},
		LedgerPath: ledger, Registry: registry.Options{Keychain: anonKeychain{}}})
	if err != nil || sum.Err() != nil {
		t.Fatalf("publish: %v %v", err, sum.Err())
	}
	published, err := core.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	indexDigest := map[string]string{}
	for _, r := range core.Latest(published) {
		if r.Kind == core.KindIndex {
			indexDigest[r.InstanceID] = r.Digest.String()
		}
	}

	client, err := registry.New(registry.Options{Keychain: anonKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Repo: px.host + "/swebench", Platforms: platforms, Client: client, Jobs: 4}
	rep, err := Run(ctx, loaded.Instances, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	// 2 + 1 + 2 per-arch names, 3 indexes.
	if ok, total := rep.Counts(); ok != 8 || total != 8 || rep.Err() != nil {
		t.Fatalf("want 8/8 present:\n%s", out.String())
	}
	if !strings.HasPrefix(out.String(), "8/8 images present") {
		t.Errorf("output %q", out.String())
	}
	reqs := px.take()
	manifestReqs := 0
	for k, n := range reqs {
		if strings.Contains(k, "/manifests/") {
			manifestReqs += n
			if n > 1 {
				t.Errorf("%s: %d requests for one reference", k, n)
			}
		} else if k != "GET /v2/" {
			t.Errorf("unexpected request %s (%d)", k, n)
		}
	}
	if manifestReqs != 8 {
		t.Errorf("%d manifest requests for 8 references: %v", manifestReqs, reqs)
	}
	t.Logf("requests: %v", reqs)

	var dl bytes.Buffer
	if err := rep.WriteDigests(&dl); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(dl.String()), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("digests file has %d lines:\n%s", len(lines), dl.String())
	}
	for i, l := range lines {
		var d DigestLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		if d.InstanceID != ids[i] || d.Index != indexDigest[ids[i]] || d.Index == "" {
			t.Errorf("line %d: %s index %s, publish recorded %s", i+1, d.InstanceID, d.Index, indexDigest[ids[i]])
		}
		want := 0
		for _, p := range core.AllPlatforms() {
			if b, ok := built[d.InstanceID+" "+p.String()]; ok {
				want++
				if d.Platforms[p.String()] != b {
					t.Errorf("%s %s: digest %s, built %s", d.InstanceID, p, d.Platforms[p.String()], b)
				}
			}
		}
		if len(d.Platforms) != want {
			t.Errorf("%s: platforms %v", d.InstanceID, d.Platforms)
		}
	}

	// The records' own image names (v5 datasets carry them), re-rooted at
	// the registry: they are the per-arch amd64 names here, so they are
	// listed but not asked again.
	withImages := append([]core.Instance(nil), loaded.Instances...)
	for i := range withImages {
		withImages[i].Image = "swebench/sweb.eval.x86_64." + manifests.Namer{}.NameID(withImages[i].InstanceID) + ":latest"
	}
	ro := opts
	ro.RecordRoot = px.host
	rep, err = Run(ctx, withImages, ro)
	if err != nil {
		t.Fatal(err)
	}
	if ok, total := rep.Counts(); ok != 11 || total != 11 {
		out.Reset()
		rep.Print(&out)
		t.Errorf("with record images: want 11/11:\n%s", out.String())
	}
	n := 0
	for k, c := range px.take() {
		if strings.Contains(k, "/manifests/") {
			n += c
		}
	}
	if n != 8 {
		t.Errorf("with record images: %d manifest requests, want 8 (the record names are the per-arch names)", n)
	}

	// Delete sympy's arm64 manifest (by digest, as a registry operator
	// would); check names that one gap and nothing else.
	gone := manifests.Namer{Repo: reg.Host + "/swebench"}.ArchRepo("arm64", "sympy__sympy-20590")
	ref, err := name.NewDigest(gone+"@"+built["sympy__sympy-20590 linux/arm64"], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(ctx, loaded.Instances, opts)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rep.Print(&out)
	gaps := rep.Gaps()
	wantName := strings.Replace(gone, reg.Host, px.host, 1) + ":latest"
	if len(gaps) != 1 || gaps[0].Name != wantName || gaps[0].Problem != "missing" || rep.Err() == nil {
		t.Fatalf("want one gap %s:\n%s", wantName, out.String())
	}
	if !strings.HasPrefix(out.String(), "7/8 images present") || !strings.Contains(out.String(), wantName+"\tmissing") {
		t.Errorf("output:\n%s", out.String())
	}
	for k, n := range px.take() {
		if n > 1 && k != "GET /v2/" {
			t.Errorf("%s: %d requests", k, n)
		}
	}
	t.Logf("after deleting one manifest:\n%s", out.String())
}

// TestIndexProblems: an index lacking a platform, holding another digest,
// or listing a platform the instance is not built for is a problem.
func TestIndexProblems(t *testing.T) {
	idx := func(children ...string) []byte { // "os/arch=digest"
		var ms []v1.Descriptor
		for _, c := range children {
			p, d, _ := strings.Cut(c, "=")
			os, arch, _ := strings.Cut(p, "/")
			h, err := v1.NewHash(d)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, v1.Descriptor{Digest: h, Platform: &v1.Platform{OS: os, Architecture: arch}})
		}
		b, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, Manifests: ms})
		return b
	}
	a := "sha256:" + strings.Repeat("a", 64)
	b := "sha256:" + strings.Repeat("b", 64)
	both := []core.Platform{core.AMD64, core.ARM64}
	cases := []struct {
		name  string
		body  []byte
		plats []core.Platform
		arch  []string
		want  string
	}{
		{"complete", idx("linux/amd64="+a, "linux/arm64="+b), both, []string{a, b}, ""},
		{"lacks arm64", idx("linux/amd64=" + a), both, []string{a, b}, "index lacks linux/arm64"},
		{"other digest", idx("linux/amd64="+b, "linux/arm64="+b), both, []string{a, b}, "index's linux/amd64 child is " + b + ", the per-arch name is at " + a},
		{"per-arch missing: not compared", idx("linux/amd64="+a, "linux/arm64="+b), both, []string{a, ""}, ""},
		{"x86-only with arm64", idx("linux/amd64="+a, "linux/arm64="+b), both[:1], []string{a}, "index lists linux/arm64, which this instance is not built for"},
		{"not json", []byte("{"), both, []string{a, b}, "index does not parse"},
	}
	for _, c := range cases {
		if got := indexProblem(c.body, c.plats, c.arch); !strings.HasPrefix(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReroot(t *testing.T) {
	cases := []struct{ image, root, want string }{
		{"swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", "127.0.0.1:5000", "127.0.0.1:5000/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"},
		{"docker.io/swebench/sweb.eval.x86_64.x:v1", "ghcr.io/org/", "ghcr.io/org/swebench/sweb.eval.x86_64.x:v1"},
		{"swebench/x@sha256:" + strings.Repeat("0", 64), "r:5000", "r:5000/swebench/x@sha256:" + strings.Repeat("0", 64)},
		{"ubuntu", "r:5000", "r:5000/library/ubuntu:latest"},
	}
	for _, c := range cases {
		got, err := Reroot(c.image, c.root)
		if err != nil || got != c.want {
			t.Errorf("Reroot(%q, %q) = %q, %v; want %q", c.image, c.root, got, err, c.want)
		}
	}
	if _, err := Reroot("Not A Name", "r"); err == nil {
		t.Error("bad name: no error")
	}
}

// TestCheckRefused: a registry that refuses (htpasswd auth, no
// credentials given) makes every reference a gap naming the status, and
// the check still reports instead of stopping.
func TestCheckRefused(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{User: "u", Password: "p"})
	client, err := registry.New(registry.Options{Keychain: anonKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	insts := []core.Instance{{InstanceID: "a__b-1"}, {InstanceID: "c__d-2"}}
	both := func(*core.Instance) []core.Platform { return core.AllPlatforms() }
	rep, err := Run(context.Background(), insts, Options{Repo: reg.Host + "/x", Platforms: both, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	gaps := rep.Gaps()
	if len(gaps) != 6 || rep.Err() == nil {
		t.Fatalf("want 6 gaps:\n%s", out.String())
	}
	for _, g := range gaps {
		if !strings.HasPrefix(g.Problem, "registry answered 401") {
			t.Errorf("%s: %q", g.Name, g.Problem)
		}
	}
}
