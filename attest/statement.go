package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	trpb "github.com/in-toto/attestation/go/predicates/test_result/v0"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/swebuild/swebuild/core"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/swebuild/swebuild/verification"
)

// Predicate and media types.
const (
	// TestResultPredicate is the in-toto test-result predicate type.
	TestResultPredicate = "https://in-toto.io/attestation/test-result/v0.1"
	// StatementMediaType is the media type of an in-toto statement layer
	// (as BuildKit writes its provenance layers).
	StatementMediaType = "application/vnd.in-toto+json"
	// AnnotationPredicateType names a layer's predicate type (BuildKit's
	// and cosign's key).
	AnnotationPredicateType = "in-toto.io/predicate-type"
	// VerificationConfig is the name of the configuration entry that holds
	// what the test-result predicate has no field for (in its annotations;
	// its digest is the sha256 of those annotations as JSON, keys sorted,
	// no insignificant space: AnnotationsDigest).
	VerificationConfig = "swebuild-verification"
)

// FailureFlaky is verify's failure class of gold runs that disagree
// (verify.FailureFlaky).
const FailureFlaky = "flaky"

// Verification is what verify found on one per-arch image, as the
// statement records it.
type Verification struct {
	// ImageName is the published per-arch repository (REPO/sweb.eval.<arch>.<id>);
	// ImageDigest the image manifest digest the runs used (sha256:...).
	ImageName, ImageDigest string
	InstanceID             string
	Platform               core.Platform
	// Report is the gold run's report.json, upstream's format.
	Report []byte
	// GoldResolved: every gold run resolved. ControlUnresolved: the
	// control run (no patch) came out unresolved; nil when none ran.
	GoldResolved      bool
	ControlUnresolved *bool
	// Failure is verify's failure class of the gold result ("" when it
	// passed); FlakyTests the tests whose result differed between repeats,
	// Flakes the same with how often each failed.
	Failure    string
	FlakyTests []string
	Flakes     []verification.Flake
	// GoldRuns is how many gold runs there were and GoldResolvedRuns how
	// many resolved (0: not recorded).
	GoldRuns, GoldResolvedRuns int
	// Grading is the grading rules (v5, v4.1, or auto: v5 for records
	// with log_parser), GradingVersion upstream's version of them.
	Grading, GradingVersion string
	// EvalScript is the eval.sh the runs were given (nil: unknown, e.g. a
	// result from the verification cache; the statement names none).
	EvalScript []byte
	// Repeat is how many gold runs there were.
	Repeat int
	// Container holds the container settings (network, timeout, output
	// limit, platform), as strings.
	Container map[string]string
	// Verifier names the tool and its version.
	Verifier string
}

// VerificationOf is what a statement records of verdict v on the image
// imageName@imageDigest, by verifier: the gold outcome, its report.json and
// eval.sh, the rules the gold run was graded by (else what the run asked
// for) and the containers' settings.
func VerificationOf(v verification.Verdict, imageName, imageDigest, verifier string) Verification {
	out := Verification{
		ImageName: imageName, ImageDigest: imageDigest, InstanceID: v.InstanceID, Platform: v.Platform,
		Report: v.Report, GoldResolved: v.GoldResolved, ControlUnresolved: v.ControlUnresolved,
		Failure: v.Failure, FlakyTests: v.FlakyTests, Flakes: v.Flakes, EvalScript: v.EvalScript, Repeat: max(v.Runs, 1), Verifier: verifier,
		GoldRuns: v.Runs, GoldResolvedRuns: v.ResolvedRuns,
	}
	if s := v.Settings; s != nil {
		out.Grading, out.Repeat, out.GradingVersion = s.Grading, s.Repeat, verification.GradingVersion(s.Grading)
		out.Container = map[string]string{
			"network": s.Network, "timeout": fmt.Sprintf("%ds", s.TimeoutSeconds),
			"max_output": fmt.Sprint(s.MaxOutput), "platform": v.Platform.String(),
		}
	}
	if v.Rules != "" {
		// The rules the gold run was graded by (verify picks them per
		// record), rather than what the run asked for.
		out.Grading, out.GradingVersion = v.Rules, verification.GradingVersion(v.Rules)
	}
	return out
}

// report is the part of upstream's report.json a statement reads.
type report map[string]struct {
	Resolved    bool `json:"resolved"`
	TestsStatus map[string]struct {
		Success []string `json:"success"`
		Failure []string `json:"failure"`
	} `json:"tests_status"`
}

// ReportTests returns the labelled tests of a report.json (one instance)
// that passed and that failed: FAIL_TO_PASS and PASS_TO_PASS, success and
// failure, in that order.
func ReportTests(raw []byte, instanceID string) (passed, failed []string, err error) {
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("report.json: %w", err)
	}
	e, ok := r[instanceID]
	if !ok {
		return nil, nil, fmt.Errorf("report.json has no entry for %s", instanceID)
	}
	passed, failed = []string{}, []string{}
	for _, k := range []string{"FAIL_TO_PASS", "PASS_TO_PASS"} {
		passed = append(passed, e.TestsStatus[k].Success...)
		failed = append(failed, e.TestsStatus[k].Failure...)
	}
	return passed, failed, nil
}

// VerificationStatement returns the in-toto statement (JSON, keys sorted,
// no insignificant space: the same input gives the same bytes) of v.
func VerificationStatement(v Verification) ([]byte, error) {
	h, ok := strings.CutPrefix(v.ImageDigest, "sha256:")
	if !ok || len(h) != 64 {
		return nil, fmt.Errorf("verification statement: image digest %q is not sha256:<64 hex>", v.ImageDigest)
	}
	if v.InstanceID == "" || v.ImageName == "" {
		return nil, errors.New("verification statement: instance id and image name are required")
	}
	pred, err := v.testResult()
	if err != nil {
		return nil, err
	}
	pj, err := protojson.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("verification statement: %w", err)
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(pj, predStruct); err != nil {
		return nil, fmt.Errorf("verification statement: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: v.ImageName, Digest: map[string]string{"sha256": h}}},
		PredicateType: TestResultPredicate,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("verification statement: %w", err)
	}
	return canonical(st)
}

// testResult is the statement's predicate: the result and the tests from
// the report, and the configuration.
func (v Verification) testResult() (*trpb.TestResult, error) {
	passed, failed, err := ReportTests(v.Report, v.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("verification statement for %s %s: %w", v.InstanceID, v.Platform, err)
	}
	warned := append([]string{}, v.FlakyTests...)
	sort.Strings(warned)
	// A flaky test is warned, neither passed nor failed (the report is the
	// one run's).
	passed = slices.DeleteFunc(passed, func(n string) bool { return slices.Contains(warned, n) })
	failed = slices.DeleteFunc(failed, func(n string) bool { return slices.Contains(warned, n) })
	config, err := v.configuration()
	if err != nil {
		return nil, err
	}
	return &trpb.TestResult{
		Result:        v.result(failed, warned),
		Configuration: config,
		PassedTests:   passed,
		WarnedTests:   warned,
		FailedTests:   failed,
	}, nil
}

// result is the statement's result, given the tests that failed and were
// warned: PASSED, WARNED or FAILED.
func (v Verification) result(failed, warned []string) string {
	controlResolved := v.ControlUnresolved != nil && !*v.ControlUnresolved
	switch {
	case v.Failure == FailureFlaky && v.GoldResolvedRuns > 0 && len(failed) == 0 && !controlResolved:
		// Resolved in some runs only: labelled, never verified.
		return "WARNED"
	case !v.GoldResolved || v.Failure != "" || len(failed) > 0 || controlResolved:
		return "FAILED"
	case len(warned) > 0:
		return "WARNED"
	}
	return "PASSED"
}

// annotations are the swebuild-verification entry's annotations.
func (v Verification) annotations() map[string]any {
	ext := map[string]any{
		"instanceId":     v.InstanceID,
		"platform":       v.Platform.String(),
		"goldResolved":   v.GoldResolved,
		"grading":        v.Grading,
		"gradingVersion": v.GradingVersion,
		"repeat":         v.Repeat,
		"verifier":       v.Verifier,
	}
	if v.ControlUnresolved != nil {
		ext["controlUnresolved"] = *v.ControlUnresolved
		ext["controlRuns"] = 1
	}
	if v.GoldRuns > 0 {
		ext["goldRuns"], ext["goldResolvedRuns"] = v.GoldRuns, v.GoldResolvedRuns
	}
	if len(v.Flakes) > 0 {
		rates := map[string]any{}
		for _, f := range v.Flakes {
			rates[f.Test] = map[string]any{"failedRuns": f.Failed, "runs": f.Runs}
		}
		ext["flakeRates"] = rates
	}
	if v.Failure != "" {
		ext["failure"] = v.Failure
	}
	if len(v.Container) > 0 {
		c := map[string]any{}
		for k, val := range v.Container {
			c[k] = val
		}
		ext["container"] = c
	}
	return ext
}

// configuration is the predicate's configuration: the eval.sh, when known,
// and the swebuild-verification entry.
func (v Verification) configuration() ([]*intoto.ResourceDescriptor, error) {
	extStruct, err := structpb.NewStruct(v.annotations())
	if err != nil {
		return nil, fmt.Errorf("verification statement: %w", err)
	}
	extDigest, err := AnnotationsDigest(extStruct)
	if err != nil {
		return nil, fmt.Errorf("verification statement: %w", err)
	}
	var config []*intoto.ResourceDescriptor
	if v.EvalScript != nil {
		sum := sha256.Sum256(v.EvalScript)
		config = append(config, &intoto.ResourceDescriptor{Name: "eval.sh", Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}, MediaType: "text/x-shellscript"})
	}
	// Every configuration entry is a valid resource descriptor (a name
	// alone is not: in-toto wants uri, digest or content): the
	// swebuild-verification entry is the digest of its own annotations.
	config = append(config, &intoto.ResourceDescriptor{Name: VerificationConfig, Digest: map[string]string{"sha256": extDigest}, MediaType: "application/json", Annotations: extStruct})
	for i, c := range config {
		if err := validDescriptor(c); err != nil {
			return nil, fmt.Errorf("verification statement: configuration[%d] %s: %w", i, c.GetName(), err)
		}
	}
	return config, nil
}

// validDescriptor checks a resource descriptor by the in-toto spec: at
// least one of uri, digest and content (in-toto's Go Validate, v1.2.0,
// also takes a name alone), and a well-formed digest.
func validDescriptor(rd *intoto.ResourceDescriptor) error {
	if rd.GetUri() == "" && len(rd.GetDigest()) == 0 && len(rd.GetContent()) == 0 {
		return errors.New("a resource descriptor needs a uri, a digest or its content")
	}
	return rd.Validate()
}

// AnnotationsDigest is the hex sha256 of annotations as JSON with keys
// sorted and no insignificant space (encoding/json's encoding of their
// map): the digest of the swebuild-verification configuration entry, which
// a reader recomputes from the entry's annotations.
func AnnotationsDigest(annotations *structpb.Struct) (string, error) {
	b, err := json.Marshal(annotations.AsMap())
	if err != nil {
		return "", fmt.Errorf("encoding annotations: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonical is protojson's encoding of st made stable: protojson varies its
// whitespace on purpose, so the JSON is decoded and encoded again (keys
// sorted, no space).
func canonical(st *intoto.Statement) ([]byte, error) {
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding statement: %w", err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("encoding statement: %w", err)
	}
	return json.Marshal(v)
}

// TestResult is a decoded verification statement: the subject digest, the
// predicate's own fields and the configuration entry swebuild adds.
type TestResult struct {
	SubjectName, SubjectDigest string
	Result                     string
	PassedTests, FailedTests   []string
	WarnedTests                []string
	EvalScriptDigest           string
	Extra                      map[string]any
}

// ParseVerificationStatement decodes a statement VerificationStatement
// wrote, with the in-toto types (unknown fields are errors).
func ParseVerificationStatement(raw []byte) (*TestResult, error) {
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("decoding statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("decoding statement: %w", err)
	}
	if st.GetPredicateType() != TestResultPredicate {
		return nil, fmt.Errorf("decoding statement: predicate type %q, want %s", st.GetPredicateType(), TestResultPredicate)
	}
	pj, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("decoding predicate: %w", err)
	}
	pred := &trpb.TestResult{}
	if err := protojson.Unmarshal(pj, pred); err != nil {
		return nil, fmt.Errorf("decoding test-result predicate: %w", err)
	}
	sub := st.GetSubject()[0]
	tr := &TestResult{
		SubjectName: sub.GetName(), SubjectDigest: "sha256:" + sub.GetDigest()["sha256"],
		Result: pred.GetResult(), PassedTests: pred.GetPassedTests(), FailedTests: pred.GetFailedTests(), WarnedTests: pred.GetWarnedTests(),
	}
	for i, c := range pred.GetConfiguration() {
		if err := validDescriptor(c); err != nil {
			return nil, fmt.Errorf("decoding test-result predicate: configuration[%d] %s: %w", i, c.GetName(), err)
		}
		switch c.GetName() {
		case "eval.sh":
			tr.EvalScriptDigest = "sha256:" + c.GetDigest()["sha256"]
		case VerificationConfig:
			want, err := AnnotationsDigest(c.GetAnnotations())
			if err != nil {
				return nil, fmt.Errorf("decoding test-result predicate: %w", err)
			}
			if got := c.GetDigest()["sha256"]; got != want {
				return nil, fmt.Errorf("decoding test-result predicate: %s: digest sha256:%s, but its annotations hash to sha256:%s", VerificationConfig, got, want)
			}
			tr.Extra = c.GetAnnotations().AsMap()
		}
	}
	return tr, nil
}

// Problems says why the statement does not say verified, the gate's rule
// (check --require-verified, and the index's verification summary): nil
// when the result is PASSED, the gold patch resolved in every one of its
// runs, the no-patch control ran and came out unresolved, and the
// containers' network was none.
func (tr *TestResult) Problems() []string {
	var why []string
	ext := tr.Extra
	if tr.Result != "PASSED" {
		r := "result " + tr.Result
		if len(tr.WarnedTests) > 0 {
			r += " (warned: " + strings.Join(tr.WarnedTests, ", ") + ")"
		}
		if len(tr.FailedTests) > 0 {
			r += " (failed: " + strings.Join(tr.FailedTests, ", ") + ")"
		}
		why = append(why, r)
	}
	runs, hasRuns := tr.Runs()
	resolved, _ := extInt(ext, "goldResolvedRuns")
	switch {
	case ext["goldResolved"] != true && hasRuns:
		why = append(why, fmt.Sprintf("gold resolved in %d of %d runs", resolved, runs))
	case ext["goldResolved"] != true:
		why = append(why, "gold not resolved")
	case hasRuns && resolved != runs:
		why = append(why, fmt.Sprintf("gold resolved in %d of %d runs", resolved, runs))
	}
	switch c, ok := ext["controlUnresolved"]; {
	case !ok:
		why = append(why, "no no-patch control recorded")
	case c != true:
		why = append(why, "the no-patch control resolved (the tests do not tell a fix from none)")
	}
	if n := tr.Network(); n != "none" {
		q := "not recorded"
		if n != "" {
			q = fmt.Sprintf("%q", n)
		}
		why = append(why, fmt.Sprintf("network %s, want none", q))
	}
	return why
}

// Runs is how many gold runs the statement records (goldRuns), and
// whether it records them.
func (tr *TestResult) Runs() (int, bool) { return extInt(tr.Extra, "goldRuns") }

// Network is the containers' network the statement records ("" when it
// records none).
func (tr *TestResult) Network() string {
	c, _ := tr.Extra["container"].(map[string]any)
	n, _ := c["network"].(string)
	return n
}

func extInt(ext map[string]any, key string) (int, bool) {
	f, ok := ext[key].(float64)
	return int(f), ok
}
