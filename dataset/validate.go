package dataset

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests/naming"
)

// Problem is one thing wrong with the input: where (Source is "file:line",
// "file:line:column" for malformed JSON, "file:row N" for parquet, or just
// "file" for the file as a whole), which field (empty when the problem is
// not about one field) and what.
type Problem struct {
	Source     string
	Field      string
	Msg        string
	InstanceID string // the record's instance_id when it could be read
}

func (p Problem) Error() string {
	if p.Field == "" {
		return p.Source + ": " + p.Msg
	}
	return fmt.Sprintf("%s: field %q: %s", p.Source, p.Field, p.Msg)
}

// ValidationError lists every problem found in a dataset file. Load returns
// it together with the records that had none, so a caller may report all
// problems and still go on with the valid instances.
type ValidationError struct {
	File     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in %s:", len(e.Problems), e.File)
	for _, p := range e.Problems {
		b.WriteString("\n")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Records is how many records the problems are of: a record with several
// problems (each missing field is one) counts once, by its Source.
func (e *ValidationError) Records() int {
	seen := make(map[string]bool, len(e.Problems))
	for _, p := range e.Problems {
		seen[p.Source] = true
	}
	return len(seen)
}

// Unwrap gives the problems as errors, so errors.As can find a Problem.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// Known tells which repos and versions the spec table has. Versions returns
// the repo's known versions and whether the repo is known at all.
type Known interface {
	Versions(repo string) ([]string, bool)
}

// Field indexes of the record fields the loader reads.
const (
	fRepo = iota
	fInstanceID
	fBaseCommit
	fPatch
	fTestPatch
	fProblemStatement
	fHintsText
	fCreatedAt
	fVersion
	fFailToPass
	fPassToPass
	fEnvSetupCommit
	fImageAssets
	fEvalScript
	fLogParser
	fEvalType
	fImage
	nFields
)

var fieldNames = [nFields]string{
	fRepo:             "repo",
	fInstanceID:       "instance_id",
	fBaseCommit:       "base_commit",
	fPatch:            "patch",
	fTestPatch:        "test_patch",
	fProblemStatement: "problem_statement",
	fHintsText:        "hints_text",
	fCreatedAt:        "created_at",
	fVersion:          "version",
	fFailToPass:       "FAIL_TO_PASS",
	fPassToPass:       "PASS_TO_PASS",
	fEnvSetupCommit:   "environment_setup_commit",
	fImageAssets:      "image_assets",
	fEvalScript:       "eval_script",
	fLogParser:        "log_parser",
	fEvalType:         "eval_type",
	fImage:            "image",
}

// requiredFields are the fields without which upstream cannot generate or
// grade an instance (see the package documentation).
var requiredFields = []int{fRepo, fInstanceID, fBaseCommit, fVersion, fTestPatch}

// fieldIndex maps a record key to a field index, or -1 for a key the loader
// ignores. The switch on string(key) does not allocate.
func fieldIndex(key []byte) int {
	switch string(key) {
	case "repo":
		return fRepo
	case "instance_id":
		return fInstanceID
	case "base_commit":
		return fBaseCommit
	case "patch":
		return fPatch
	case "test_patch":
		return fTestPatch
	case "problem_statement":
		return fProblemStatement
	case "hints_text":
		return fHintsText
	case "created_at":
		return fCreatedAt
	case "version":
		return fVersion
	case "FAIL_TO_PASS":
		return fFailToPass
	case "PASS_TO_PASS":
		return fPassToPass
	case "environment_setup_commit":
		return fEnvSetupCommit
	case "image_assets":
		return fImageAssets
	case "eval_script":
		return fEvalScript
	case "log_parser":
		return fLogParser
	case "eval_type":
		return fEvalType
	case "image":
		return fImage
	}
	return -1
}

// record is one decoded record before validation.
type record struct {
	inst     core.Instance
	present  [nFields]bool // field present with a non-null value of an accepted type
	seen     [nFields]bool // field present at all (possibly null or of a wrong type)
	problems []Problem     // type problems found while decoding
}

func (r *record) reset() {
	*r = record{problems: r.problems[:0]}
}

// typeProblem records a field whose value has a type the loader does not
// accept.
func (r *record) typeProblem(f int, msg string) {
	r.seen[f] = true
	r.problems = append(r.problems, Problem{Field: fieldNames[f], Msg: msg})
}

// validator checks decoded records and remembers instance ids for the
// duplicate check.
type validator struct {
	file     string
	known    Known
	firstAt  map[string]string // instance_id -> "line N" / "row N" of its first record
	problems []Problem
	out      []core.Instance
}

func newValidator(file string, known Known, sizeHint int) *validator {
	return &validator{
		file:    file,
		known:   known,
		firstAt: make(map[string]string, sizeHint),
		out:     make([]core.Instance, 0, sizeHint),
	}
}

// fileProblem records a problem about the file as a whole or its syntax.
func (v *validator) fileProblem(source, field, msg string) {
	v.problems = append(v.problems, Problem{Source: source, Field: field, Msg: msg})
}

// add validates one record; source is "file:line" or "file:row N", where is
// "line N" or "row N" (for duplicate messages).
func (v *validator) add(r *record, source, where string) {
	in := &r.inst
	before := len(v.problems)
	bad := func(f int, msg string) {
		v.problems = append(v.problems, Problem{Source: source, Field: fieldNames[f], Msg: msg})
	}
	// Type problems from decoding come first, in the order found.
	for _, p := range r.problems {
		p.Source = source
		v.problems = append(v.problems, p)
	}
	for _, f := range requiredFields {
		if !r.seen[f] {
			bad(f, "missing required field")
		} else if !r.present[f] && !hasProblem(r.problems, f) {
			bad(f, "is null; a value is required")
		}
	}
	idOK := r.present[fInstanceID]
	for _, c := range valueChecks {
		if !r.present[c.field] {
			continue
		}
		if msg := c.check(in); msg != "" {
			bad(c.field, msg)
			idOK = idOK && c.field != fInstanceID
		}
	}
	v.checkKnown(r, bad)
	if idOK {
		if first, dup := v.firstAt[in.InstanceID]; dup {
			bad(fInstanceID, fmt.Sprintf("%q is a duplicate of %s", in.InstanceID, first))
		} else {
			v.firstAt[in.InstanceID] = where
		}
	}
	if len(v.problems) > before {
		if r.present[fInstanceID] {
			for i := before; i < len(v.problems); i++ {
				v.problems[i].InstanceID = in.InstanceID
			}
		}
		return
	}
	if in.FailToPass == nil {
		in.FailToPass = []string{}
	}
	if in.PassToPass == nil {
		in.PassToPass = []string{}
	}
	in.Source = source
	v.out = append(v.out, *in)
}

// valueChecks check the value of a field a record has, in the order their
// problems are reported; check gives the problem ("" when none).
var valueChecks = []struct {
	field int
	check func(in *core.Instance) string
}{
	{fRepo, func(in *core.Instance) string { return checkRepo(in.Repo) }},
	{fInstanceID, func(in *core.Instance) string { return CheckID(in.InstanceID) }},
	{fBaseCommit, func(in *core.Instance) string { return checkCommit(in.BaseCommit) }},
	{fEnvSetupCommit, func(in *core.Instance) string { return checkCommit(in.EnvironmentSetupCommit) }},
	{fVersion, func(in *core.Instance) string { return checkNonEmpty(in.Version) }},
	{fTestPatch, func(in *core.Instance) string { return checkNonEmpty(in.TestPatch) }},
	{fEvalType, func(in *core.Instance) string { return checkEvalType(in.EvalType) }},
	{fImage, func(in *core.Instance) string { return checkImage(in.Image) }},
	{fLogParser, func(in *core.Instance) string {
		if checkPart(in.LogParser) != "" {
			return fmt.Sprintf("%s is not a parser name (a non-empty name of [A-Za-z0-9._-])", quoteShort(in.LogParser))
		}
		return ""
	}},
}

// checkCommit is the problem with a commit id that is not a full one.
func checkCommit(c string) string {
	if isCommitID(c) {
		return ""
	}
	return fmt.Sprintf("%s is not a full hex commit id (40 or 64 lowercase hex digits)", quoteShort(c))
}

// checkNonEmpty is the problem with an empty value.
func checkNonEmpty(s string) string {
	if s == "" {
		return "is empty"
	}
	return ""
}

// checkKnown checks a record's repo and version against the spec table, when
// there is one and the record does not carry its own eval script, parser and
// image.
func (v *validator) checkKnown(r *record, bad func(f int, msg string)) {
	in := &r.inst
	if v.known == nil || !r.present[fRepo] || !r.present[fVersion] || in.Version == "" || selfContained(r) {
		return
	}
	versions, ok := v.known.Versions(in.Repo)
	switch {
	case !ok:
		bad(fRepo, fmt.Sprintf("unknown repo %q (not in the spec table)", in.Repo))
	case !contains(versions, in.Version):
		bad(fVersion, fmt.Sprintf("unknown version %q for repo %q (known: %s)", in.Version, in.Repo, strings.Join(versions, ", ")))
	}
}

// selfContained reports whether a record carries what verifying and
// grading it take without the spec tables (upstream v5: its own
// eval_script, log_parser and image). Its repo and version are then not
// checked against the tables: rendering it from them, where asked, reports
// an unknown repo for that record alone.
func selfContained(r *record) bool {
	return r.present[fEvalScript] && r.present[fLogParser] && r.present[fImage] &&
		r.inst.EvalScript != "" && r.inst.LogParser != "" && r.inst.Image != ""
}

func (v *validator) result() ([]core.Instance, error) {
	if len(v.problems) == 0 {
		return v.out, nil
	}
	return v.out, &ValidationError{File: v.file, Problems: v.problems}
}

func setList(r *record, f int, list []string) {
	if f == fFailToPass {
		r.inst.FailToPass = list
	} else {
		r.inst.PassToPass = list
	}
	r.present[f] = true
}

func hasProblem(ps []Problem, f int) bool {
	for _, p := range ps {
		if p.Field == fieldNames[f] {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// safeNameChar reports whether c may appear in an instance id or a repo
// name part: [A-Za-z0-9._-].
func safeNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// CheckID returns why id cannot be used, or "" when it is fine. An id ends
// up in file and directory names, shell scripts, image repository names and
// tags, so it is checked for all of them at once by naming.ValidateID, the
// naming module's rule (only [A-Za-z0-9._-]; lower-cased, a path component of
// the OCI distribution grammar once "__" becomes "_1776_", so no leading or
// trailing '.', '_' or '-' and no two separators in a row other than "__" or
// dashes; at most naming.MaxNameIDLen bytes in that form, which also keeps
// it well under the 255-byte file-name limit).
func CheckID(id string) string {
	err := naming.ValidateID(id)
	if err == nil {
		return ""
	}
	var ie *naming.IDError
	if !errors.As(err, &ie) {
		return err.Error()
	}
	if id == "" {
		return ie.Reason
	}
	return quoteShort(id) + " " + ie.Reason
}

// checkPart returns why s is unsafe as a file name or shell word: it must
// be non-empty, use only [A-Za-z0-9._-], not contain "..", and not start
// with '.' or '-'.
func checkPart(s string) string {
	if s == "" {
		return "is empty"
	}
	for i := 0; i < len(s); i++ {
		if !safeNameChar(s[i]) {
			return fmt.Sprintf("%s has a character outside [A-Za-z0-9._-] at byte %d", quoteShort(s), i)
		}
	}
	if strings.Contains(s, "..") {
		return fmt.Sprintf("%s contains \"..\"", quoteShort(s))
	}
	if s[0] == '.' || s[0] == '-' {
		return fmt.Sprintf("%s starts with %q", quoteShort(s), s[0])
	}
	return ""
}

// checkRepo returns why repo is not a plain GitHub "owner/name", or "".
func checkRepo(repo string) string {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || checkPart(owner) != "" || checkPart(name) != "" {
		return fmt.Sprintf("%s is not of the form owner/name (each part of [A-Za-z0-9._-], not starting with '.' or '-')", quoteShort(repo))
	}
	return ""
}

// isCommitID reports whether s is a full SHA-1 or SHA-256 git object id in
// lowercase hex.
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// quoteShort quotes s for a message, eliding the middle of long values.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		head, tail := max/2, len(s)-max/2
		for head > 0 && !utf8.RuneStart(s[head]) {
			head--
		}
		for tail < len(s) && !utf8.RuneStart(s[tail]) {
			tail++
		}
		s = s[:head] + "…" + s[tail:]
	}
	return fmt.Sprintf("%q", s)
}
