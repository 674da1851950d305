package attest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	trpb "github.com/in-toto/attestation/go/predicates/test_result/v0"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/swebuild/swebuild/core"
)

func TestVerificationStatement(t *testing.T) {
	dir := filepath.Join("testdata", "pytest-dev__pytest-7220")
	rep, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	eval, err := os.ReadFile(filepath.Join(dir, "eval.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// The expected tests come straight from upstream's report.json.
	var up map[string]struct {
		TestsStatus map[string]map[string][]string `json:"tests_status"`
	}
	if err := json.Unmarshal(rep, &up); err != nil {
		t.Fatal(err)
	}
	ts := up["pytest-dev__pytest-7220"].TestsStatus
	wantPassed := append(slices.Clone(ts["FAIL_TO_PASS"]["success"]), ts["PASS_TO_PASS"]["success"]...)
	if len(wantPassed) != 12 {
		t.Fatalf("upstream report lists %d passed labelled tests, want 12", len(wantPassed))
	}
	img := "sha256:" + strings.Repeat("ab", 32)
	yes, no := true, false
	base := Verification{
		ImageName: "127.0.0.1:5000/r/sweb.eval.x86_64.pytest-dev_1776_pytest-7220", ImageDigest: img,
		InstanceID: "pytest-dev__pytest-7220", Platform: core.AMD64, Report: rep, GoldResolved: true, ControlUnresolved: &yes,
		Grading: "v5", GradingVersion: "5.0.2", EvalScript: eval, Repeat: 2,
		Container: map[string]string{"network": "none", "timeout": "1800s"}, Verifier: "swebuild test",
	}
	for _, tc := range []struct {
		name   string
		edit   func(v *Verification)
		result string
		err    string
	}{
		{"passed", func(v *Verification) {}, "PASSED", ""},
		{"control resolved", func(v *Verification) { v.ControlUnresolved = &no }, "FAILED", ""},
		{"no control", func(v *Verification) { v.ControlUnresolved = nil }, "PASSED", ""},
		{"gold unresolved", func(v *Verification) { v.GoldResolved = false }, "FAILED", ""},
		{"flaky", func(v *Verification) { v.FlakyTests = []string{"b", "a"} }, "WARNED", ""},
		{"bad digest", func(v *Verification) { v.ImageDigest = "sha256:12" }, "", "is not sha256:<64 hex>"},
		{"other instance", func(v *Verification) { v.InstanceID = "x__y-1" }, "", "report.json has no entry for x__y-1"},
		{"bad report", func(v *Verification) { v.Report = []byte("{") }, "", "report.json:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := base
			tc.edit(&v)
			raw, err := VerificationStatement(v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			again, _ := VerificationStatement(v)
			if !bytes.Equal(raw, again) {
				t.Error("two encodings differ")
			}
			got, err := ParseVerificationStatement(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got.SubjectDigest != img || got.SubjectName != v.ImageName || got.Result != tc.result {
				t.Errorf("subject %s %s result %s, want %s %s %s", got.SubjectName, got.SubjectDigest, got.Result, v.ImageName, img, tc.result)
			}
			if !slices.Equal(got.PassedTests, wantPassed) || len(got.FailedTests) != 0 {
				t.Errorf("passed %v failed %v, want %v and none", got.PassedTests, got.FailedTests, wantPassed)
			}
			sum := sha256.Sum256(eval)
			if got.EvalScriptDigest != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Errorf("eval.sh digest %s", got.EvalScriptDigest)
			}
			if got.Extra["grading"] != "v5" || got.Extra["repeat"] != float64(2) || got.Extra["goldResolved"] != v.GoldResolved {
				t.Errorf("extra %v", got.Extra)
			}
			if c, ok := got.Extra["controlUnresolved"]; (v.ControlUnresolved != nil) != ok || (ok && c != *v.ControlUnresolved) {
				t.Errorf("controlUnresolved %v (%v), want %v", c, ok, v.ControlUnresolved)
			}
			checkInTotoValid(t, raw)
			var generic map[string]any
			if err := json.Unmarshal(raw, &generic); err != nil || generic["predicateType"] != TestResultPredicate || generic["_type"] != "https://in-toto.io/Statement/v1" {
				t.Errorf("statement header: %v %v", generic["_type"], generic["predicateType"])
			}
			if tc.name == "flaky" && !slices.Equal(got.WarnedTests, []string{"a", "b"}) {
				t.Errorf("warned %v", got.WarnedTests)
			}
		})
	}
}

// checkInTotoValid checks a verification statement against in-toto's own
// rules with in-toto's Go types, apart from the package's decoder: the
// statement validates, its predicate decodes as a test result with no
// unknown field, and every configuration entry is a valid resource
// descriptor (in the JSON itself: a uri or a digest, not a name alone).
func checkInTotoValid(t *testing.T, raw []byte) {
	t.Helper()
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		t.Fatalf("in-toto statement: %v", err)
	}
	if err := st.Validate(); err != nil {
		t.Errorf("in-toto statement: %v", err)
	}
	pj, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		t.Fatal(err)
	}
	tr := &trpb.TestResult{}
	if err := protojson.Unmarshal(pj, tr); err != nil {
		t.Fatalf("test-result predicate: %v", err)
	}
	if len(tr.GetConfiguration()) == 0 {
		t.Error("test-result predicate: no configuration entries")
	}
	for i, c := range tr.GetConfiguration() {
		if err := c.Validate(); err != nil {
			t.Errorf("configuration[%d] %s: %v", i, c.GetName(), err)
		}
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
			t.Errorf("configuration[%d] %v has neither uri nor digest", i, c["name"])
		}
	}
}

// TestVerificationConfigDigest: the swebuild-verification entry's digest is
// the sha256 of its annotations (keys sorted, no space), and a statement
// whose annotations were changed after it was made is refused.
func TestVerificationConfigDigest(t *testing.T) {
	rep, err := os.ReadFile(filepath.Join("testdata", "pytest-dev__pytest-7220", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := VerificationStatement(Verification{ImageName: "r/x", ImageDigest: "sha256:" + strings.Repeat("cd", 32),
		InstanceID: "pytest-dev__pytest-7220", Platform: core.ARM64, Report: rep, GoldResolved: true, Grading: "v4.1", Repeat: 1, Verifier: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Predicate struct {
			Configuration []struct {
				Name        string            `json:"name"`
				Digest      map[string]string `json:"digest"`
				Annotations map[string]any    `json:"annotations"`
			} `json:"configuration"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if n := len(st.Predicate.Configuration); n != 1 || st.Predicate.Configuration[0].Name != VerificationConfig {
		t.Fatalf("configuration %+v: want the %s entry alone (no eval.sh given)", st.Predicate.Configuration, VerificationConfig)
	}
	c := st.Predicate.Configuration[0]
	// Recomputed here from the JSON text, as a consumer would.
	b, _ := json.Marshal(c.Annotations)
	sum := sha256.Sum256(b)
	if c.Digest["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %v, want sha256 of %s", c.Digest, b)
	}
	tampered := bytes.Replace(raw, []byte(`"grading":"v4.1"`), []byte(`"grading":"v5"`), 1)
	if bytes.Equal(tampered, raw) {
		t.Fatal("the statement has no grading annotation to change")
	}
	if _, err := ParseVerificationStatement(tampered); err == nil || !strings.Contains(err.Error(), "annotations hash to") {
		t.Errorf("a statement with changed annotations: %v", err)
	}
}
