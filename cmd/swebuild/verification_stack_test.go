package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	provpb "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/verify"
)

// TestBuildVerifyThenPublishCarriesTheVerification is the path `make demo`
// and the nightly take: `build --verify --push` to a staging repository,
// then a plain `publish` of its metadata file (no --verification). Every
// per-arch image published carries the gold check's statement, naming its
// digest, in its per-arch repository and in the index repository, read
// through the referrers tag schema alone (as skopeo and go-containerregistry
// read it): exactly one provenance, one SBOM and one verification statement
// per image. The statement is valid by in-toto's rules and the provenance
// passes in-toto's SLSA v1 check with the build's builder id. Then the same
// build runs again (answered from BuildKit's cache: the same image digests,
// a new provenance and statement) and is published with `build --verify
// --push --publish` into the same repository: still one of each, the
// second build's.
func TestBuildVerifyThenPublishCarriesTheVerification(t *testing.T) {
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	salt := time.Now().Format("150405.000")
	staging := f.reg + "/swebuild-test/verif-staging-" + salt
	repo := f.reg + "/swebuild-test/verif-" + salt
	const id = "fixture__calc-2"
	const builderID = "https://example.test/swebuild/runs/1"
	seen := map[string]bool{}
	reports := map[string][]byte{} // the gold check's report.json by "id platform", latest build
	build := func(md string, extra ...string) []core.Image {
		t.Helper()
		args := append([]string{"--verify", "--instance", id, "--platform", "linux/amd64,linux/arm64", "--builder-id", builderID}, extra...)
		if _, err := f.build(t, ctx, f.dataset, staging, md, args...); err != nil {
			t.Fatalf("build --verify --push: %v", err)
		}
		recs, err := core.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		var out []core.Image
		for _, r := range recs {
			if r.Kind == core.KindInstance {
				if !r.IsVerified() || r.Verification == "" || r.Attestation == "" || r.SBOM == "" {
					t.Fatalf("%s %s: build record %+v: want verified, with a statement, provenance and SBOM", r.InstanceID, r.Platform, r)
				}
				out = append(out, r)
			}
		}
		if len(out) != 2 {
			t.Fatalf("%d instance records, want 2 (both platforms)", len(out))
		}
		// The gold check's summary of this build (the one not seen
		// before under the test's temporary directories).
		var sums []string
		_ = filepath.WalkDir(filepath.Dir(tmp), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "summary.json" && !seen[p] {
				sums = append(sums, p)
			}
			return nil
		})
		if len(sums) != 1 {
			t.Fatalf("new gold check summaries: %v, want one", sums)
		}
		seen[sums[0]] = true
		sum, err := verify.ReadSummary(sums[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sum.Results {
			if r.Mode != verify.ModeGold {
				// The control run's report says the tests fail without
				// the fix; the statement carries the gold run's. (A
				// control from the verification cache names the gold
				// run's directory, which hid this on a warm cache.)
				continue
			}
			rep, err := os.ReadFile(filepath.Join(r.Dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			reports[r.InstanceID+" "+r.Platform.String()] = rep
		}
		return out
	}

	first := build(filepath.Join(tmp, "first.jsonl"))
	var stdout, stderr bytes.Buffer
	if err := runPublish(ctx, []string{"--metadata-file", filepath.Join(tmp, "first.jsonl"), "--repo", repo, "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("publish:\n%s", stdout.String())
	checkPublishedReferrers(t, ctx, repo, first, builderID, reports)

	second := build(filepath.Join(tmp, "second.jsonl"), "--publish", repo, "--ledger", filepath.Join(tmp, "ledger.jsonl"))
	for i := range second {
		j := slices.IndexFunc(first, func(r core.Image) bool { return r.Platform == second[i].Platform })
		if second[i].Digest != first[j].Digest {
			t.Logf("%s: the rebuild gave another digest (%s, was %s): nothing to supersede on this platform", second[i].Platform, second[i].Digest, first[j].Digest)
		} else if second[i].Attestation == first[j].Attestation {
			t.Errorf("%s: the rebuild kept the provenance %s: nothing was superseded, the test proves nothing", second[i].Platform, second[i].Attestation)
		}
	}
	checkPublishedReferrers(t, ctx, repo, second, builderID, reports)
}

// checkPublishedReferrers reads each record's published image back from
// repo's per-arch and index repositories through the referrers tag schema.
func checkPublishedReferrers(t *testing.T, ctx context.Context, repo string, recs []core.Image, builderID string, reports map[string][]byte) {
	t.Helper()
	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namer := manifests.Namer{Repo: repo}
	for _, im := range recs {
		for _, where := range []string{namer.ArchRepo(im.Platform.Arch(), im.InstanceID), namer.IndexRepo(im.InstanceID)} {
			r, _ := name.NewRepository(where, name.Insecure)
			what := im.InstanceID + " " + im.Platform.String() + " in " + where
			ri, err := ggcrremote.Referrers(r.Digest(im.Digest.String()))
			if err != nil {
				t.Fatalf("%s: referrers: %v", what, err)
			}
			idx, _ := ri.IndexManifest()
			byType := map[string][]v1.Descriptor{}
			for _, d := range idx.Manifests {
				byType[d.ArtifactType] = append(byType[d.ArtifactType], d)
			}
			for at, want := range map[string]string{
				"application/vnd.docker.attestation.manifest.v1+json": im.Attestation.String(),
				sbom.MediaType:            im.SBOM.String(),
				attest.StatementMediaType: im.Verification.String(),
			} {
				if got := byType[at]; len(got) != 1 || got[0].Digest.String() != want {
					t.Errorf("%s: referrers of type %s: %v, want exactly %s", what, at, got, want)
				}
			}
			refs := &attest.Referrers{Client: client}
			subject := mustHash(t, im.Digest.String())
			vs, err := refs.Statements(ctx, r, subject, attest.TestResultPredicate)
			if err != nil || len(vs) != 1 {
				t.Fatalf("%s: verification statement: %d, %v", what, len(vs), err)
			}
			tr, err := attest.ParseVerificationStatement(vs[0])
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			passed, failed, err := attest.ReportTests(reports[im.InstanceID+" "+im.Platform.String()], im.InstanceID)
			if err != nil {
				t.Fatalf("%s: the gold check's report: %v", what, err)
			}
			if tr.SubjectDigest != im.Digest.String() || tr.Result != "PASSED" || len(passed) == 0 || !slices.Equal(tr.PassedTests, passed) || !slices.Equal(tr.FailedTests, failed) || tr.Extra["goldResolved"] != true {
				t.Errorf("%s: statement subject %s result %s passed %v failed %v extras %v; want %s PASSED, the check's report: passed %v failed %v",
					what, tr.SubjectDigest, tr.Result, tr.PassedTests, tr.FailedTests, tr.Extra, im.Digest, passed, failed)
			}
			checkStatementInToto(t, what, vs[0])
			prov, err := refs.Statements(ctx, r, subject, "https://slsa.dev/provenance/v1")
			if err != nil || len(prov) != 1 {
				t.Fatalf("%s: provenance: %d, %v", what, len(prov), err)
			}
			checkProvenanceSLSA(t, what, prov[0], builderID)
		}
	}
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkStatementInToto: in-toto's statement check, and the spec's rule for
// each configuration entry (a uri or a digest; in-toto's Go Validate also
// takes a name alone, so the JSON is read too).
func checkStatementInToto(t *testing.T, what string, raw []byte) {
	t.Helper()
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		t.Fatalf("%s: in-toto statement: %v", what, err)
	}
	if err := st.Validate(); err != nil {
		t.Errorf("%s: in-toto statement: %v", what, err)
	}
	var generic struct {
		Predicate struct {
			Configuration []map[string]any `json:"configuration"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for i, c := range generic.Predicate.Configuration {
		if c["uri"] == nil && c["digest"] == nil {
			t.Errorf("%s: configuration[%d] %v has neither uri nor digest", what, i, c["name"])
		}
	}
}

// checkProvenanceSLSA decodes BuildKit's provenance statement with
// in-toto's SLSA v1 types (BuildKit's own fields beyond them ignored) and
// runs in-toto's check, which wants a non-empty runDetails.builder.id.
func checkProvenanceSLSA(t *testing.T, what string, raw []byte, builderID string) {
	t.Helper()
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		t.Fatalf("%s: provenance statement: %v", what, err)
	}
	if err := st.Validate(); err != nil {
		t.Errorf("%s: provenance statement: %v", what, err)
	}
	pj, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		t.Fatal(err)
	}
	p := &provpb.Provenance{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(pj, p); err != nil {
		t.Fatalf("%s: SLSA v1 provenance: %v", what, err)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("%s: SLSA v1 provenance: %v", what, err)
	}
	if got := p.GetRunDetails().GetBuilder().GetId(); got != builderID {
		t.Errorf("%s: runDetails.builder.id %q, want %q", what, got, builderID)
	}
}
