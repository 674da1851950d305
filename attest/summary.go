package attest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	svrpb "github.com/in-toto/attestation/go/predicates/svr/v01"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/swebuild/swebuild/core"
)

// The index's verification summary
//
// A consumer of the multi-arch name REPO/sweb.eval.<id> reads one thing to
// learn which of its children were verified and how: an in-toto Simple
// Verification Result (predicate type https://in-toto.io/attestation/svr/v0.1,
// the version in-toto's attestation v1.2.0 defines; there is no v0.2) about
// the index, attached to it as a referrer in the index repository. Its
// subjects are the index and each child; its properties are the passing
// ones, per child (SWEBUILD_VERIFIED_LINUX_AMD64: the child's verification
// statement passes the gate of check --require-verified, TestResult.Problems;
// SWEBUILD_GOLD_RESOLVED_3_OF_3_LINUX_AMD64, SWEBUILD_CONTROL_UNRESOLVED_...,
// SWEBUILD_NETWORK_NONE_...) and for the whole index (SWEBUILD_VERIFIED: every
// child verified). The extension field swebuildChildren says the rest per
// child: its digest, the statement's result, runs, control, network, warned
// tests with their flake rates and the statement's digest.

// SummaryPredicate is the predicate type of the index's summary.
const SummaryPredicate = "https://in-toto.io/attestation/svr/v0.1"

// SummaryVerifier is the summary's verifier.id: swebuild's gate, versioned
// as the SVR spec recommends (a new version when what is checked changes).
const SummaryVerifier = "https://github.com/swebuild/swebuild/verification-gate/v1"

// Child is one child of an index as its summary reads it.
type Child struct {
	Platform core.Platform
	// Name is the per-arch repository and Digest the child's manifest
	// digest (sha256:...).
	Name, Digest string
	// Statement is the child's verification statement (nil: none) and
	// StatementDigest its sha256 (hex).
	Statement       *TestResult
	StatementDigest string
}

// childSummary is one entry of the swebuildChildren extension.
type childSummary struct {
	Platform          string            `json:"platform"`
	Digest            string            `json:"digest"`
	Verified          bool              `json:"verified"`
	Problems          []string          `json:"problems,omitempty"`
	Result            string            `json:"result,omitempty"`
	GoldRuns          *int              `json:"goldRuns,omitempty"`
	GoldResolvedRuns  *int              `json:"goldResolvedRuns,omitempty"`
	ControlUnresolved *bool             `json:"controlUnresolved,omitempty"`
	Network           string            `json:"network,omitempty"`
	WarnedTests       []string          `json:"warnedTests,omitempty"`
	FlakeRates        any               `json:"flakeRates,omitempty"`
	Statement         map[string]string `json:"statement,omitempty"`
}

// platformProperty is a platform as a property suffix: LINUX_AMD64.
func platformProperty(p core.Platform) string {
	return strings.ToUpper(strings.ReplaceAll(p.String(), "/", "_"))
}

// VerificationSummary returns the in-toto statement (compact JSON, keys
// sorted) of the index indexName@indexDigest over its children, made at
// created.
func VerificationSummary(indexName, indexDigest string, children []Child, created time.Time) ([]byte, error) {
	h, ok := strings.CutPrefix(indexDigest, "sha256:")
	if !ok || len(h) != 64 {
		return nil, fmt.Errorf("verification summary: index digest %q is not sha256:<64 hex>", indexDigest)
	}
	if len(children) == 0 {
		return nil, errors.New("verification summary: an index with no children")
	}
	subjects := []*intoto.ResourceDescriptor{{Name: indexName, Digest: map[string]string{"sha256": h}}}
	var props []string
	var entries []childSummary
	all := true
	for _, c := range children {
		ch, ok := strings.CutPrefix(c.Digest, "sha256:")
		if _, err := hex.DecodeString(ch); !ok || len(ch) != 64 || err != nil {
			return nil, fmt.Errorf("verification summary: %s child digest %q is not sha256:<64 hex>", c.Platform, c.Digest)
		}
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: c.Name, Digest: map[string]string{"sha256": ch}})
		e, cprops := summarizeChild(c)
		all = all && e.Verified
		props = append(props, cprops...)
		entries = append(entries, e)
	}
	if all {
		props = append(props, "SWEBUILD_VERIFIED")
	}
	sort.Strings(props)
	predStruct, err := summaryPredicate(props, entries, created)
	if err != nil {
		return nil, fmt.Errorf("verification summary: %w", err)
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: SummaryPredicate, Predicate: predStruct}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("verification summary: %w", err)
	}
	return canonical(st)
}

// summarizeChild is child c's entry of the swebuildChildren extension and
// the properties it passes.
func summarizeChild(c Child) (childSummary, []string) {
	e := childSummary{Platform: c.Platform.String(), Digest: c.Digest}
	tr := c.Statement
	if tr == nil {
		e.Problems = []string{"no verification statement"}
		return e, nil
	}
	e.Problems = tr.Problems()
	e.Verified = len(e.Problems) == 0
	e.Result, e.WarnedTests, e.Network = tr.Result, tr.WarnedTests, tr.Network()
	e.FlakeRates = tr.Extra["flakeRates"]
	if c.StatementDigest != "" {
		e.Statement = map[string]string{"sha256": c.StatementDigest}
	}
	runs, hasRuns, resolved, hasResolved := goldRuns(tr)
	if hasRuns {
		e.GoldRuns = &runs
	}
	if hasResolved {
		e.GoldResolvedRuns = &resolved
	}
	if c, ok := tr.Extra["controlUnresolved"].(bool); ok {
		e.ControlUnresolved = &c
	}
	suffix := platformProperty(c.Platform)
	var props []string
	if e.Verified {
		props = append(props, "SWEBUILD_VERIFIED_"+suffix)
	}
	if tr.Extra["goldResolved"] == true && hasRuns && (!hasResolved || resolved == runs) {
		props = append(props, fmt.Sprintf("SWEBUILD_GOLD_RESOLVED_%d_OF_%d_%s", runs, runs, suffix))
	}
	if e.ControlUnresolved != nil && *e.ControlUnresolved {
		props = append(props, "SWEBUILD_CONTROL_UNRESOLVED_"+suffix)
	}
	if e.Network == "none" {
		props = append(props, "SWEBUILD_NETWORK_NONE_"+suffix)
	}
	return e, props
}

// goldRuns is how many gold runs a statement records and how many
// resolved, each with whether it is known: the runs from the statement or
// its repeat, the resolved runs recorded or, for a gold-resolved statement
// without them, all of its runs.
func goldRuns(tr *TestResult) (runs int, hasRuns bool, resolved int, hasResolved bool) {
	runs, hasRuns = tr.Runs()
	if !hasRuns {
		runs, hasRuns = extInt(tr.Extra, "repeat")
	}
	resolved, hasResolved = extInt(tr.Extra, "goldResolvedRuns")
	if !hasResolved && tr.Extra["goldResolved"] == true {
		resolved, hasResolved = runs, hasRuns
	}
	return runs, hasRuns, resolved, hasResolved
}

// summaryPredicate is the SVR predicate of props, made at created, with
// the swebuildChildren extension of entries.
func summaryPredicate(props []string, entries []childSummary, created time.Time) (*structpb.Struct, error) {
	pred := &svrpb.SimpleVerificationResult{
		Verifier:    &svrpb.SimpleVerificationResult_Verifier{Id: SummaryVerifier},
		TimeCreated: timestamppb.New(created.UTC().Truncate(time.Second)),
		Properties:  props,
	}
	pj, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	var predMap map[string]any
	if err := json.Unmarshal(pj, &predMap); err != nil {
		return nil, err
	}
	if _, ok := predMap["properties"]; !ok {
		predMap["properties"] = []any{} // required, even when nothing passed
	}
	ej, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	var ext []any
	if err := json.Unmarshal(ej, &ext); err != nil {
		return nil, err
	}
	predMap["swebuildChildren"] = ext
	return structpb.NewStruct(predMap)
}

// Summary is a decoded verification summary.
type Summary struct {
	Subjects    map[string]string // name -> sha256:...
	Verifier    string
	TimeCreated time.Time
	Properties  []string
	Children    []map[string]any
}

// ParseVerificationSummary decodes a summary VerificationSummary wrote,
// checking it with in-toto's types: the statement, and the predicate as
// an SVR v0.1 (the extension field aside, as the parsing rules allow).
func ParseVerificationSummary(raw []byte) (*Summary, error) {
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("decoding the summary: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("decoding the summary: %w", err)
	}
	if st.GetPredicateType() != SummaryPredicate {
		return nil, fmt.Errorf("decoding the summary: predicate type %q, want %s", st.GetPredicateType(), SummaryPredicate)
	}
	pj, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("decoding the summary: %w", err)
	}
	pred := &svrpb.SimpleVerificationResult{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(pj, pred); err != nil {
		return nil, fmt.Errorf("decoding the SVR predicate: %w", err)
	}
	if pred.GetVerifier().GetId() == "" || pred.GetTimeCreated() == nil {
		return nil, errors.New("decoding the SVR predicate: verifier.id and timeCreated are required")
	}
	s := &Summary{Subjects: map[string]string{}, Verifier: pred.GetVerifier().GetId(), TimeCreated: pred.GetTimeCreated().AsTime(), Properties: pred.GetProperties()}
	for _, sub := range st.GetSubject() {
		s.Subjects[sub.GetName()] = "sha256:" + sub.GetDigest()["sha256"]
	}
	if kids, ok := st.GetPredicate().AsMap()["swebuildChildren"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				s.Children = append(s.Children, m)
			}
		}
	}
	return s, nil
}
