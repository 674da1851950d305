package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/signtest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sign"
	"github.com/swebuild/swebuild/verification"
)

// reportOf is an upstream-format report.json of inst with every labelled
// test passing.
func reportOf(t *testing.T, inst core.Instance) []byte {
	t.Helper()
	rep := map[string]any{inst.InstanceID: map[string]any{"resolved": true, "tests_status": map[string]any{
		"FAIL_TO_PASS": map[string]any{"success": inst.FailToPass, "failure": []string{}},
		"PASS_TO_PASS": map[string]any{"success": inst.PassToPass, "failure": []string{}},
	}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerdict: what the gate asks of a verification statement, on real
// statements (attest.VerificationStatement of upstream-shaped reports).
func TestVerdict(t *testing.T) {
	inst := core.Instance{InstanceID: "o__r-1", FailToPass: []string{"t_fix"}, PassToPass: []string{"t_old", "t_flaky"}}
	yes, no := true, false
	good := attest.Verification{ImageName: "r/x", ImageDigest: "sha256:" + strings.Repeat("a", 64), InstanceID: inst.InstanceID, Platform: core.AMD64,
		Report: reportOf(t, inst), GoldResolved: true, ControlUnresolved: &yes, GoldRuns: 3, GoldResolvedRuns: 3, Repeat: 3,
		Container: map[string]string{"network": "none"}}
	for _, tc := range []struct {
		name string
		edit func(v *attest.Verification)
		want []string
	}{
		{"verified", func(*attest.Verification) {}, nil},
		{"verified, one run, older statement (no run counts)", func(v *attest.Verification) { v.GoldRuns, v.GoldResolvedRuns, v.Repeat = 0, 0, 1 }, nil},
		{"flaky", func(v *attest.Verification) {
			v.GoldResolved, v.GoldResolvedRuns, v.Failure = false, 2, attest.FailureFlaky
			v.FlakyTests, v.Flakes = []string{"t_flaky"}, []verification.Flake{{Test: "t_flaky", Failed: 1, Runs: 3}}
		}, []string{"result WARNED (warned: t_flaky)", "gold resolved in 2 of 3 runs"}},
		{"no control", func(v *attest.Verification) { v.ControlUnresolved = nil }, []string{"no no-patch control recorded"}},
		{"control resolved", func(v *attest.Verification) { v.ControlUnresolved = &no }, []string{"result FAILED", "the no-patch control resolved (the tests do not tell a fix from none)"}},
		{"network", func(v *attest.Verification) { v.Container = map[string]string{"network": "host"} }, []string{`network "host", want none`}},
		{"no container", func(v *attest.Verification) { v.Container = nil }, []string{"network not recorded, want none"}},
		{"gold unresolved", func(v *attest.Verification) { v.GoldResolved, v.GoldResolvedRuns = false, 0 }, []string{"result FAILED", "gold resolved in 0 of 3 runs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := good
			tc.edit(&v)
			raw, err := attest.VerificationStatement(v)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := attest.ParseVerificationStatement(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := Verdict(tr); !slices.Equal(got, tc.want) {
				t.Errorf("Verdict = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRequireVerified: four instances published to a real registry
// (distribution 2.8): astropy (amd64 verified 3/3 with its control; arm64
// flaky, 2 of 3) and pytest signed with key A, django unsigned, sympy
// signed with key B; then pytest's amd64 verification statement changed
// by one byte and re-pushed in place of the signed one. check with
// Require{key A}: the presence check passes, and exactly the images that
// are not verified are named, each with why, in its per-arch and its index
// repository; the error counts them.
func TestRequireVerified(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsPath, _ := testDatasetOf(t, "astropy__astropy-12907", "django__django-10097", "pytest-dev__pytest-10051", "sympy__sympy-20590")
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{Dataset: dsPath, Pins: "default", CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	platforms := loaded.Renderer.Tables.Platforms
	recs, built := buildRecords(t, loaded.Instances, platforms)
	byID := map[string]core.Instance{}
	for _, in := range loaded.Instances {
		byID[in.InstanceID] = in
	}
	keyA, _ := sign.GenerateKey()
	keyB, _ := sign.GenerateKey()
	signerA, _ := sign.NewKeySigner(keyA)
	signerB, _ := sign.NewKeySigner(keyB)
	repo := reg.Host + "/swebench"
	verdict := func(im core.Image) verification.Verdict {
		yes := true
		v := verification.Verdict{InstanceID: im.InstanceID, Platform: im.Platform, Image: "staging@" + im.Digest.String(),
			GoldResolved: true, ControlUnresolved: &yes, Runs: 3, ResolvedRuns: 3, Report: reportOf(t, byID[im.InstanceID]),
			EvalScript: []byte("#!/bin/bash\npytest\n"), Settings: &verification.Settings{Grading: "v5", TimeoutSeconds: 1800, MaxOutput: 1 << 20, Network: "none", Repeat: 3}}
		if im.InstanceID == "astropy__astropy-12907" && im.Platform == core.ARM64 {
			flaky := byID[im.InstanceID].PassToPass[0]
			v.GoldResolved, v.ResolvedRuns, v.Failure = false, 2, attest.FailureFlaky
			v.FlakyTests, v.Flakes = []string{flaky}, []verification.Flake{{Test: flaky, Failed: 1, Runs: 3}}
		}
		return v
	}
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	publishAs := func(s *sign.Signer, ids ...string) {
		t.Helper()
		var part []core.Image
		var verdicts []verification.Verdict
		for _, im := range recs {
			if slices.Contains(ids, im.InstanceID) {
				part = append(part, im)
				verdicts = append(verdicts, verdict(im))
			}
		}
		sum, err := publish.Run(ctx, part, publish.RunOptions{Options: publish.Options{Repo: repo, Jobs: 2, Version: "test", Signer: s,
			Verification: &publish.VerificationSource{Verdicts: verdicts, Verifier: "swebuild test"}},
			LedgerPath: ledger, Registry: registry.Options{Keychain: regtest.Anonymous()}})
		if err != nil || sum.Err() != nil {
			t.Fatalf("publish %v: %v %v %v", ids, err, sum, sum.Err())
		}
	}
	publishAs(signerA, "astropy__astropy-12907", "pytest-dev__pytest-10051")
	publishAs(nil, "django__django-10097")
	publishAs(signerB, "sympy__sympy-20590")

	// pytest's amd64 statement, one byte changed, re-pushed in place of
	// the signed one in both repositories.
	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client, Settle: 10 * time.Millisecond}
	n := manifests.Namer{Repo: repo}
	tampered := built["pytest-dev__pytest-10051 linux/amd64"]
	for _, where := range []string{n.ArchRepo("x86_64", "pytest-dev__pytest-10051"), n.IndexRepo("pytest-dev__pytest-10051")} {
		r, _ := name.NewRepository(where, name.Insecure)
		d, err := client.Head(ctx, r.Digest(tampered))
		if err != nil || d == nil {
			t.Fatalf("%s@%s: %v", where, tampered, err)
		}
		h, _ := v1.NewHash(tampered)
		if _, err := signtest.Repush(ctx, refs, r, v1.Descriptor{MediaType: types.MediaType(d.MediaType), Digest: h, Size: d.Size}, attest.TestResultPredicate); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := Run(ctx, loaded.Instances, Options{Repo: repo, Platforms: platforms, Reader: publication.New(client), Require: &Requirement{Trust: sign.Trust{Key: &keyA.PublicKey}}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("check --require-verified:\n%s", out.String())
	if ok, total := rep.Counts(); ok != total {
		t.Fatalf("presence: %d/%d", ok, total)
	}
	keyID := sign.KeyID(&keyA.PublicKey)
	want := map[string]string{ // "id platform" -> what the refusal says ("" = verified)
		"astropy__astropy-12907 linux/amd64":   "",
		"astropy__astropy-12907 linux/arm64":   "signed statement: result WARNED (warned: " + byID["astropy__astropy-12907"].PassToPass[0] + "); gold resolved in 2 of 3 runs",
		"django__django-10097 linux/amd64":     "no signed statement: none of its",
		"pytest-dev__pytest-10051 linux/amd64": "no signed statement verifies with key " + keyID,
		"pytest-dev__pytest-10051 linux/arm64": "",
		"sympy__sympy-20590 linux/amd64":       "no signed statement verifies with key " + keyID,
		"sympy__sympy-20590 linux/arm64":       "no signed statement verifies with key " + keyID,
	}
	seen := map[string]int{}
	for _, rc := range rep.Receipts {
		k := rc.InstanceID + " " + rc.Platform.String()
		seen[k]++
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("receipt for %s, which is not published", k)
		case w == "" && !rc.OK():
			t.Errorf("%s (%s): refused: %s", k, rc.Image, rc.Problem)
		case w != "" && !strings.HasPrefix(rc.Problem, w):
			t.Errorf("%s (%s): problem %q, want %q", k, rc.Image, rc.Problem, w)
		case !strings.HasSuffix(rc.Image, "@"+built[k]):
			t.Errorf("%s: receipt names %s, not the image %s", k, rc.Image, built[k])
		}
		if w != "" && !strings.Contains(out.String(), rc.Image+"\t"+rc.Problem) {
			t.Errorf("the output does not name %s with its problem", rc.Image)
		}
	}
	for k := range want {
		if seen[k] != 2 {
			t.Errorf("%s: %d receipts, want 2 (per-arch and index repository)", k, seen[k])
		}
	}
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "10 of 14 images not verified (no statement signed by key "+keyID) {
		t.Errorf("Err() = %v", err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("4/14 images verified: a verification statement signed by key %s", keyID)) {
		t.Errorf("output:\n%s", out.String())
	}
}
