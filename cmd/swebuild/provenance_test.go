package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/verify"
)

// TestProvenanceFixture builds the fixture on the stack (BuildKit, the
// distribution 2.8 registry), verifies two instances (gold and control,
// both platforms where they have them), publishes everything with
// --verification, and reads the result back the way a consumer would:
// skopeo inspect --raw of the index shows an attestation manifest per
// image in buildx's layout; the provenance statement in it names the
// Dockerfile and the build inputs; each verified per-arch image has the
// verification statement among its referrers (fallback tag), bound to the
// image digest, with the tests of the verify run's report.json. It also
// measures what the attestations cost per image, and the no-op re-run.
func TestProvenanceFixture(t *testing.T) {
	f, built := sharedFixture(t)
	stacktest.LookPath(t, "skopeo")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	md, recs := built.MetadataFile, built.Records
	var err error
	insts := 0
	for _, r := range recs {
		if r.Kind == core.KindInstance {
			insts++
			if r.Attestation == "" || r.AttestationSize <= 0 {
				t.Errorf("%s %s: no attestation in the build record", r.InstanceID, r.Platform)
			}
		}
	}

	sumPath := filepath.Join(tmp, "verify-summary.json")
	var stdout, stderr bytes.Buffer
	verified := []string{"fixture__calc-1", "fixture__textutil-2"}
	err = runVerify(ctx, []string{"--gold", "--control", "--dataset", f.dataset, "--specs", f.specs, "--metadata-file", md, "--platform", "linux/amd64,linux/arm64",
		"--instance", verified[0], "--instance", verified[1], "--run-dir", filepath.Join(tmp, "verify"), "--summary", sumPath, "--timeout", "10m"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("verify: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	}
	sum, err := verify.ReadSummary(sumPath)
	if err != nil {
		t.Fatal(err)
	}

	// Publish twice into fresh repositories: without attestations (the
	// records' attestation fields dropped, no --verification), then with
	// them; the difference is their cost.
	salt := time.Now().Format("150405")
	plain := filepath.Join(tmp, "metadata-plain.jsonl")
	var stripped []core.Image
	for _, r := range recs {
		r.Attestation, r.AttestationSize = "", 0
		stripped = append(stripped, r)
	}
	if err := core.WriteFile(plain, stripped); err != nil {
		t.Fatal(err)
	}
	publishRun := func(name, mdFile, repo string, extra ...string) (requests int, elapsed time.Duration, out string) {
		var so, se bytes.Buffer
		args := append([]string{"--unsigned", "--metadata-file", mdFile, "--repo", repo, "--ledger", filepath.Join(tmp, name+".ledger.jsonl"), "--debug"}, extra...)
		begin := time.Now()
		if err := runPublish(ctx, args, &so, &se); err != nil {
			t.Fatalf("publish %s: %v\n%s\n%s", name, err, so.String(), tail(se.String(), 3000))
		}
		return strings.Count(se.String(), "debug: "), time.Since(begin), so.String()
	}
	reqPlain, tPlain, _ := publishRun("plain", plain, f.reg+"/swebuild-test/prov-plain-"+salt)
	repo := f.reg + "/swebuild-test/prov-" + salt
	reqAtt, tAtt, out := publishRun("attested", md, repo, "--verification", sumPath)
	t.Logf("publish:\n%s", out)
	t.Logf("cost over %d per-arch images: %d requests without attestations, %d with (+%.1f per image); %v vs %v",
		insts, reqPlain, reqAtt, float64(reqAtt-reqPlain)/float64(insts), tPlain.Round(time.Millisecond), tAtt.Round(time.Millisecond))
	reqNoop, _, _ := publishRun("attested", md, repo, "--verification", sumPath)
	t.Logf("no-op re-run: %d requests", reqNoop)

	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client}
	namer := manifests.Namer{Repo: repo}
	byID := map[string][]core.Image{}
	for _, r := range recs {
		if r.Kind == core.KindInstance {
			byID[r.InstanceID] = append(byID[r.InstanceID], r)
		}
	}
	var attBytes int64
	statements := 0
	for id, imgs := range byID {
		// The index as skopeo shows it: the images, then one attestation
		// manifest per image.
		raw := skopeoRaw(t, "docker://"+namer.IndexRepo(id)+":latest")
		var idx v1.IndexManifest
		if err := json.Unmarshal(raw, &idx); err != nil {
			t.Fatalf("%s index: %v", id, err)
		}
		for _, im := range imgs {
			var att *v1.Descriptor
			for i, d := range idx.Manifests {
				if d.Annotations[manifests.AnnotationReferenceType] == manifests.ReferenceTypeAttestation && d.Annotations[manifests.AnnotationReferenceDigest] == im.Digest.String() {
					att = &idx.Manifests[i]
				}
			}
			if att == nil || att.Platform == nil || att.Platform.OS != "unknown" || att.Digest.String() != im.Attestation.String() {
				t.Errorf("%s %s: index has no attestation manifest for the image (%+v)", id, im.Platform, idx.Manifests)
				continue
			}
			// The attestation manifest, by skopeo, in the index repository.
			am := skopeoRaw(t, "docker://"+namer.IndexRepo(id)+"@"+att.Digest.String())
			var m v1.Manifest
			if err := json.Unmarshal(am, &m); err != nil || m.Subject == nil || m.Subject.Digest.String() != im.Digest.String() {
				t.Errorf("%s %s: attestation manifest subject %+v (%v), want %s", id, im.Platform, m.Subject, err, im.Digest)
			}
			archRepo, _ := name.NewRepository(namer.ArchRepo(im.Platform.Arch(), id), name.Insecure)
			h, _ := v1.NewHash(im.Digest.String())
			prov, err := refs.Statements(ctx, archRepo, h, "https://slsa.dev/provenance/v1")
			if err != nil || len(prov) != 1 {
				t.Fatalf("%s %s: %d provenance statements among the per-arch image's referrers (%v)", id, im.Platform, len(prov), err)
			}
			attBytes += att.Size + int64(len(prov[0]))
			checkFixtureProvenance(t, id+" "+im.Platform.String(), prov[0])

			// Both referrers are in the plain referrers tag schema too.
			ri, err := ggcrremote.Referrers(archRepo.Digest(im.Digest.String()))
			if err != nil {
				t.Fatal(err)
			}
			rim, _ := ri.IndexManifest()
			var gold *verify.Result
			for i := range sum.Results {
				r := &sum.Results[i]
				if r.InstanceID == id && r.Platform == im.Platform && r.Mode == verify.ModeGold {
					gold = r
				}
			}
			want := 1
			if gold != nil {
				want = 2
			}
			if im.SBOM != "" {
				want++ // the image's SBOM (sbom_stack_test.go)
			}
			if len(rim.Manifests) != want {
				t.Errorf("%s %s: fallback tag lists %d referrers, want %d", id, im.Platform, len(rim.Manifests), want)
			}
			vs, err := refs.Statements(ctx, archRepo, h, attest.TestResultPredicate)
			if err != nil {
				t.Fatal(err)
			}
			if gold == nil {
				if len(vs) != 0 {
					t.Errorf("%s %s: a verification statement without a verify run", id, im.Platform)
				}
				continue
			}
			if len(vs) != 1 {
				t.Fatalf("%s %s: %d verification statements, want 1", id, im.Platform, len(vs))
			}
			statements++
			attBytes += int64(len(vs[0]))
			tr, err := attest.ParseVerificationStatement(vs[0])
			if err != nil {
				t.Fatal(err)
			}
			rep, err := os.ReadFile(filepath.Join(gold.Dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rj map[string]struct {
				TestsStatus map[string]map[string][]string `json:"tests_status"`
			}
			if err := json.Unmarshal(rep, &rj); err != nil {
				t.Fatal(err)
			}
			ts := rj[id].TestsStatus
			wantPassed := append(slices.Clone(ts["FAIL_TO_PASS"]["success"]), ts["PASS_TO_PASS"]["success"]...)
			wantFailed := append(slices.Clone(ts["FAIL_TO_PASS"]["failure"]), ts["PASS_TO_PASS"]["failure"]...)
			if tr.SubjectDigest != im.Digest.String() || tr.Result != "PASSED" || !slices.Equal(tr.PassedTests, wantPassed) || !slices.Equal(tr.FailedTests, wantFailed) || len(wantPassed) == 0 {
				t.Errorf("%s %s: statement subject %s result %s passed %v failed %v; want %s PASSED %v %v", id, im.Platform, tr.SubjectDigest, tr.Result, tr.PassedTests, tr.FailedTests, im.Digest, wantPassed, wantFailed)
			}
			if tr.Extra["goldResolved"] != true || tr.Extra["controlUnresolved"] != true || tr.Extra["grading"] == "" {
				t.Errorf("%s %s: statement extras %v", id, im.Platform, tr.Extra)
			}
			t.Logf("%s %s: verification %s, %d passed tests; provenance %d bytes", id, im.Platform, tr.Result, len(tr.PassedTests), len(prov[0]))
		}
	}
	if statements != 3 {
		t.Errorf("%d verification statements checked, want 3 (calc-1 on both platforms, x86-only textutil-2)", statements)
	}
	t.Logf("attestation bytes stored per image: %.0f (manifests and statements)", float64(attBytes)/float64(insts))
}

func skopeoRaw(t *testing.T, ref string) []byte {
	t.Helper()
	out, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect --raw %s: %v", ref, err)
	}
	return out
}

// checkFixtureProvenance: the SLSA v1 provenance names the instance
// Dockerfile (path, and its bytes: FROM the env image) through the
// Dockerfile frontend, the local contexts sent and the parent image input.
func checkFixtureProvenance(t *testing.T, what string, stmt []byte) {
	t.Helper()
	var st struct {
		Predicate struct {
			BuildDefinition struct {
				ExternalParameters struct {
					ConfigSource struct{ Path string } `json:"configSource"`
					Request      struct {
						Frontend string
						Args     map[string]string
						Locals   []struct{ Name string }
					} `json:"request"`
				} `json:"externalParameters"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Metadata struct {
					BuildkitMetadata struct {
						Source struct {
							Infos []struct {
								Filename string
								Data     string
							}
						}
					} `json:"buildkit_metadata"`
				}
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(stmt, &st); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ep := st.Predicate.BuildDefinition.ExternalParameters
	if ep.ConfigSource.Path != "Dockerfile" || ep.Request.Frontend != "dockerfile.v0" || len(ep.Request.Locals) == 0 {
		t.Errorf("%s: provenance configSource %q frontend %q locals %v", what, ep.ConfigSource.Path, ep.Request.Frontend, ep.Request.Locals)
	}
	parent := false
	for k, v := range ep.Request.Args {
		if strings.HasPrefix(k, "context:sweb.env.") && strings.HasPrefix(v, "input:") {
			parent = true
		}
	}
	if !parent {
		t.Errorf("%s: provenance args name no env parent: %v", what, ep.Request.Args)
	}
	df := ""
	for _, in := range st.Predicate.RunDetails.Metadata.BuildkitMetadata.Source.Infos {
		b, _ := base64.StdEncoding.DecodeString(in.Data)
		if in.Filename == "Dockerfile" && strings.HasPrefix(string(b), "FROM ") && strings.Contains(string(b), "sweb.env.") {
			df = string(b)
		}
	}
	if df == "" {
		t.Errorf("%s: provenance has no instance Dockerfile (FROM sweb.env...)", what)
	}
}
