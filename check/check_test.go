package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// testDataset writes three SWE-bench Verified records to a JSONL file: two
// built for both platforms and django__django-10097, which is in upstream's
// USE_X86 (no arm64 image).
func testDataset(t *testing.T) (path string, ids []string) {
	t.Helper()
	return testDatasetOf(t, "astropy__astropy-12907", "django__django-10097", "sympy__sympy-20590")
}

// testDatasetOf writes the SWE-bench Verified records of ids to a JSONL
// file (in the reference's order).
func testDatasetOf(t *testing.T, ids ...string) (path string, _ []string) {
	t.Helper()
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
	px := regtest.StartProxy(t, reg.Host, nil)
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
		LedgerPath: ledger, Registry: registry.Options{Keychain: regtest.Anonymous()}})
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

	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Repo: px.Host + "/swebench", Platforms: platforms, Reader: &publication.Reader{Client: client, Jobs: 4}}
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
	reqs := px.Requests()
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
	// 8 references and the 5 index children (HEAD in the index repository).
	if manifestReqs != 13 {
		t.Errorf("%d manifest requests for 8 references and 5 index children: %v", manifestReqs, reqs)
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
	ro.RecordRoot = px.Host
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
	for k, c := range px.Requests() {
		if strings.Contains(k, "/manifests/") {
			n += c
		}
	}
	if n != 13 {
		t.Errorf("with record images: %d manifest requests, want 13 (the record names are the per-arch names)", n)
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
	wantName := strings.Replace(gone, reg.Host, px.Host, 1) + ":latest"
	if len(gaps) != 1 || gaps[0].Name != wantName || gaps[0].Problem != "missing" || rep.Err() == nil {
		t.Fatalf("want one gap %s:\n%s", wantName, out.String())
	}
	if !strings.HasPrefix(out.String(), "7/8 images present") || !strings.Contains(out.String(), wantName+"\tmissing") {
		t.Errorf("output:\n%s", out.String())
	}
	for k, n := range px.Requests() {
		if n > 1 && k != "GET /v2/" {
			t.Errorf("%s: %d requests", k, n)
		}
	}
	t.Logf("after deleting one manifest:\n%s", out.String())
}

// TestIndexProblems: an index lacking a platform, holding another digest,
// listing a platform the instance is not built for, or listing a child its
// repository does not have (or refuses) is a problem; with the platforms
// narrowed (--platform), the others' children are not judged.
func TestIndexProblems(t *testing.T) {
	a := "sha256:" + strings.Repeat("a", 64)
	b := "sha256:" + strings.Repeat("b", 64)
	c := "sha256:" + strings.Repeat("c", 64)
	// "os/arch=digest", "!" after the digest: not in the index repository,
	// "?": refused; "att:subject=digest": an attestation manifest.
	idx := func(children ...string) publication.Index {
		x := publication.Index{Found: publication.Found{Name: "r/sweb.eval.x:latest", Present: true}}
		for _, ch := range children {
			p, d, _ := strings.Cut(ch, "=")
			present, refused := !strings.HasSuffix(d, "!"), strings.HasSuffix(d, "?")
			h, err := v1.NewHash(strings.TrimRight(d, "!?"))
			if err != nil {
				t.Fatal(err)
			}
			child := publication.Child{Descriptor: v1.Descriptor{Digest: h}, Found: publication.Found{Present: present && !refused}}
			if refused {
				child.Problem = &publication.RefusedError{Host: "r", Status: 401}
			}
			if sub, ok := strings.CutPrefix(p, "att:"); ok {
				child.Attestation, child.Subject = true, sub
			} else if child.Platform, err = core.ParsePlatform(p); err != nil {
				t.Fatal(err)
			}
			x.Children = append(x.Children, child)
		}
		return x
	}
	both := []core.Platform{core.AMD64, core.ARM64}
	cases := []struct {
		name        string
		x           publication.Index
		want, built []core.Platform
		arch        []string
		problem     string
	}{
		{"complete", idx("linux/amd64="+a, "linux/arm64="+b), both, both, []string{a, b}, ""},
		{"lacks arm64", idx("linux/amd64=" + a), both, both, []string{a, b}, "index lacks linux/arm64"},
		{"other digest", idx("linux/amd64="+b, "linux/arm64="+b), both, both, []string{a, b}, "index's linux/amd64 child is " + b + ", the per-arch name is at " + a},
		{"per-arch missing: not compared", idx("linux/amd64="+a, "linux/arm64="+b), both, both, []string{a, ""}, ""},
		{"x86-only with arm64", idx("linux/amd64="+a, "linux/arm64="+b), both[:1], both[:1], []string{a}, "index lists linux/arm64, which this instance is not built for"},
		{"arm64 child gone from the index repository", idx("linux/amd64="+a, "linux/arm64="+b+"!"), both, both, []string{a, b},
			"index's linux/arm64 child " + b + " is not in r/sweb.eval.x (a pull of it from the index fails)"},
		{"child refused", idx("linux/amd64="+a+"?", "linux/arm64="+b), both, both, []string{a, b}, "index's linux/amd64 child " + a + ": login refused by r"},
		{"attestation gone", idx("linux/amd64="+a, "att:"+a+"="+c+"!"), both[:1], both[:1], []string{a},
			"index's attestation manifest " + c + " (of " + a + ") is not in r/sweb.eval.x"},
		{"--platform linux/amd64: arm64 child not judged", idx("linux/amd64="+a, "linux/arm64="+b+"!"), both[:1], both, []string{a}, ""},
		{"--platform linux/amd64: amd64 child judged", idx("linux/amd64="+a+"!", "linux/arm64="+b), both[:1], both, []string{a}, "index's linux/amd64 child " + a + " is not in"},
	}
	for _, c := range cases {
		var r Report
		if got := r.indexProblem(c.x, c.want, c.built, c.arch); !strings.HasPrefix(got, c.problem) || (c.problem == "" && got != "") {
			t.Errorf("%s: %q, want %q", c.name, got, c.problem)
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

// TestCheckLoginRefused: a registry that refuses the login (htpasswd
// auth) makes every reference a gap named as a login problem with the host,
// not "missing": with no credential, and with a wrong one (its source
// named); the check still reports instead of stopping, and its error says
// the login was refused.
func TestCheckLoginRefused(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{User: "u", Password: "p"})
	insts := []core.Instance{{InstanceID: "a__b-1"}, {InstanceID: "c__d-2"}}
	both := func(*core.Instance) []core.Platform { return core.AllPlatforms() }
	wrong, err := registry.NewCredentials(registry.CredentialOptions{Text: reg.Host + "=u:wrong", TextSource: "$TEST_AUTH"})
	if err != nil {
		t.Fatal(err)
	}
	none, err := registry.NewCredentials(registry.CredentialOptions{TextSource: "$TEST_AUTH"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		kc         authn.Keychain
		credential string
	}{
		{"no credential", none, "no credential found for " + reg.Host + " (looked in $TEST_AUTH)"},
		{"wrong password", wrong, "credential for " + reg.Host + " from $TEST_AUTH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := registry.New(registry.Options{Keychain: c.kc})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), insts, Options{Repo: reg.Host + "/x", Platforms: both, Reader: publication.New(client)})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.Print(&out)
			gaps := rep.Gaps()
			if len(gaps) != 6 || rep.Err() == nil {
				t.Fatalf("want 6 gaps:\n%s", out.String())
			}
			want := "login refused by " + reg.Host + " (" + c.credential + ")"
			for _, g := range gaps {
				if g.Problem != want {
					t.Errorf("%s: %q, want %q", g.Name, g.Problem, want)
				}
			}
			if !strings.Contains(rep.Err().Error(), "login refused by "+reg.Host) {
				t.Errorf("error %q does not name the refused login", rep.Err())
			}
			t.Logf("%v\n%s", rep.Err(), out.String())
		})
	}
}

// publishRandom publishes one random image per instance and platform
// (platforms decides) with swebuild's publish to repo and returns the
// per-arch digests by "id platform".
func publishRandom(t *testing.T, ctx context.Context, repo string, insts []core.Instance, platforms func(*core.Instance) []core.Platform) map[string]string {
	t.Helper()
	recs, built := buildRecords(t, insts, platforms)
	sum, err := publish.Run(ctx, recs, publish.RunOptions{Options: publish.Options{Repo: repo, Jobs: 2, Version: "test"},
		LedgerPath: filepath.Join(t.TempDir(), "ledger.jsonl"), Registry: registry.Options{Keychain: regtest.Anonymous()}})
	if err != nil || sum.Err() != nil {
		t.Fatalf("publish: %v %v", err, sum.Err())
	}
	return built
}

// TestCheckDeletedIndexChild: with the arm64 child of an index deleted from
// the index repository (what GHCR's untagged-manifest cleanup does: the
// per-arch name still has it), a pull of linux/arm64 through the index
// fails (go-containerregistry's remote, as crane pulls), and check names
// that child and fails; the other instances stay whole.
func TestCheckDeletedIndexChild(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	insts := []core.Instance{{InstanceID: "a__b-1"}, {InstanceID: "c__d-2"}}
	both := func(*core.Instance) []core.Platform { return core.AllPlatforms() }
	repo := reg.Host + "/del"
	built := publishRandom(t, ctx, repo, insts, both)
	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Repo: repo, Platforms: both, Reader: publication.New(client)}
	rep, err := Run(ctx, insts, o)
	if err != nil || rep.Err() != nil {
		t.Fatalf("before the deletion: %v %v", err, rep.Err())
	}

	indexRepo := manifests.Namer{Repo: repo}.IndexRepo("a__b-1")
	child, err := name.NewDigest(indexRepo+"@"+built["a__b-1 linux/arm64"], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(child, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	idx, err := name.ParseReference(indexRepo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	arm := v1.Platform{OS: "linux", Architecture: "arm64"}
	if img, err := remote.Image(idx, remote.WithContext(ctx), remote.WithPlatform(arm)); err == nil {
		if _, err := img.Manifest(); err == nil {
			t.Fatal("a pull of linux/arm64 through the index still works: the child was not deleted")
		}
	}
	if _, err := remote.Image(idx, remote.WithContext(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatalf("a pull of linux/amd64 through the index fails too: %v", err)
	}

	rep, err = Run(ctx, insts, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	gaps := rep.Gaps()
	want := "index's linux/arm64 child " + built["a__b-1 linux/arm64"] + " is not in " + indexRepo
	if len(gaps) != 1 || gaps[0].Kind != KindIndex || !strings.HasPrefix(gaps[0].Problem, want) || rep.Err() == nil {
		t.Fatalf("want one gap, the index naming %q:\n%s", want, out.String())
	}
	if !strings.HasPrefix(out.String(), "5/6 images present") {
		t.Errorf("output:\n%s", out.String())
	}
	t.Logf("after deleting the child:\n%s", out.String())
}

// TestCheckPlatformAmd64Only: a publication of linux/amd64 images only
// (its indexes list amd64 alone) checked with --platform linux/amd64 is
// N/N; checked for every platform plan decides, the arm64 names and the
// indexes' arm64 children are the gaps.
func TestCheckPlatformAmd64Only(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	insts := []core.Instance{{InstanceID: "a__b-1"}, {InstanceID: "c__d-2"}, {InstanceID: "e__f-3"}}
	amd64 := func(*core.Instance) []core.Platform { return []core.Platform{core.AMD64} }
	both := func(*core.Instance) []core.Platform { return core.AllPlatforms() }
	repo := reg.Host + "/amd"
	publishRandom(t, ctx, repo, insts, amd64)
	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Repo: repo, Platforms: both, Only: []core.Platform{core.AMD64}, Reader: publication.New(client)}
	rep, err := Run(ctx, insts, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if ok, total := rep.Counts(); ok != 6 || total != 6 || rep.Err() != nil {
		t.Fatalf("--platform linux/amd64: want 6/6:\n%s", out.String())
	}
	if !strings.HasPrefix(out.String(), "6/6 images present (3 instances, linux/amd64)") {
		t.Errorf("output:\n%s", out.String())
	}
	o.Only = nil
	rep, err = Run(ctx, insts, o)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rep.Print(&out)
	if ok, total := rep.Counts(); ok != 3 || total != 9 {
		t.Fatalf("every platform: want 3/9:\n%s", out.String())
	}
	for _, g := range rep.Gaps() {
		if g.Kind == KindArch && (g.Platform != core.ARM64 || g.Problem != "missing") || g.Kind == KindIndex && g.Problem != "index lacks linux/arm64" {
			t.Errorf("gap %s: %s", g.Name, g.Problem)
		}
	}
}
