package publish

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/verification"
)

// countingProxy forwards to a registry and logs "METHOD PATH" of every
// request.
type countingProxy struct {
	host string
	mu   sync.Mutex
	log  []string
}

func startCountingProxy(t *testing.T, upstream string) *countingProxy {
	t.Helper()
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	cp := &countingProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		cp.log = append(cp.log, r.Method+" "+r.URL.Path)
		cp.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cp.host = strings.TrimPrefix(srv.URL, "http://")
	return cp
}

func (c *countingProxy) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// TestIndexRepositoryCarriesReferrers, on two real distribution 2.8
// registries (no referrers API: the fallback tag schema): staged images
// with an SBOM attached (as the builder attaches it) and a gold
// verification of every image. After publish, a consumer holding only the
// index repository REPO/sweb.eval.<id> resolves the index, takes each
// per-arch child's digest, lists that digest's referrers in the index
// repository and finds the verification statement naming that digest (its
// tests equal report.json's) and the SBOM (the staged bytes); both are the
// same artifacts as in the per-arch repository. A re-run on the same
// ledger costs one HEAD per ref and per attachment tag, nothing else.
// skopeo reads the fallback tag and the artifact from the index
// repository too.
func TestIndexRepositoryCarriesReferrers(t *testing.T) {
	needSkopeo(t)
	src := regtest.Start(t, regtest.Options{})
	reg := regtest.Start(t, regtest.Options{})
	px := startCountingProxy(t, reg.Host)
	ids := []string{"a__a-1", "c__c-3"}
	f := makeFixture(t, ids, map[string]bool{"c__c-3": true}, 1024, 1)
	f.stage(t, src.Host, src.Host, "staging/build")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := testClient(t, -1)
	staging, _ := name.NewRepository(src.Host+"/staging/build", name.Insecure)
	refs := &attest.Referrers{Client: c}
	docs := map[string][]byte{}
	settings := &verification.Settings{Grading: "v5", TimeoutSeconds: 1800, MaxOutput: 1 << 20, Network: "none", Repeat: 1}
	var verdicts []verification.Verdict
	for i := range f.built {
		im := &f.built[i]
		docs[im.ID()] = attachStagedSBOM(t, ctx, refs, staging, f, im, []sbom.Package{{Ecosystem: sbom.PyPI, Name: "pytest", Version: "7.2." + fmt.Sprint(i)}})
		// A gold run per image: F2P t1, P2P t2 (and t3 failing on arm64).
		p2p := `"success": ["t2", "t3"], "failure": []`
		if im.Platform == core.ARM64 {
			p2p = `"success": ["t2"], "failure": ["t3"]`
		}
		report := fmt.Sprintf(`{%q: {"resolved": true, "tests_status": {"FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {%s}}}}`, im.InstanceID, p2p)
		verdicts = append(verdicts, verification.Verdict{InstanceID: im.InstanceID, Platform: im.Platform,
			Image: src.Host + "/staging/build@" + im.Digest.String(), GoldResolved: true, Runs: 1,
			Report: []byte(report), EvalScript: []byte("#!/bin/bash\npytest\n"), Settings: settings})
	}
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	run := func() (*Summary, string) {
		return publishOnLedger(t, ctx, ledgerPath, f.recs(), Options{Repo: px.host + "/release", Client: testClient(t, -1), Jobs: 2, Version: "test",
			Verification: &VerificationSource{Verdicts: verdicts, Verifier: "swebuild test"}})
	}
	s, progress := run()
	if s.ImagesPushed != 3 || s.IndexesPushed != 2 {
		t.Fatalf("%+v\n%s", s, progress)
	}
	t.Logf("first publish: %d requests to the release registry", len(px.requests()))

	// The consumer's view: the index repository alone (read directly).
	n := manifests.Namer{Repo: reg.Host + "/release"}
	found := 0
	for _, id := range ids {
		idxRepo, _ := name.NewRepository(n.IndexRepo(id), name.Insecure)
		d, err := c.Get(ctx, idxRepo.Tag(manifests.LatestTag))
		if err != nil {
			t.Fatal(err)
		}
		im, err := v1.ParseIndexManifest(bytes.NewReader(d.Manifest))
		if err != nil {
			t.Fatal(err)
		}
		for _, child := range im.Manifests {
			if child.Platform == nil || child.Platform.Architecture == "unknown" {
				continue
			}
			p, err := core.ParsePlatform(child.Platform.OS + "/" + child.Platform.Architecture)
			if err != nil {
				t.Fatal(err)
			}
			key := (&core.Image{Kind: core.KindInstance, InstanceID: id, Platform: p}).ID()
			rec := f.built[slices.IndexFunc(f.built, func(b core.Image) bool { return b.InstanceID == id && b.Platform == p })]
			if child.Digest.String() != rec.Digest.String() {
				t.Fatalf("%s: index child %s, built %s", key, child.Digest, rec.Digest)
			}
			list, err := refs.List(ctx, idxRepo, child.Digest)
			if err != nil {
				t.Fatal(err)
			}
			verifs, sboms := ofArtifactType(list, attest.StatementMediaType), ofArtifactType(list, sbom.MediaType)
			if len(sboms) != 1 || sboms[0].Digest.String() != rec.SBOM.String() {
				t.Fatalf("%s: SBOM referrers in %s: %+v, want %s", key, idxRepo, sboms, rec.SBOM)
			}
			if !bytes.Equal(artifactLayer(t, ctx, c, idxRepo, rec.SBOM.String()), docs[rec.ID()]) {
				t.Errorf("%s: the SBOM in the index repository differs from the staged one", key)
			}
			stmts, err := refs.Statements(ctx, idxRepo, child.Digest, attest.TestResultPredicate)
			if err != nil || len(stmts) != 1 || len(verifs) != 1 {
				t.Fatalf("%s: %d verification statements (%d referrers) in %s: %v", key, len(stmts), len(verifs), idxRepo, err)
			}
			tr, err := attest.ParseVerificationStatement(stmts[0])
			if err != nil {
				t.Fatal(err)
			}
			wantPassed, wantFailed, err := attest.ReportTests(verdicts[slices.IndexFunc(verdicts, func(v verification.Verdict) bool { return v.InstanceID == id && v.Platform == p })].Report, id)
			if err != nil {
				t.Fatal(err)
			}
			if tr.SubjectDigest != child.Digest.String() || !slices.Equal(tr.PassedTests, wantPassed) || !slices.Equal(tr.FailedTests, wantFailed) {
				t.Errorf("%s: statement names %s, passed %v failed %v; want %s, %v, %v", key, tr.SubjectDigest, tr.PassedTests, tr.FailedTests, child.Digest, wantPassed, wantFailed)
			}
			// skopeo alone, in the index repository: the fallback tag
			// lists both, and the verification artifact's subject is the
			// child.
			if fb, err := skopeoRaw(t, idxRepo.Tag(attest.FallbackTag(child.Digest)).String()); err != nil {
				t.Error(err)
			} else if !bytes.Contains(fb, []byte(verifs[0].Digest.String())) || !bytes.Contains(fb, []byte(rec.SBOM.String())) {
				t.Errorf("%s: skopeo: the fallback tag in %s lists neither or not both:\n%s", key, idxRepo, fb)
			}
			if am, err := skopeoRaw(t, idxRepo.Digest(verifs[0].Digest.String()).String()); err != nil {
				t.Error(err)
			} else if m, err := v1.ParseManifest(bytes.NewReader(am)); err != nil || m.Subject == nil || m.Subject.Digest != child.Digest {
				t.Errorf("%s: skopeo: the verification artifact's subject is not %s:\n%s", key, child.Digest, am)
			}
			// The same artifacts as in the per-arch repository.
			archRepo, _ := name.NewRepository(n.ArchRepo(p.Arch(), id), name.Insecure)
			archList, err := refs.List(ctx, archRepo, child.Digest)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []v1.Descriptor{sboms[0], verifs[0]} {
				if !slices.ContainsFunc(archList, func(d v1.Descriptor) bool { return d.Digest == want.Digest }) {
					t.Errorf("%s: %s (%s) is in the index repository but not among the per-arch referrers %v", key, want.Digest, want.ArtifactType, archList)
				}
			}
			found++
		}
	}
	if found != 3 {
		t.Fatalf("checked %d children through the index repositories, want 3", found)
	}

	// A re-run on the same ledger: one HEAD per ref (3 images, 2 indexes)
	// and per attachment tag (3 verifications in the per-arch repositories,
	// 3 verifications and 3 SBOMs in the index repositories, and each
	// index's verification summary: 2).
	before := len(px.requests())
	if s, progress := run(); s.ImagesSkipped != 3 || s.IndexesSkipped != 2 || strings.Contains(progress, "attached") {
		t.Fatalf("re-run: %+v\n%s", s, progress)
	}
	heads, other := headsAndOthers(px.requests()[before:])
	t.Logf("no-op re-run: %d HEADs, %d other requests", len(heads), len(other))
	if len(heads) != 16 || len(other) != 0 {
		t.Errorf("re-run: %d HEADs %v, other requests %v; want 16 HEADs and nothing else", len(heads), heads, other)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
