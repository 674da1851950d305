package repair

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
)

// Schema names the shape of Report's JSON; a new shape gets a new name.
const Schema = "swebuild.repair/v1"

// EnvImage is one platform's env image of a case: tonight's (the broken
// rebuild) and last night's (whose gold passed).
type EnvImage struct {
	Platform  core.Platform `json:"platform"`
	Tonight   string        `json:"tonight"`              // key without the tag
	TonightAt string        `json:"tonight_ref"`          // REPO@sha256:...
	LastNight string        `json:"last_night,omitempty"` // key without the tag
	LastAt    string        `json:"last_night_ref,omitempty"`
}

// Case is one env of the night whose rebuild broke gold patches that
// passed on last night's images.
type Case struct {
	Repo    string     `json:"repo"`
	Version string     `json:"version"`
	Envs    []EnvImage `json:"envs"`
	// Instances are every instance of the env: the repair rebuilds them
	// all with its rule; each bisection step, those that failed tonight.
	Instances []string `json:"instances"`
	// Changes are the packages the env resolved differently tonight
	// (its documents' drift), Drift the drift report's lines for them.
	Changes []Change `json:"changes"`
	Drift   []string `json:"drift"`
	// Tonight is tonight's outcome: the images that failed.
	Tonight Outcome `json:"tonight"`
}

// Name is "fixture/calc 1.0".
func (c Case) Name() string { return c.Repo + " " + c.Version }

// CaseReport is a case and what the repair did about it.
type CaseReport struct {
	Case
	Result *Result `json:"result,omitempty"`
	// Error is why the case has no result (the bisection broke off).
	Error string `json:"error,omitempty"`
	// Rule is the id of the proposed rule (VerdictCulprit).
	Rule string `json:"rule,omitempty"`
	// Repaired are the images built with the rule and verified: what the
	// night publishes in place of the broken ones.
	Repaired []core.Image `json:"repaired,omitempty"`
}

// Report is the night's repair: every case, the proposal written.
type Report struct {
	Schema string `json:"schema"`
	// Night names the night (its run and time).
	Night string `json:"night"`
	// Pins is the night's --pins value the steps started from.
	Pins  string       `json:"pins"`
	Cases []CaseReport `json:"cases"`
	// Proposal is the pins file holding the proposed rules, "" when none.
	Proposal string `json:"proposal,omitempty"`
	// Seconds is the wall time the repair added to the night.
	Seconds float64 `json:"seconds"`
}

// Encode is the report as indented JSON.
func (r Report) Encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encoding repair report: %w", err)
	}
	return b.Bytes(), nil
}

// DecodeReport reads a report Encode wrote.
func DecodeReport(raw []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("repair report: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("repair report: schema %q, want %q", r.Schema, Schema)
	}
	return &r, nil
}

// Evidence is the machine-readable record a proposed rule carries
// (pins.FileRule.Record): the night, the images that failed and their
// failing tests, old -> new of each held package, the drift lines, and the
// bisection's steps.
type Evidence struct {
	Night     string    `json:"night"`
	Repo      string    `json:"repo"`
	Version   string    `json:"version"`
	Instances []Failure `json:"instances"`
	Changes   []string  `json:"changes"`
	Drift     []string  `json:"drift"`
	Rebuilds  int       `json:"rebuilds"`
	Seconds   float64   `json:"seconds"`
	Steps     []string  `json:"steps"`
	// Verified are the images built with the rule whose gold passed.
	Verified []string `json:"verified,omitempty"`
}

// RuleID is the id of the rule repairing repo at version by holding back
// culprits: "repair-<repo>-<version>-<names>", in the pins id grammar.
func RuleID(repo, version string, culprits []Change) string {
	var names []string
	for _, c := range culprits {
		names = append(names, strings.ToLower(c.Name))
	}
	slices.Sort(names)
	parts := append([]string{"repair", repo, version}, slices.Compact(names)...)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.Join(parts, "-")) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}

// Proposal is the pin rule of a culprit verdict: every culprit held back at
// last night's version on the platforms where it changed, with its
// evidence. verified names the images built with it whose gold passed.
func Proposal(night string, c Case, r *Result, verified []string) (pins.FileRule, error) {
	if r == nil || r.Verdict != VerdictCulprit || len(r.Culprits) == 0 {
		return pins.FileRule{}, fmt.Errorf("%s: no single package repair to propose", c.Name())
	}
	culprits := slices.Clone(r.Culprits)
	slices.SortFunc(culprits, compareChanges)
	spec := HoldSpec(c.Repo, c.Version, culprits)
	var changes []string
	for _, ch := range culprits {
		changes = append(changes, ch.String())
	}
	var failed []string
	for _, f := range c.Tonight.Failures {
		failed = append(failed, f.String())
	}
	spec.Reason = fmt.Sprintf("%s broke the gold patches of %s (night %s); held back at last night's version, they pass",
		strings.Join(changes, ", "), strings.Join(failed, ", "), night)
	tests := 0
	for _, f := range c.Tonight.Failures {
		tests += len(f.Tests)
	}
	spec.Evidence = fmt.Sprintf("night %s: %s; %d image(s) failed gold (%d failing test result(s)); bisected in %d env rebuild(s) of %d changed package(s): %s; with the rule, %d image(s) verified",
		night, strings.Join(c.Drift, "; "), len(c.Tonight.Failures), tests, r.Rebuilds, len(r.Changed), stepLine(r.Steps), len(verified))
	if err := spec.Validate(); err != nil {
		return pins.FileRule{}, fmt.Errorf("%s: proposed rule: %w", c.Name(), err)
	}
	ev := Evidence{Night: night, Repo: c.Repo, Version: c.Version, Instances: c.Tonight.Failures, Changes: changes,
		Drift: c.Drift, Rebuilds: r.Rebuilds, Seconds: r.Seconds, Verified: verified}
	for _, s := range r.Steps {
		ev.Steps = append(ev.Steps, s.Label+": "+verdictWord(s.Outcome))
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return pins.FileRule{}, fmt.Errorf("encoding evidence: %w", err)
	}
	return pins.FileRule{HoldSpec: spec, Record: raw}, nil
}

// HoldSpec is the hold rule holding back held (each at its From version, on
// its platforms) in the envs of repo at version: what a bisection step
// builds with, and, for the culprits, the proposed rule.
func HoldSpec(repo, version string, held []Change) pins.HoldSpec {
	s := pins.HoldSpec{ID: RuleID(repo, version, held), Repo: repo, Version: version}
	for _, ch := range held {
		s.Hold = append(s.Hold, pins.Hold{Ecosystem: ch.Ecosystem, Name: ch.Name, Version: ch.From, Platforms: slices.Clone(ch.Platforms)})
	}
	return s
}

func verdictWord(o Outcome) string {
	if o.Pass {
		return "gold passes"
	}
	return fmt.Sprintf("gold fails (%d image(s))", len(o.Failures))
}

func stepLine(steps []Tried) string {
	var s []string
	for i, t := range steps {
		s = append(s, fmt.Sprintf("%d. %s: %s", i+1, t.Label, verdictWord(t.Outcome)))
	}
	return strings.Join(s, "; ")
}

// WriteMarkdown writes the report as the night's job summary shows it:
// per case the verdict, the package and version, the rebuilds and their
// time, the steps, and where the proposal is.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d env(s) broke gold patches that passed last night; the repair took %s.\n\n", len(r.Cases), seconds(r.Seconds))
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "#### %s\n\n", c.Name())
		var failed []string
		for _, f := range c.Tonight.Failures {
			failed = append(failed, fmt.Sprintf("`%s` (%d failing tests)", f.String(), len(f.Tests)))
		}
		fmt.Fprintf(&b, "- failed tonight: %s\n", strings.Join(failed, ", "))
		if len(c.Drift) > 0 {
			fmt.Fprintf(&b, "- drift: %s\n", "`"+strings.Join(c.Drift, "`, `")+"`")
		} else {
			b.WriteString("- drift: none\n")
		}
		switch {
		case c.Error != "":
			fmt.Fprintf(&b, "- **no result**: %s; last night's images are kept\n\n", c.Error)
			continue
		case c.Result == nil:
			b.WriteString("- not bisected\n\n")
			continue
		}
		res := c.Result
		switch res.Verdict {
		case VerdictCulprit:
			fmt.Fprintf(&b, "- **repaired**: %s; rule `%s`, %d image(s) verified with it and published\n", res.Reason, c.Rule, len(c.Repaired))
		default:
			fmt.Fprintf(&b, "- **%s**: %s; last night's images are kept\n", res.Verdict, res.Reason)
		}
		fmt.Fprintf(&b, "- %d env rebuild(s) of %d changed package(s) (%d a hold can pin), %s\n\n", res.Rebuilds, len(res.Changed), res.Holdable, seconds(res.Seconds))
		if len(res.Steps) > 0 {
			b.WriteString("| rebuild | built with | gold |\n|---|---|---|\n")
			for i, s := range res.Steps {
				fmt.Fprintf(&b, "| %d | %s | %s |\n", i+1, s.Label, verdictWord(s.Outcome))
			}
			b.WriteString("\n")
		}
	}
	if r.Proposal != "" {
		fmt.Fprintf(&b, "Proposed pins: `%s` (apply with `--pins %s,%s`; commit it to keep the rule).\n", r.Proposal, orDefault(r.Pins), r.Proposal)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDefault(p string) string {
	if p == "" {
		return "default"
	}
	return p
}

func seconds(s float64) string {
	if s < 90 {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%.1f min", s/60)
}
