package attest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	svrpb "github.com/in-toto/attestation/go/predicates/svr/v01"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verification"
)

// TestVerificationSummary: the index's SVR over a child verified 3 of 3
// with its control and one flaky child (2 of 3): the passing properties
// name the first child only, SWEBUILD_VERIFIED (every child) is absent,
// the extension field says per child why; with both verified it is there.
// The statement is valid by in-toto's types and its predicate decodes as
// an SVR v0.1; the same input gives the same bytes.
func TestVerificationSummary(t *testing.T) {
	rep, err := os.ReadFile(filepath.Join("testdata", "pytest-dev__pytest-7220", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	passed, _, _ := ReportTests(rep, "pytest-dev__pytest-7220")
	yes := true
	statement := func(p core.Platform, flaky bool) *TestResult {
		v := Verification{ImageName: "r/sweb.eval." + p.Arch() + ".x", ImageDigest: "sha256:" + strings.Repeat(map[core.Platform]string{core.AMD64: "a", core.ARM64: "b"}[p], 64), InstanceID: "pytest-dev__pytest-7220",
			Platform: p, Report: rep, GoldResolved: true, ControlUnresolved: &yes, GoldRuns: 3, GoldResolvedRuns: 3, Repeat: 3, Container: map[string]string{"network": "none"}}
		if flaky {
			v.GoldResolved, v.GoldResolvedRuns, v.Failure = false, 2, FailureFlaky
			v.FlakyTests, v.Flakes = []string{passed[0]}, []verification.Flake{{Test: passed[0], Failed: 1, Runs: 3}}
		}
		raw, err := VerificationStatement(v)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ParseVerificationStatement(raw)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	amd := Child{Platform: core.AMD64, Name: "r/sweb.eval.x86_64.x", Digest: "sha256:" + strings.Repeat("a", 64), Statement: statement(core.AMD64, false), StatementDigest: strings.Repeat("c", 64)}
	arm := Child{Platform: core.ARM64, Name: "r/sweb.eval.arm64.x", Digest: "sha256:" + strings.Repeat("b", 64), Statement: statement(core.ARM64, true)}
	idx := "sha256:" + strings.Repeat("d", 64)
	at := time.Date(2026, 12, 2, 3, 4, 5, 600, time.UTC)
	for _, tc := range []struct {
		name     string
		children []Child
		props    []string
	}{
		{"one flaky", []Child{amd, arm}, []string{"SWEBUILD_CONTROL_UNRESOLVED_LINUX_AMD64", "SWEBUILD_CONTROL_UNRESOLVED_LINUX_ARM64", "SWEBUILD_GOLD_RESOLVED_3_OF_3_LINUX_AMD64", "SWEBUILD_NETWORK_NONE_LINUX_AMD64", "SWEBUILD_NETWORK_NONE_LINUX_ARM64", "SWEBUILD_VERIFIED_LINUX_AMD64"}},
		{"both verified", []Child{amd, {Platform: core.ARM64, Name: arm.Name, Digest: arm.Digest, Statement: statement(core.ARM64, false)}},
			[]string{"SWEBUILD_CONTROL_UNRESOLVED_LINUX_AMD64", "SWEBUILD_CONTROL_UNRESOLVED_LINUX_ARM64", "SWEBUILD_GOLD_RESOLVED_3_OF_3_LINUX_AMD64", "SWEBUILD_GOLD_RESOLVED_3_OF_3_LINUX_ARM64", "SWEBUILD_NETWORK_NONE_LINUX_AMD64", "SWEBUILD_NETWORK_NONE_LINUX_ARM64", "SWEBUILD_VERIFIED", "SWEBUILD_VERIFIED_LINUX_AMD64", "SWEBUILD_VERIFIED_LINUX_ARM64"}},
		{"no statement", []Child{{Platform: core.AMD64, Name: amd.Name, Digest: amd.Digest}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := VerificationSummary("r/sweb.eval.x", idx, tc.children, at)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := VerificationSummary("r/sweb.eval.x", idx, tc.children, at)
			if string(raw) != string(again) {
				t.Error("two encodings differ")
			}
			s, err := ParseVerificationSummary(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Properties, tc.props) && !(len(tc.props) == 0 && len(s.Properties) == 0) {
				t.Errorf("properties %q, want %q", s.Properties, tc.props)
			}
			if s.Subjects["r/sweb.eval.x"] != idx || s.Subjects[amd.Name] != amd.Digest || len(s.Subjects) != len(tc.children)+1 {
				t.Errorf("subjects %v", s.Subjects)
			}
			if s.Verifier != SummaryVerifier || !s.TimeCreated.Equal(at.Truncate(time.Second)) || len(s.Children) != len(tc.children) {
				t.Errorf("verifier %s time %s children %d", s.Verifier, s.TimeCreated, len(s.Children))
			}
			// The predicate is an SVR v0.1 for in-toto's own type (the
			// extension field ignored, as its parsing rules say).
			var generic struct {
				Predicate map[string]any `json:"predicate"`
			}
			_ = json.Unmarshal(raw, &generic)
			delete(generic.Predicate, "swebuildChildren")
			pj, _ := json.Marshal(generic.Predicate)
			if err := protojson.Unmarshal(pj, &svrpb.SimpleVerificationResult{}); err != nil {
				t.Errorf("not an SVR v0.1 predicate: %v", err)
			}
			st := &intoto.Statement{}
			if err := protojson.Unmarshal(raw, st); err != nil || st.Validate() != nil {
				t.Errorf("in-toto statement: %v %v", err, st.Validate())
			}
		})
	}
	raw, _ := VerificationSummary("r/sweb.eval.x", idx, []Child{amd, arm}, at)
	s, _ := ParseVerificationSummary(raw)
	flaky := s.Children[1]
	if flaky["verified"] != false || flaky["result"] != "WARNED" || flaky["goldResolvedRuns"] != float64(2) || !strings.Contains(strings.Join(anyStrings(flaky["problems"]), "; "), "gold resolved in 2 of 3 runs") {
		t.Errorf("flaky child %v", flaky)
	}
	if rates, _ := flaky["flakeRates"].(map[string]any); rates[passed[0]] == nil {
		t.Errorf("flaky child's rates %v", flaky["flakeRates"])
	}
	if s.Children[0]["statement"].(map[string]any)["sha256"] != strings.Repeat("c", 64) {
		t.Errorf("verified child %v", s.Children[0])
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
