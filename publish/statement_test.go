package publish

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/verification"
)

// attachStagedStatement attaches in staging the verification statement of
// a gold verdict on im (as the builder attaches the gold check's) and names
// it in the record; run tells two builds' statements apart.
func attachStagedStatement(t *testing.T, ctx context.Context, refs *attest.Referrers, staging name.Repository, f *fixture, im *core.Image, run int) {
	t.Helper()
	raw, err := f.images[im.InstanceID+" "+im.Platform.String()].RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash(im.Digest.String())
	report := fmt.Sprintf(`{%q: {"resolved": true, "tests_status": {"FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {"success": ["t2"], "failure": []}}}}`, im.InstanceID)
	v := verification.Verdict{InstanceID: im.InstanceID, Platform: im.Platform, GoldResolved: true, Runs: run, Report: []byte(report),
		EvalScript: []byte("#!/bin/bash\npytest\n"), Settings: &verification.Settings{Grading: "v5", TimeoutSeconds: 1800, MaxOutput: 1 << 20, Network: "none", Repeat: run}}
	stmt, err := attest.VerificationStatement(attest.VerificationOf(v, staging.String(), im.Digest.String(), "swebuild test"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := attest.StatementArtifact(v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: int64(len(raw))}, attest.TestResultPredicate, stmt)
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, staging, a); err != nil {
		t.Fatal(err)
	}
	im.Verification, im.VerificationSize = digest.Digest(a.Descriptor.Digest.String()), a.Descriptor.Size
}

// TestPublishCarriesTheBuildsStatement: records naming the verification
// statement the build attached in staging (no --verification) get it in
// the per-arch and the index repository. A second build of the same digests
// (a new statement, the same SBOM) published on top: each image then has
// exactly one statement, the second build's, in the fallback index (what
// skopeo and go-containerregistry read) and through List, and still its one
// SBOM. A no-op re-run makes one HEAD per ref and per attachment, nothing
// else.
func TestPublishCarriesTheBuildsStatement(t *testing.T) {
	_, dst, f, staging := stageTwoInstances(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testClient(t, -1)
	refs := &attest.Referrers{Client: c, Settle: 10 * time.Millisecond}
	for i := range f.built {
		im := &f.built[i]
		attachStagedSBOM(t, ctx, refs, staging, f, im, []sbom.Package{{Ecosystem: sbom.PyPI, Name: "pytest", Version: "7.2.1"}})
		attachStagedStatement(t, ctx, refs, staging, f, im, 1)
	}
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	run := func(recs []core.Image) (*Summary, string) {
		return publishOnLedger(t, ctx, ledgerPath, recs, Options{Repo: dst.host() + "/release", Client: testClient(t, -1), Jobs: 2, Version: "test", RequireVerified: true})
	}
	n := manifests.Namer{Repo: dst.host() + "/release"}
	check := func(when string, recs []core.Image) {
		t.Helper()
		for _, im := range recs {
			h, _ := v1.NewHash(im.Digest.String())
			for _, where := range []string{n.ArchRepo(im.Platform.Arch(), im.InstanceID), n.IndexRepo(im.InstanceID)} {
				repo, _ := name.NewRepository(where, name.Insecure)
				idx, err := ggcrremote.Referrers(repo.Digest(im.Digest.String()))
				if err != nil {
					t.Fatal(err)
				}
				fallback, _ := idx.IndexManifest()
				list, err := refs.List(ctx, repo, h)
				if err != nil {
					t.Fatal(err)
				}
				for what, ds := range map[string][]v1.Descriptor{"fallback index": fallback.Manifests, "List": list} {
					stmts, docs := ofArtifactType(ds, attest.StatementMediaType), ofArtifactType(ds, sbom.MediaType)
					if len(stmts) != 1 || stmts[0].Digest.String() != im.Verification.String() || len(docs) != 1 || docs[0].Digest.String() != im.SBOM.String() {
						t.Errorf("%s: %s %s in %s: statements %v, SBOMs %v; want exactly %s and %s", when, im.ID(), what, where, stmts, docs, im.Verification, im.SBOM)
					}
				}
				vs, err := refs.Statements(ctx, repo, h, attest.TestResultPredicate)
				if err != nil || len(vs) != 1 {
					t.Fatalf("%s: %s in %s: %d statements, %v", when, im.ID(), where, len(vs), err)
				}
				if tr, err := attest.ParseVerificationStatement(vs[0]); err != nil || tr.SubjectDigest != im.Digest.String() || tr.Result != "PASSED" {
					t.Errorf("%s: %s in %s: statement %+v, %v", when, im.ID(), where, tr, err)
				}
			}
		}
	}
	first := f.recs()
	if s, progress := run(first); s.ImagesPushed != 3 || s.IndexesPushed != 2 || strings.Contains(progress, "superseded") {
		t.Fatalf("first publish: %+v\n%s", s, progress)
	}
	check("first build", first)

	// The second build: same images, new statements.
	for i := range f.built {
		attachStagedStatement(t, ctx, refs, staging, f, &f.built[i], 2)
	}
	second := f.recs()
	for i := range second {
		if second[i].Verification == first[i].Verification {
			t.Fatalf("%s: the second build's statement is the first's", second[i].ID())
		}
	}
	s, progress := run(second)
	if s.ImagesSkipped != 3 || s.ImagesFailed+s.IndexesFailed != 0 {
		t.Fatalf("second publish: %+v\n%s", s, progress)
	}
	// 3 images in the per-arch and index repositories, and the 2 indexes'
	// summaries made from the first build's statements.
	if got, sums := strings.Count(progress, "superseded"), strings.Count(progress, "(an older summary)"); got != 8 || sums != 2 {
		t.Errorf("%d superseded statements (%d summaries), want 8 (3 images, per-arch and index repository; 2 summaries):\n%s", got, sums, progress)
	}
	check("second build", second)

	before := len(dst.requests())
	if s, progress := run(second); s.ImagesSkipped != 3 || s.IndexesSkipped != 2 {
		t.Fatalf("re-run: %+v\n%s", s, progress)
	}
	// One HEAD per ref (3 images, 2 indexes) and per attachment tag in the
	// index repositories (3 SBOMs, 3 statements, 2 index summaries).
	heads, other := headsAndOthers(dst.requests()[before:])
	if len(heads) != 13 || len(other) != 0 {
		t.Errorf("re-run: %d HEADs %v, other requests %v; want 13 HEADs and nothing else", len(heads), heads, other)
	}
}
