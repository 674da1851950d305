package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// newTestReader is a publication reader with no credentials.
func newTestReader(t *testing.T) *publication.Reader {
	t.Helper()
	c, err := registry.New(registry.Options{MaxRPS: -1, Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	return publication.New(c)
}

// published is an image pushed to the test registry with its environment
// document attached, as a build with --push attaches it.
type published struct {
	repo   name.Repository
	desc   v1.Descriptor
	ref    string // REPO@sha256:...
	digest string
}

// pushWithDoc pushes a random image to repo (tagged tag when not empty)
// and attaches doc (its Subject set to the image's digest), unless doc is
// nil.
func pushWithDoc(t *testing.T, r *publication.Reader, repo string, tag string, doc *sbom.Document) published {
	t.Helper()
	ctx := context.Background()
	rp, err := name.NewRepository(repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	d := regtest.PushRandomImage(t, rp, 128, 1)
	if tag != "" {
		got, err := remote.Get(rp.Digest(d.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Tag(rp.Tag(tag), got); err != nil {
			t.Fatal(err)
		}
	}
	if doc != nil {
		doc.Subject = d.Digest.String()
		raw, err := doc.CycloneDX()
		if err != nil {
			t.Fatal(err)
		}
		a, err := attest.NewArtifact(d, sbom.MediaType, sbom.MediaType, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		refs := &attest.Referrers{Client: r.Client, Settle: time.Millisecond}
		if err := refs.Attach(ctx, rp, a); err != nil {
			t.Fatal(err)
		}
	}
	return published{repo: rp, desc: d, ref: rp.Digest(d.Digest.String()).String(), digest: d.Digest.String()}
}

// envDoc is the environment document of an env image of the fixture's
// calc project on p: the fixture's real pip freeze plus extra lines.
func envDoc(t *testing.T, repo string, p core.Platform, extra ...string) *sbom.Document {
	t.Helper()
	return &sbom.Document{Kind: "env", Image: "sweb.env.fixture", Platform: p, Repo: repo, Version: "1.0", Packages: fixtureFreeze(t, extra...)}
}

func instanceDoc(t *testing.T, id string, p core.Platform, extra ...string) *sbom.Document {
	t.Helper()
	return &sbom.Document{Kind: "instance", Image: "sweb.eval." + p.Arch() + "." + id, Platform: p, Repo: "fixture/calc", Version: "1.0",
		InstanceIDs: []string{id}, Packages: fixtureFreeze(t, extra...)}
}

// fixtureFreeze is `pip freeze --all` of the fixture's Python image (a
// real capture, sbom/testdata) with extra lines.
func fixtureFreeze(t *testing.T, extra ...string) []sbom.Package {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "sbom", "testdata", "fixture-py-pip-freeze.txt"))
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, []byte(strings.Join(extra, "\n")+"\n")...)
	ps, err := sbom.Parse(sbom.FormatPipFreeze, raw)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func writeRecords(t *testing.T, recs ...core.Image) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "metadata.jsonl")
	if err := core.WriteFile(p, recs); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDriftRecordsFiles compares two nights given as build metadata
// files: calc's env and its instance image moved from fixdep 1.0 to 1.1
// (one change, two images), the env's document saved for a frozen
// rebuild (--save).
func TestDriftRecordsFiles(t *testing.T) {
	reg := regtest.InProcess(t)
	r := newTestReader(t)
	envRepo := reg.Host + "/nightly/sweb.env.fixture.x86_64.abc"
	instRepo := reg.Host + "/nightly/sweb.eval.x86_64.fixture_1776_calc-1"
	night := func(version string) string {
		env := pushWithDoc(t, r, envRepo, "", envDoc(t, "fixture/calc", core.AMD64, "fixdep=="+version))
		inst := pushWithDoc(t, r, instRepo, "", instanceDoc(t, "fixture__calc-1", core.AMD64, "fixdep=="+version))
		return writeRecords(t,
			core.Image{Kind: core.KindEnv, Key: "sweb.env.fixture.x86_64.abc:latest", Platform: core.AMD64, Ref: env.ref, Digest: digest.Digest(env.digest), Status: core.StatusBuilt},
			core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Key: "sweb.eval.x86_64.fixture__calc-1:latest", Platform: core.AMD64, Ref: inst.ref, Digest: digest.Digest(inst.digest), Status: core.StatusBuilt, SpecKey: "sha256:" + strings.Repeat("5", 64)})
	}
	a, b := night("1.0"), night("1.1")
	save := filepath.Join(t.TempDir(), "frozen")
	rep, err := Drift(context.Background(), DriftOptions{Images: a, Against: b, Reader: r, Save: save})
	if err != nil {
		t.Fatal(err)
	}
	if rep.A != a || rep.B != b || rep.Summary.Images != 2 || rep.Summary.Drifted != 2 || rep.Summary.Changes != 1 {
		t.Fatalf("report %+v", rep.Summary)
	}
	g := rep.Groups[0]
	if g.String() != "pypi/fixdep 1.0 -> 1.1" || !slices.Equal(g.Images, []string{"env sweb.env.fixture.x86_64.abc linux/amd64", "instance fixture__calc-1 linux/amd64"}) {
		t.Errorf("group %s on %v", g.String(), g.Images)
	}
	files, _ := filepath.Glob(filepath.Join(save, "*.cdx.json"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	slices.Sort(names)
	if want := []string{"env.sweb.env.fixture.x86_64.abc.linux-amd64.cdx.json", "instance.fixture__calc-1.linux-amd64.cdx.json"}; !slices.Equal(names, want) {
		t.Errorf("saved %v, want A's documents %v", names, want)
	}
}

// TestDriftPrefix compares a records file against a publication named by
// its prefix: the dataset enumerates the images (calc-1 on both platforms;
// arm64 not published: logged, not compared), the ledger gives them
// their inputs.
func TestDriftPrefix(t *testing.T) {
	reg := regtest.InProcess(t)
	r := newTestReader(t)
	prefix := reg.Host + "/pub"
	last := pushWithDoc(t, r, reg.Host+"/nightly/sweb.eval.x86_64.fixture_1776_calc-1", "", instanceDoc(t, "fixture__calc-1", core.AMD64, "fixdep==1.0"))
	a := writeRecords(t, core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Ref: last.ref, Digest: digest.Digest(last.digest), Status: core.StatusBuilt, SpecKey: "k1"})
	now := pushWithDoc(t, r, prefix+"/sweb.eval.x86_64.fixture_1776_calc-1", "latest", instanceDoc(t, "fixture__calc-1", core.AMD64, "fixdep==1.1"))
	var log bytes.Buffer
	o := DriftOptions{Inputs: fixtureInputs(t, "fixture__calc-1"), Images: a, Against: prefix, Reader: r,
		Records: []core.Image{{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Digest: digest.Digest(now.digest), Status: core.StatusPublished, SpecKey: "k2"}}}
	o.Log = &log
	rep, err := Drift(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if want := "drift: " + prefix + ": 1 per-arch images missing (not compared)\n"; !strings.Contains(log.String(), want) {
		t.Errorf("log %q, want %q", log.String(), want)
	}
	if len(rep.Images) != 1 {
		t.Fatalf("images %+v", rep.Images)
	}
	im := rep.Images[0]
	if im.Status != drift.StatusDrift || im.RefB != prefix+"/sweb.eval.x86_64.fixture_1776_calc-1@"+now.digest || len(im.Changes) != 1 ||
		im.Changes[0].String() != "pypi/fixdep 1.0 -> 1.1" || im.Cause != drift.CauseSpec {
		t.Errorf("image %+v, want calc-1 drifted by fixdep, caused by its spec key", im)
	}
}

// TestDriftRefused: each side's failure names the side and what it named
// (an image the registry no longer has is no failure: it has no document).
func TestDriftRefused(t *testing.T) {
	reg := regtest.InProcess(t)
	r := newTestReader(t)
	ctx := context.Background()
	file := writeRecords(t)
	if _, err := Drift(ctx, DriftOptions{Images: file, Against: file}); err == nil || !strings.Contains(err.Error(), "no publication reader") {
		t.Errorf("no reader: %v", err)
	}
	if _, err := Drift(ctx, DriftOptions{Images: file, Against: file, Reader: r, Save: filepath.Join(file, "frozen")}); err == nil || !strings.Contains(err.Error(), "the directory to save documents in") {
		t.Errorf("an unwritable --save: %v", err)
	}
	// B is a prefix with nothing to enumerate it.
	_, err := Drift(ctx, DriftOptions{Images: file, Against: reg.Host + "/pub", Reader: r})
	var se *DriftSideError
	if !errors.As(err, &se) || se.Side != "B" || se.Set != reg.Host+"/pub" || !errors.Is(err, ErrNoInstances) ||
		!strings.HasPrefix(err.Error(), "publication B "+reg.Host+"/pub: not a file, so a repository prefix") {
		t.Errorf("a prefix without a dataset: %v", err)
	}
	// A's records name an image the registry no longer has: no
	// document, not an error; it is only in A.
	zero := "sha256:" + strings.Repeat("0", 64)
	missing := writeRecords(t, core.Image{Kind: core.KindEnv, Key: "sweb.env.fixture.x86_64.abc:latest", Platform: core.AMD64, Status: core.StatusBuilt,
		Ref: reg.Host + "/nightly/sweb.env.fixture.x86_64.abc@" + zero, Digest: digest.Digest(zero)})
	rep, err := Drift(ctx, DriftOptions{Images: missing, Against: file, Reader: r})
	if err != nil || len(rep.Images) != 1 || rep.Images[0].Status != drift.StatusOnlyA || rep.Summary.OnlyA != 1 {
		t.Errorf("an image the registry lacks: %+v, %v", rep, err)
	}
	// A's records file is not records.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"kind\":\"env\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Drift(ctx, DriftOptions{Images: bad, Against: file, Reader: r}); !errors.As(err, &se) || se.Side != "A" || !strings.Contains(err.Error(), "bad.jsonl") {
		t.Errorf("a bad records file: %v", err)
	}
}

// TestWants: the loaded instances as a publication holds them, each with
// the platforms the plan decides: the fixture's x86-only textutil-2 has
// no arm64 image; narrowed to arm64 it has none.
func TestWants(t *testing.T) {
	l, err := Load(context.Background(), fixtureInputs(t, "fixture__calc-1", "fixture__textutil-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		only []core.Platform
		want map[string][]core.Platform
	}{
		{nil, map[string][]core.Platform{"fixture__calc-1": core.AllPlatforms(), "fixture__textutil-2": {core.AMD64}}},
		{[]core.Platform{core.ARM64}, map[string][]core.Platform{"fixture__calc-1": {core.ARM64}, "fixture__textutil-2": nil}},
	} {
		got := l.Wants(tc.only)
		if len(got) != 2 {
			t.Fatalf("wants %+v", got)
		}
		for _, w := range got {
			if !slices.Equal(w.Platforms, tc.want[w.ID]) {
				t.Errorf("only %v: %s on %v, want %v", tc.only, w.ID, w.Platforms, tc.want[w.ID])
			}
		}
	}
}
