package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// TestSBOMFixture builds part of the fixture on the stack (BuildKit, the
// distribution 2.8 registry, which has no referrers API), both platforms,
// publishes it, and reads back what a consumer sees: for a published
// per-arch instance image (amd64 and arm64) and for a pushed env image,
// the SBOM artifact is found through the referrers fallback tag, by
// attest.Referrers.List and by skopeo inspect --raw of the sha256-<hex>
// tag and of the artifact manifest; the document names the image's digest;
// and its pypi and deb packages equal what pip freeze --all and dpkg-query
// print in that image in a separate BuildKit solve run through buildctl
// (not the capture code). It measures the capture time, the attach
// requests and bytes per image, the publish carry cost and the no-op
// re-run.
func TestSBOMFixture(t *testing.T) {
	stacktest.Thorough(t)
	f := newFixtureStack(t)
	stacktest.LookPath(t, "skopeo")
	buildctl := findBuildctl(t)
	host := os.Getenv("BUILDKIT_HOST")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	salt := time.Now().Format("150405")
	md := filepath.Join(tmp, "metadata.jsonl")
	ids := []string{"fixture__calc-1", "fixture__semver-1", "fixture__textutil-2"}
	args := []string{}
	for _, id := range ids {
		args = append(args, "--instance", id)
	}
	staging := f.reg + "/swebuild-test/sbom-staging-" + salt
	out, err := f.build(t, ctx, f.dataset, staging, md, args...)
	if err != nil {
		t.Fatalf("building the fixture: %v", err)
	}
	m := regexp.MustCompile(`SBOMs: (\d+) captured \(([0-9.]+)s in all\), (\d+) attached, (\d+) failed`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no SBOM line in the build summary:\n%s", out)
	}
	recs, err := core.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	var envs, insts []core.Image
	for _, r := range recs {
		switch r.Kind {
		case core.KindEnv:
			envs = append(envs, r)
		case core.KindInstance:
			insts = append(insts, r)
		default:
			continue
		}
		if r.SBOM == "" || r.SBOMSize <= 0 || r.SBOMError != "" {
			t.Errorf("%s %s %s: no SBOM in the build record (sbom %q, error %q)", r.Kind, r.Key, r.Platform, r.SBOM, r.SBOMError)
		}
	}
	// calc-1 and semver-1 on both platforms, textutil-2 on amd64 only; one
	// env per language and platform.
	if len(insts) != 5 || len(envs) != 4 {
		t.Fatalf("%d instance and %d env records, want 5 and 4", len(insts), len(envs))
	}
	if m[1] != "9" || m[3] != "9" || m[4] != "0" {
		t.Errorf("summary says %s", m[0])
	}
	t.Logf("capture: %s images, %ss of listing in all (%.2fs per image; a rebuild of the same image is a cache hit)", m[1], m[2], atof(m[2])/9)
	// The same build again (a nightly with nothing changed): the images and
	// their listings are cache hits, and each SBOM is found attached with
	// one HEAD instead of being attached again.
	md2 := filepath.Join(tmp, "metadata-again.jsonl")
	if _, err := f.build(t, ctx, f.dataset, staging, md2, args...); err != nil {
		t.Fatalf("building the fixture again: %v", err)
	}
	again, err := core.ReadFile(md2)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]core.Image{}
	for _, r := range recs {
		first[r.ID()] = r
	}
	for _, r := range again {
		if r.Kind != core.KindBase && (r.SBOM == "" || r.SBOM != first[r.ID()].SBOM || r.Digest != first[r.ID()].Digest) {
			t.Errorf("rebuild of %s: image %s sbom %s, first build %s %s", r.ID(), r.Digest, r.SBOM, first[r.ID()].Digest, first[r.ID()].SBOM)
		}
	}
	// Per node, from the node logs: native and emulated (QEMU) captures.
	var logs []string
	_ = filepath.WalkDir(filepath.Dir(tmp), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".log") && strings.Contains(p, string(filepath.Separator)+"logs"+string(filepath.Separator)) {
			logs = append(logs, p)
		}
		return nil
	})
	perNode := regexp.MustCompile(`SBOM of (\S+): \d+ listing\(s\) captured in ([0-9.]+)s`)
	attachLine := regexp.MustCompile(`SBOM of (\S+): (\d+) packages, (\d+) bytes, (?:found )?attached as \S+ in ([0-9.]+)s`)
	found := 0
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		found += strings.Count(string(b), "found attached as")
		for _, mm := range perNode.FindAllStringSubmatch(string(b), -1) {
			t.Logf("capture %s: %ss", mm[1], mm[2])
		}
		for _, mm := range attachLine.FindAllStringSubmatch(string(b), -1) {
			t.Logf("attach %s: %s packages, %s bytes, %ss", mm[1], mm[2], mm[3], mm[4])
		}
	}

	if found != 9 {
		t.Errorf("%d SBOMs found already attached by the second build, want 9", found)
	}

	// Publish: with the SBOMs, and the same records without them into
	// another fresh prefix; the difference is the carry's cost.
	publishRun := func(name, mdFile, repo string) int {
		var so, se bytes.Buffer
		args := []string{"--unsigned", "--metadata-file", mdFile, "--repo", repo, "--ledger", filepath.Join(tmp, name+".ledger.jsonl"), "--debug"}
		if err := runPublish(ctx, args, &so, &se); err != nil {
			t.Fatalf("publish %s: %v\n%s\n%s", name, err, so.String(), tail(se.String(), 3000))
		}
		n := 0
		for _, l := range strings.Split(se.String(), "\n") {
			// The /v2/ ping (tried in TLS first on a plain-HTTP
			// registry) is once per run, not per ref.
			if strings.HasPrefix(l, "debug: ") && !strings.Contains(l, "/v2/:") && !strings.Contains(l, "/v2/ ->") {
				n++
			}
		}
		if name == "noop" {
			t.Logf("no-op re-run requests:\n%s", se.String())
		}
		return n
	}
	plain := filepath.Join(tmp, "metadata-plain.jsonl")
	var stripped []core.Image
	for _, r := range recs {
		r.SBOM, r.SBOMSize = "", 0
		stripped = append(stripped, r)
	}
	if err := core.WriteFile(plain, stripped); err != nil {
		t.Fatal(err)
	}
	reqPlain := publishRun("plain", plain, f.reg+"/swebuild-test/sbom-plain-"+salt)
	repo := f.reg + "/swebuild-test/sbom-" + salt
	reqSBOM := publishRun("sbom", md, repo)
	if err := os.Link(filepath.Join(tmp, "sbom.ledger.jsonl"), filepath.Join(tmp, "noop.ledger.jsonl")); err != nil {
		t.Fatal(err)
	}
	reqNoop := publishRun("noop", md, repo)
	// The no-op re-run: the push check before anything (an upload started
	// and cancelled: POST, DELETE), one HEAD per ref (images and indexes)
	// and one per SBOM attachment tag in the index repositories (every
	// per-arch image has an SBOM), nothing else.
	t.Logf("publish of %d per-arch images: %d requests without SBOMs, %d with (+%.1f per image to carry the SBOM into the per-arch and index repositories); no-op re-run: %d requests besides the /v2/ ping (2 for the push check + %d refs + %d index-repository SBOM tags)",
		len(insts), reqPlain, reqSBOM, float64(reqSBOM-reqPlain)/float64(len(insts)), reqNoop, len(insts)+len(ids), len(insts))
	if reqNoop != 2+2*len(insts)+len(ids) {
		t.Errorf("no-op re-run made %d requests for %d per-arch images (each with an SBOM) and %d indexes", reqNoop, len(insts), len(ids))
	}

	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client}
	namer := manifests.Namer{Repo: repo}
	checked := map[string]bool{}
	for _, im := range insts {
		if im.InstanceID == "fixture__textutil-2" {
			continue // its amd64 image is like calc-1's
		}
		archRepo := namer.ArchRepo(im.Platform.Arch(), im.InstanceID)
		doc := checkSBOM(t, ctx, refs, client, archRepo, im)
		if doc.Kind != "instance" || !reflect.DeepEqual(doc.InstanceIDs, []string{im.InstanceID}) || doc.Platform != im.Platform {
			t.Errorf("%s %s: document kind %q instances %v platform %s", im.InstanceID, im.Platform, doc.Kind, doc.InstanceIDs, doc.Platform)
		}
		pip := ""
		if strings.Contains(im.InstanceID, "calc") {
			pip = "cd /testbed && /opt/testbed/bin/python -m pip freeze --all"
		}
		compareIndependent(t, ctx, buildctl, host, archRepo+"@"+im.Digest.String(), im.Platform, pip, doc)
		checked[im.InstanceID+" "+im.Platform.String()] = true
	}
	for _, env := range envs {
		if !strings.Contains(env.Key, "fixture") || env.Platform != core.AMD64 {
			continue // the Python env on amd64
		}
		ref := strings.TrimSuffix(env.Ref, "@"+env.Digest.String())
		doc := checkSBOM(t, ctx, refs, client, ref, env)
		if doc.Kind != "env" || !reflect.DeepEqual(doc.InstanceIDs, []string{"fixture__calc-1", "fixture__textutil-2"}) {
			t.Errorf("env %s: document kind %q instances %v", env.Key, doc.Kind, doc.InstanceIDs)
		}
		compareIndependent(t, ctx, buildctl, host, env.Ref, env.Platform, "/opt/testbed/bin/python -m pip freeze --all", doc)
		checked["env"] = true
		measureAttach(t, ctx, f.reg+"/swebuild-test/sbom-cost-"+salt, env, doc)
	}
	if len(checked) != 5 {
		t.Errorf("checked %v, want calc-1 and semver-1 on both platforms and the Python env", checked)
	}
}

func atof(s string) float64 {
	var f float64
	fmt.Sscan(s, &f)
	return f
}

// findBuildctl is the stack's buildctl (scripts/stack.sh installs it under
// the cache directory), else one on PATH.
func findBuildctl(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("buildctl"); err == nil {
		return p
	}
	if dir, err := stacktest.CacheDir(); err == nil {
		if ms, _ := filepath.Glob(filepath.Join(dir, "bin", "buildkit-*", "buildctl")); len(ms) > 0 {
			return ms[len(ms)-1]
		}
	}
	return stacktest.LookPath(t, "buildctl")
}

// checkSBOM finds im's SBOM among its referrers in repo (attest.Referrers
// and skopeo on the fallback tag), reads the artifact with skopeo and the
// document blob, and checks it names the image.
func checkSBOM(t *testing.T, ctx context.Context, refs *attest.Referrers, client *registry.Client, repo string, im core.Image) *sbom.Document {
	t.Helper()
	what := fmt.Sprintf("%s %s %s", im.Kind, repo, im.Platform)
	r, err := client.ParseRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash(im.Digest.String())
	list, err := refs.List(ctx, r, h)
	if err != nil {
		t.Fatalf("%s: listing referrers: %v", what, err)
	}
	var found *v1.Descriptor
	for i, d := range list {
		if d.ArtifactType == sbom.MediaType {
			found = &list[i]
		}
	}
	if found == nil || found.Digest.String() != im.SBOM.String() {
		t.Fatalf("%s: referrers %+v have no SBOM %s", what, list, im.SBOM)
	}
	// The fallback tag, as skopeo reads it.
	var idx v1.IndexManifest
	if err := json.Unmarshal(skopeoRaw(t, "docker://"+repo+":"+attest.FallbackTag(h)), &idx); err != nil {
		t.Fatal(err)
	}
	inTag := false
	for _, d := range idx.Manifests {
		inTag = inTag || (d.Digest == found.Digest && d.ArtifactType == sbom.MediaType)
	}
	if !inTag {
		t.Errorf("%s: the fallback tag %s does not list the SBOM: %+v", what, attest.FallbackTag(h), idx.Manifests)
	}
	// The artifact manifest, by skopeo: its subject is the image.
	var am struct {
		v1.Manifest
		ArtifactType string `json:"artifactType"`
	}
	if err := json.Unmarshal(skopeoRaw(t, "docker://"+repo+"@"+found.Digest.String()), &am); err != nil {
		t.Fatal(err)
	}
	if am.Subject == nil || am.Subject.Digest != h || am.ArtifactType != sbom.MediaType || len(am.Layers) != 1 || am.Layers[0].MediaType != sbom.MediaType {
		t.Fatalf("%s: artifact manifest %+v", what, am)
	}
	l, err := client.Layer(ctx, r.Digest(am.Layers[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := sbom.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if doc.Subject != im.Digest.String() {
		t.Errorf("%s: the document's subject is %s, not the image %s", what, doc.Subject, im.Digest)
	}
	t.Logf("%s: SBOM %s found through the fallback tag (%d referrers), %d packages, %d bytes", what, found.Digest.String()[:19], len(idx.Manifests), len(doc.Packages), len(raw))
	return doc
}

// compareIndependent runs pip freeze --all (when pip is set) and dpkg-query
// in image ref through buildctl (a Dockerfile FROM the image, output to a
// local directory) and checks the document lists exactly those packages.
func compareIndependent(t *testing.T, ctx context.Context, buildctl, host, ref string, p core.Platform, pip string, doc *sbom.Document) {
	t.Helper()
	dir := t.TempDir()
	run := `mkdir -p /listing && dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n' > /listing/dpkg.txt`
	if pip != "" {
		run += " && (" + pip + ") > /listing/pip.txt"
	} else {
		run += " && touch /listing/pip.txt"
	}
	df := "FROM " + ref + "\nRUN " + run + "\nFROM scratch\nCOPY --from=0 /listing/ /\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, buildctl, "--addr", host, "build", "--frontend", "dockerfile.v0", "--local", "context="+dir, "--local", "dockerfile="+dir,
		"--opt", "platform="+p.String(), "--output", "type=local,dest="+filepath.Join(dir, "out"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buildctl listing of %s: %v\n%s", ref, err, tail(string(b), 3000))
	}
	for _, c := range []struct{ file, format, eco string }{{"pip.txt", sbom.FormatPipFreeze, sbom.PyPI}, {"dpkg.txt", sbom.FormatDpkgQuery, sbom.Deb}} {
		b, err := os.ReadFile(filepath.Join(dir, "out", c.file))
		if err != nil {
			t.Fatal(err)
		}
		want, err := sbom.Parse(c.format, b)
		if err != nil {
			t.Fatal(err)
		}
		var got []sbom.Package
		for _, pk := range doc.Packages {
			if pk.Ecosystem == c.eco {
				got = append(got, pk)
			}
		}
		lines := 0
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines++
			}
		}
		if !reflect.DeepEqual(got, want) || len(got) != lines || (c.eco == sbom.Deb && len(got) < 50) || (pip != "" && c.eco == sbom.PyPI && len(got) < 5) {
			t.Errorf("%s %s: the SBOM's %d %s packages differ from the %d (%d lines) of the independent listing\n got %v\nwant %v", ref, p, len(got), c.eco, len(want), lines, got, want)
			continue
		}
		t.Logf("%s %s: %d %s packages equal the independent %s", ref, p, len(got), c.eco, c.file)
	}
}

// measureAttach attaches env's SBOM document again, as the builder does,
// in a fresh repository (distribution does not check that the subject is
// there) through a client that counts its requests: what one attachment
// costs.
func measureAttach(t *testing.T, ctx context.Context, repo string, env core.Image, doc *sbom.Document) {
	t.Helper()
	raw, err := doc.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	c, err := registry.New(registry.Options{Logf: func(string, ...any) { n.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	src, err := c.ParseReference(env.Ref)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := c.Head(ctx, src)
	if err != nil || subject == nil {
		t.Fatalf("HEAD %s: %v", env.Ref, err)
	}
	n.Store(0)
	r, _ := c.ParseRepository(repo)
	h := subject.Digest
	a, err := attest.NewArtifact(*subject, sbom.MediaType, sbom.MediaType, raw, map[string]string{"org.opencontainers.image.title": "sbom.cdx.json"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	refs := &attest.Referrers{Client: c}
	if err := refs.Attach(ctx, r, a); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	idx := skopeoRaw(t, "docker://"+repo+":"+attest.FallbackTag(h))
	t.Logf("one attachment: %d requests in %v; bytes stored: document %d + artifact manifest %d + empty config %d + fallback index %d",
		n.Load(), el.Round(time.Millisecond), len(raw), len(a.Raw), len(attest.EmptyConfig), len(idx))
}
