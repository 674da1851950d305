package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// writeWheel writes a pure-Python wheel of package name at version into
// dir (a zip with the module, METADATA, WHEEL and RECORD, as pip reads it).
func writeWheel(t *testing.T, dir, name, version string) {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	files := [][2]string{
		{name + "/__init__.py", fmt.Sprintf("__version__ = %q\n", version)},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: swebuild-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "RECORD,,\n")
	files = append(files, [2]string{info + "RECORD", record.String()})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// driftSpecs writes the fixture's specs file with calc's spec installing
// the unpinned local wheel fixdep: the fixture profile's env image gets
// the wheels directory of its build context and pip reads only it
// (PIP_NO_INDEX, PIP_FIND_LINKS).
func driftSpecs(t *testing.T, fixtureSpecs, out string) {
	t.Helper()
	raw, err := os.ReadFile(fixtureSpecs)
	if err != nil {
		t.Fatal(err)
	}
	var specs map[string]any
	if err := json.Unmarshal(raw, &specs); err != nil {
		t.Fatal(err)
	}
	prof := specs["profile"].(map[string]any)
	env := prof["env_dockerfile"].(string)
	from, rest, ok := strings.Cut(env, "\n")
	if !ok || !strings.HasPrefix(from, "FROM ") {
		t.Fatalf("fixture env_dockerfile starts %q", from)
	}
	prof["env_dockerfile"] = from + "\nCOPY wheels /wheels\nENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels\n" + rest
	prof["context"].(map[string]any)["env"] = []string{"wheels"}
	calc := specs["specs"].(map[string]any)["fixture/calc"].(map[string]any)["1.0"].(map[string]any)
	calc["pip_packages"] = []string{"fixdep"}
	b, err := json.MarshalIndent(specs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDriftFixture is issue 22's drift test on the stack: the fixture built
// twice, A with only fixdep 1.0 in calc's wheels directory and B with 1.0
// and 1.1. swebuild drift names exactly pypi/fixdep 1.0 -> 1.1 on exactly
// the calc env and calc instance images, every other image shows no drift
// (and has a document), and --max-drift 0 exits non-zero. Then a frozen
// rebuild from A's documents (--freeze, both wheels present) gives an
// empty drift against A.
func TestDriftFixture(t *testing.T) {
	stacktest.Thorough(t)
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	specs := filepath.Join(tmp, "specs.json")
	driftSpecs(t, f.specs, specs)
	ctxA, ctxB := filepath.Join(tmp, "ctx-a"), filepath.Join(tmp, "ctx-b")
	writeWheel(t, filepath.Join(ctxA, "wheels"), "fixdep", "1.0")
	writeWheel(t, filepath.Join(ctxB, "wheels"), "fixdep", "1.0")
	writeWheel(t, filepath.Join(ctxB, "wheels"), "fixdep", "1.1")
	f.specs = specs
	salt := fmt.Sprintf("%d", time.Now().UnixNano())
	build := func(name, ctxDir string, extra ...string) string {
		t.Helper()
		md := filepath.Join(tmp, name+".jsonl")
		begin := time.Now()
		args := append([]string{"--context-dir", ctxDir}, extra...)
		if _, err := f.build(t, ctx, f.dataset, f.reg+"/swebuild-test/drift-"+salt+"-"+name, md, args...); err != nil {
			t.Fatalf("build %s: %v", name, err)
		}
		t.Logf("build %s: %v", name, time.Since(begin).Round(time.Second))
		return md
	}
	mdA := build("a", ctxA)
	mdB := build("b", ctxB)

	save := filepath.Join(tmp, "frozen")
	rep, err := runDriftJSON(t, ctx, mdA, mdB, "--save", save)
	if err != nil {
		t.Fatalf("drift A B: %v", err)
	}
	recs, err := core.ReadFile(mdA)
	if err != nil {
		t.Fatal(err)
	}
	calc := calcEnvs(t, ctx, f)
	var wantImages []string
	images, insts := 0, 0
	for _, r := range recs {
		switch r.Kind {
		case core.KindEnv:
			images++
			if l := "env " + strings.TrimSuffix(r.Key, ":latest") + " " + r.Platform.String(); calc[l] {
				wantImages = append(wantImages, l)
			}
		case core.KindInstance:
			images++
			insts++
			if strings.HasPrefix(r.InstanceID, "fixture__calc-") {
				wantImages = append(wantImages, "instance "+r.InstanceID+" "+r.Platform.String())
			}
		}
	}
	slices.Sort(wantImages)
	if len(wantImages) != 6 {
		t.Fatalf("calc images in A's records: %q, want its env and two instances on two platforms", wantImages)
	}
	if len(rep.Groups) != 1 || rep.Groups[0].String() != "pypi/fixdep 1.0 -> 1.1" || !slices.Equal(rep.Groups[0].Images, wantImages) {
		t.Errorf("drift A B: groups %+v\nwant exactly pypi/fixdep 1.0 -> 1.1 on %q", rep.Groups, wantImages)
	}
	if s := rep.Summary; s.Images != images || s.Drifted != len(wantImages) || s.Unchanged != images-len(wantImages) || s.NoDocument != 0 {
		t.Errorf("drift A B: summary %+v; want %d images, %d drifted, the rest unchanged, every one with a document", s, images, len(wantImages))
	}
	t.Logf("drift A B: %d images, %d with drift (%q), %d unchanged", rep.Summary.Images, rep.Summary.Drifted, wantImages, rep.Summary.Unchanged)
	var so, se bytes.Buffer
	err = runDrift(ctx, []string{"--images", mdA, "--against", mdB, "--max-drift", "0"}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "1 distinct package changes") {
		t.Errorf("drift --max-drift 0: err = %v, want the limit exceeded", err)
	}
	if !strings.Contains(so.String(), "| `pypi/fixdep` | 1.0 | 1.1 | 6: ") {
		t.Errorf("drift Markdown lacks the fixdep row:\n%s", so.String())
	}

	// A published: the documents travel with the per-arch images, and
	// drift reads them through the published names (the repository prefix
	// enumerated from the dataset, as check does) and through the ledger.
	repoA := f.reg + "/swebuild-test/drift-" + salt + "-pub-a"
	ledgerA := filepath.Join(tmp, "ledger-a.jsonl")
	so.Reset()
	se.Reset()
	if err := runPublish(ctx, []string{"--unsigned", "--metadata-file", mdA, "--repo", repoA, "--ledger", ledgerA}, &so, &se); err != nil {
		t.Fatalf("publish A: %v\n%s", err, tail(se.String(), 3000))
	}
	var calcInstances []string
	for _, l := range wantImages {
		if strings.HasPrefix(l, "instance ") {
			calcInstances = append(calcInstances, l)
		}
	}
	for _, pubA := range []struct {
		name string
		args []string
	}{
		{"repository prefix", []string{repoA, mdB, "--dataset", f.dataset, "--specs", f.specs}},
		{"publish ledger", []string{ledgerA, mdB}},
	} {
		prep, err := runDriftJSON(t, ctx, pubA.args[0], pubA.args[1], pubA.args[2:]...)
		if err != nil {
			t.Fatalf("drift published A (%s) against B: %v", pubA.name, err)
		}
		if len(prep.Groups) != 1 || prep.Groups[0].String() != "pypi/fixdep 1.0 -> 1.1" || !slices.Equal(prep.Groups[0].Images, calcInstances) {
			t.Errorf("drift published A (%s) against B: groups %+v\nwant exactly pypi/fixdep 1.0 -> 1.1 on %q", pubA.name, prep.Groups, calcInstances)
		}
		envs := images - insts
		if s := prep.Summary; s.Images != images || s.OnlyB != envs || s.NoDocument != 0 || s.Drifted != 4 || s.Unchanged != insts-4 {
			t.Errorf("drift published A (%s) against B: summary %+v; want %d instance images (4 drifted, every one with a document) and B's %d env images only in B", pubA.name, s, insts, envs)
		}
		t.Logf("drift published A (%s) against B: %+v", pubA.name, prep.Summary)
	}

	// The frozen rebuild: A's documents, both wheels in the directory.
	mdF := build("frozen", ctxB, "--freeze", save)
	frep, err := runDriftJSON(t, ctx, mdA, mdF, "--max-drift", "0")
	if err != nil {
		t.Fatalf("drift A frozen: %v", err)
	}
	if s := frep.Summary; s.Images != images || s.Unchanged != images || s.Changes != 0 {
		t.Errorf("drift A frozen: summary %+v, want %d images all unchanged", s, images)
	}
	paired := 0
	for _, im := range frep.Images {
		if im.NameB != "" {
			paired++
		}
	}
	if paired != 2 {
		t.Errorf("drift A frozen: %d env images paired by repo and version, want calc's 2 (the frozen rule changes their env script)", paired)
	}
	t.Logf("drift A frozen: %d images unchanged, %d env images paired by repo/version (the frozen env keys differ)", frep.Summary.Unchanged, paired)
}

// calcEnvs returns the env image keys (tag dropped) per platform that the
// plan gives the calc instances, from `swebuild plan --format json`.
func calcEnvs(t *testing.T, ctx context.Context, f fixtureStack) map[string]bool {
	t.Helper()
	var so, se bytes.Buffer
	if err := runPlan(ctx, []string{"--dataset", f.dataset, "--specs", f.specs, "--format", "json"}, &so, &se); err != nil {
		t.Fatalf("plan: %v\n%s", err, se.String())
	}
	var p struct {
		Platforms []struct {
			Nodes []struct {
				Kind, Key, Platform string
				Instances           []string
			}
		}
	}
	if err := json.Unmarshal(so.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, pp := range p.Platforms {
		for _, n := range pp.Nodes {
			if n.Kind == "env" && slices.ContainsFunc(n.Instances, func(id string) bool { return strings.HasPrefix(id, "fixture__calc-") }) {
				if slices.ContainsFunc(n.Instances, func(id string) bool { return !strings.HasPrefix(id, "fixture__calc-") }) {
					t.Fatalf("env %s serves calc and others: %v", n.Key, n.Instances)
				}
				out["env "+strings.TrimSuffix(n.Key, ":latest")+" "+n.Platform] = true
			}
		}
	}
	if len(out) != 2 {
		t.Fatalf("calc envs = %v, want one per platform", out)
	}
	return out
}

func runDriftJSON(t *testing.T, ctx context.Context, a, b string, extra ...string) (*drift.Report, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "drift.json")
	var so, se bytes.Buffer
	err := runDrift(ctx, append([]string{"--images", a, "--against", b, "--format", "json", "-o", out}, extra...), &so, &se)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, se.String())
	}
	raw, rerr := os.ReadFile(out)
	if rerr != nil {
		return nil, rerr
	}
	var rep drift.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// TestRenderFreeze: --freeze DIR renders calc's env (the one with a pip
// line and a document) to install the captured fixdep exactly; every other
// file of calc and textutil is the same as without --freeze, apart from
// what names the new env key and the recipe's pins.
func TestRenderFreeze(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "..", "..", "testdata", "fixture")
	tmp := t.TempDir()
	specs := filepath.Join(tmp, "specs.json")
	driftSpecs(t, filepath.Join(fixture, "specs.json"), specs)
	frozen := filepath.Join(tmp, "frozen")
	if err := os.MkdirAll(frozen, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []core.Platform{core.AMD64, core.ARM64} {
		d := &sbom.Document{Kind: "env", Image: "sweb.env.fixture." + p.Arch() + ".x", Platform: p, Repo: "fixture/calc", Version: "1.0",
			InstanceIDs: []string{"fixture__calc-1", "fixture__calc-2"},
			Packages: []sbom.Package{{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0"}, {Ecosystem: sbom.PyPI, Name: "pip", Version: "23.0.1"},
				{Ecosystem: sbom.PyPI, Name: "calc", Version: "1.0.0", URL: "-e /testbed"}}}
		raw, err := d.CycloneDX()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(frozen, "env."+p.Slug()+".cdx.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stderr string
	render := func(extra ...string) string {
		out := filepath.Join(t.TempDir(), "out")
		var so, se bytes.Buffer
		defer func() { stderr = se.String() }()
		args := append([]string{"--dataset", filepath.Join(fixture, "dataset.jsonl"), "--specs", specs, "--instance", "fixture__calc-1",
			"--instance", "fixture__textutil-1", "--arch", "all", "--out", out, "--cache-dir", t.TempDir()}, extra...)
		if err := runRender(context.Background(), args, &so, &se); err != nil {
			t.Fatalf("render %v: %v\n%s", extra, err, se.String())
		}
		return out
	}
	plain, froze := render(), render("--freeze", frozen)
	// the editable calc cannot be frozen: said once per document
	if w := "pip package calc is installed from -e /testbed: not on an index, not constrained"; strings.Count(stderr, w) != 2 {
		t.Errorf("render --freeze stderr: want %q for both platforms' documents:\n%s", w, stderr)
	}
	var changed []string
	err = filepath.Walk(plain, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(plain, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(froze, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			changed = append(changed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(changed)
	var want []string
	for _, arch := range []string{"arm64", "x86_64"} {
		for _, f := range []string{"Dockerfile.instance", "meta.json", "setup_env.sh"} {
			want = append(want, filepath.Join("fixture__calc-1", arch, f))
		}
	}
	if !slices.Equal(changed, want) {
		t.Errorf("files changed by --freeze: %q\nwant %q", changed, want)
	}
	env, err := os.ReadFile(filepath.Join(froze, "fixture__calc-1", "x86_64", "setup_env.sh"))
	if err != nil {
		t.Fatal(err)
	}
	line := "python -m pip install fixdep==1.0 -c /dev/stdin <<'SWEBUILD_FROZEN'\nfixdep==1.0\npip==23.0.1\nSWEBUILD_FROZEN\n"
	if !strings.Contains(string(env), line) {
		t.Errorf("frozen setup_env.sh lacks %q:\n%s", line, env)
	}
}

// TestDriftCLIDocuments runs swebuild drift over two records files on a
// distribution 2.8 registry of its own (documents attached through the
// referrers tag schema): an image without a document is reported as such,
// not as no drift; a document that cannot be read exits non-zero naming
// the image.
func TestDriftCLIDocuments(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client, Settle: 10 * time.Millisecond}
	repo, err := name.NewRepository(reg.Host+"/drift/sweb.eval.x86_64.fixture_1776_calc-1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	push := func(payload []byte) core.Image {
		t.Helper()
		subject := regtest.PushRandomImage(t, repo, 128, 1)
		dg := subject.Digest
		if payload != nil {
			a, err := attest.NewArtifact(subject, sbom.MediaType, sbom.MediaType, payload, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := refs.Attach(ctx, repo, a); err != nil {
				t.Fatal(err)
			}
		}
		return core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Key: "sweb.eval.x86_64.fixture__calc-1:latest",
			Digest: digest.Digest(dg.String()), Ref: repo.Digest(dg.String()).String(), SpecKey: "k", Status: core.StatusBuilt}
	}
	good, err := (&sbom.Document{Kind: "instance", Platform: core.AMD64, Packages: []sbom.Package{{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0"}}}).CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	write := func(name string, recs ...core.Image) string {
		p := filepath.Join(tmp, name)
		if err := core.WriteFile(p, recs); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withDoc := write("a.jsonl", push(good))
	noDoc := write("b.jsonl", push(nil))
	broken := write("c.jsonl", push([]byte("{not json")))

	var so, se bytes.Buffer
	if err := runDrift(ctx, []string{"--images", withDoc, "--against", noDoc, "--max-drift", "0"}, &so, &se); err != nil {
		t.Fatalf("drift with a missing document: %v\n%s", err, se.String())
	}
	if !strings.Contains(so.String(), "1 images compared: 0 unchanged, 0 with drift, 1 without a document") ||
		!strings.Contains(so.String(), "- instance fixture__calc-1 linux/amd64: none in B\n") {
		t.Errorf("drift with a missing document:\n%s", so.String())
	}
	so.Reset()
	err = runDrift(ctx, []string{"--images", withDoc, "--against", broken}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "--against "+broken+": instance fixture__calc-1 linux/amd64") {
		t.Errorf("drift with an unreadable document: err = %v, want one naming the image", err)
	}
	if code := run([]string{"drift", "--images", withDoc, "--against", broken}, &so, &se); code == 0 {
		t.Error("swebuild drift with an unreadable document exits 0")
	}
}
