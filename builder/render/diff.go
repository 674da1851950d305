package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const devNull = "/dev/null"

// patchedFile is what upstream's get_modified_files reads of a
// unidiff.PatchedFile.
type patchedFile struct {
	source, target string
	hunks          int
}

// modifiedFiles ports SWE-bench v4.1.0 get_modified_files: the source paths
// (without "a/") of the files in patch whose source is not /dev/null, in
// patch order, as parsed by python-unidiff 0.7.3's PatchSet (a rename lists
// its source path; files added by the patch are left out).
func modifiedFiles(patch string) ([]string, error) {
	files, err := parsePatchSet(patch)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(files))
	for _, f := range files {
		if f.source != devNull && strings.HasPrefix(f.source, "a/") {
			out = append(out, f.source[2:])
		}
	}
	return out, nil
}

// newFiles ports get_new_files (upstream 2514c86): the target paths of the
// files whose source is /dev/null, without a leading "b/", in patch order.
func newFiles(patch string) ([]string, error) {
	files, err := parsePatchSet(patch)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if f.source == devNull {
			out = append(out, strings.TrimPrefix(f.target, "b/"))
		}
	}
	return out, nil
}

// lineReader yields lines split on "\n", each keeping its "\n" (like
// iterating a Python StringIO).
type lineReader struct {
	s   string
	pos int
	no  int
}

func (r *lineReader) next() (string, bool) {
	if r.pos >= len(r.s) {
		return "", false
	}
	end := strings.IndexByte(r.s[r.pos:], '\n')
	var line string
	if end < 0 {
		line = r.s[r.pos:]
		r.pos = len(r.s)
	} else {
		line = r.s[r.pos : r.pos+end+1]
		r.pos += end + 1
	}
	r.no++
	return line, true
}

// fileName returns the header file name of "--- name\tts" style lines: the
// text up to the first tab or newline; ok=false if it is empty.
func fileName(rest string) (string, bool) {
	if i := strings.IndexAny(rest, "\t\n"); i >= 0 {
		rest = rest[:i]
	}
	return rest, rest != ""
}

func isModeLine(line, prefix string) bool {
	if !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, "\n") {
		return false
	}
	digits := line[len(prefix) : len(line)-1]
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// gitHeader matches `^diff --git (?P<source>(a/)?[^\t\n]+) (?P<target>(b/)?[^\t\n]+)`.
func gitHeader(line string) (src, tgt string, ok bool) {
	rest, found := strings.CutPrefix(line, "diff --git ")
	if !found {
		return "", "", false
	}
	if i := strings.IndexAny(rest, "\t\n"); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) < 3 {
		return "", "", false
	}
	k := strings.LastIndexByte(rest[:len(rest)-1], ' ')
	if k < 1 {
		return "", "", false
	}
	return rest[:k], rest[k+1:], true
}

// hunkHeader matches `^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))?\ @@` and
// returns source start/length and target start/length (length 1 if absent).
func hunkHeader(line string) (ss, sl, ts, tl int, ok bool) {
	rest, found := strings.CutPrefix(line, "@@ -")
	if !found {
		return
	}
	num := func() (int, bool) {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil {
			return 0, false
		}
		rest = rest[i:]
		return n, true
	}
	var good bool
	if ss, good = num(); !good {
		return
	}
	sl = 1
	if strings.HasPrefix(rest, ",") {
		rest = rest[1:]
		if sl, good = num(); !good {
			return
		}
	}
	if rest, found = strings.CutPrefix(rest, " +"); !found {
		return
	}
	if ts, good = num(); !good {
		return
	}
	tl = 1
	if strings.HasPrefix(rest, ",") {
		rest = rest[1:]
		if tl, good = num(); !good {
			return
		}
	}
	if !strings.HasPrefix(rest, " @@") {
		return
	}
	return ss, sl, ts, tl, true
}

// binaryHeader loosely matches unidiff's RE_BINARY_DIFF and returns the
// source and (when the line names one) target file names.
func binaryHeader(line string) (src, tgt string, ok bool) {
	var rest string
	var found bool
	if rest, found = strings.CutPrefix(line, "Binary files "); !found {
		if rest, found = strings.CutPrefix(line, "Binary file "); !found {
			return "", "", false
		}
	}
	for i := 1; i < len(rest); i++ {
		if rest[i-1] == '\t' {
			return "", "", false
		}
		tail := rest[i:]
		if strings.HasPrefix(tail, " differ") || strings.HasPrefix(tail, " has changed") {
			return rest[:i], "", true
		}
		if after, ok := strings.CutPrefix(tail, " and "); ok {
			if k := endOfBinaryTarget(after); k > 0 {
				return rest[:i], after[:k], true
			}
		}
	}
	return "", "", false
}

// endOfBinaryTarget is the length of the shortest tab-free target name in
// s followed by " differ" or " has changed"; 0 for none.
func endOfBinaryTarget(s string) int {
	for k := 1; k < len(s); k++ {
		if s[k-1] == '\t' {
			return 0
		}
		if strings.HasPrefix(s[k:], " differ") || strings.HasPrefix(s[k:], " has changed") {
			return k
		}
	}
	return 0
}

// path ports unidiff's PatchedFile.path: the source name, or the target's
// for an added file or a rename, without an a/ or b/ prefix.
func (f *patchedFile) path() string {
	p := f.source
	isRename := f.source != devNull && f.target != devNull && pySlice2(f.source) != pySlice2(f.target)
	if p == "" || p == devNull || (isRename && f.target != "" && f.target != devNull) {
		p = f.target
	}
	if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
		p = p[2:]
	}
	return p
}

// pySlice2 is Python's s[2:].
func pySlice2(s string) string {
	if len(s) < 2 {
		return ""
	}
	return s[2:]
}

// parsePatchSet follows unidiff 0.7.3 PatchSet._parse closely enough to get
// the same file list and the same parse errors for malformed hunks.
func parsePatchSet(patch string) ([]patchedFile, error) {
	ps := &patchSetParser{files: make([]patchedFile, 0, 4), cur: -1, r: &lineReader{s: patch}}
	for {
		line, ok := ps.r.next()
		if !ok {
			return ps.files, nil
		}
		matched := false
		for _, step := range patchSetSteps {
			var err error
			if matched, err = step(ps, line); err != nil {
				return nil, err
			}
			if matched {
				break
			}
		}
		if !matched {
			ps.other(line)
		}
	}
}

// patchSetParser is PatchSet._parse's state: the files so far, the index of
// current_file (-1 for None), whether patch_info is not None, and the last
// source file name.
type patchSetParser struct {
	files      []patchedFile
	cur        int
	patchInfo  bool
	sourceFile string
	r          *lineReader
}

// patchSetSteps are the kinds of lines PatchSet._parse tries, in its order;
// each reports whether the line was of its kind. A line of none is other.
var patchSetSteps = []func(ps *patchSetParser, line string) (bool, error){
	(*patchSetParser).gitHeader,
	(*patchSetParser).newFile,
	(*patchSetParser).deletedFile,
	(*patchSetParser).sourceHeader,
	(*patchSetParser).targetHeader,
	(*patchSetParser).hunk,
	(*patchSetParser).noNewline,
	(*patchSetParser).blankLine,
}

func (ps *patchSetParser) gitHeader(line string) (bool, error) {
	src, tgt, ok := gitHeader(line)
	if !ok {
		return false, nil
	}
	ps.patchInfo = true
	ps.sourceFile = src
	ps.files = append(ps.files, patchedFile{source: src, target: tgt})
	ps.cur = len(ps.files) - 1
	return true, nil
}

func (ps *patchSetParser) newFile(line string) (bool, error) {
	if !isModeLine(line, "new file mode ") {
		return false, nil
	}
	if ps.cur < 0 || !ps.patchInfo {
		return false, fmt.Errorf("test_patch line %d: unexpected new file found", ps.r.no)
	}
	ps.files[ps.cur].source = devNull
	return true, nil
}

func (ps *patchSetParser) deletedFile(line string) (bool, error) {
	if !isModeLine(line, "deleted file mode ") {
		return false, nil
	}
	if ps.cur < 0 || !ps.patchInfo {
		return false, fmt.Errorf("test_patch line %d: unexpected deleted file found", ps.r.no)
	}
	ps.files[ps.cur].target = devNull
	return true, nil
}

func (ps *patchSetParser) sourceHeader(line string) (bool, error) {
	rest, ok := strings.CutPrefix(line, "--- ")
	if !ok {
		return false, nil
	}
	name, ok := fileName(rest)
	if !ok {
		return false, nil
	}
	ps.sourceFile = name
	if ps.cur >= 0 && ps.files[ps.cur].source != name {
		ps.cur = -1
	}
	return true, nil
}

func (ps *patchSetParser) targetHeader(line string) (bool, error) {
	rest, ok := strings.CutPrefix(line, "+++ ")
	if !ok {
		return false, nil
	}
	name, ok := fileName(rest)
	if !ok {
		return false, nil
	}
	if ps.cur >= 0 && ps.files[ps.cur].target != name {
		return false, fmt.Errorf("test_patch line %d: target without source: %q", ps.r.no, strings.TrimSuffix(line, "\n"))
	}
	if ps.cur < 0 {
		ps.files = append(ps.files, patchedFile{source: ps.sourceFile, target: name})
		ps.cur = len(ps.files) - 1
		ps.patchInfo = false
	}
	return true, nil
}

func (ps *patchSetParser) hunk(line string) (bool, error) {
	ss, sl, ts, tl, ok := hunkHeader(line)
	if !ok {
		return false, nil
	}
	ps.patchInfo = false
	if ps.cur < 0 {
		return false, fmt.Errorf("test_patch line %d: unexpected hunk found", ps.r.no)
	}
	if err := skipHunk(ps.r, ss, sl, ts, tl); err != nil {
		return false, err
	}
	ps.files[ps.cur].hunks++
	return true, nil
}

func (ps *patchSetParser) noNewline(line string) (bool, error) {
	if !strings.HasPrefix(line, `\ No newline at end of file`) {
		return false, nil
	}
	if ps.cur < 0 || ps.files[ps.cur].hunks == 0 {
		return false, fmt.Errorf("test_patch line %d: unexpected no-newline marker", ps.r.no)
	}
	return true, nil
}

func (ps *patchSetParser) blankLine(line string) (bool, error) {
	if line != "\n" || ps.cur < 0 {
		return false, nil
	}
	if ps.files[ps.cur].hunks == 0 {
		return false, fmt.Errorf("test_patch line %d: unexpected trailing newline character", ps.r.no)
	}
	return true, nil
}

// other is a line of no kind patchSetSteps know: it ends the current file's
// patch info; a binary-files line adds a file.
func (ps *patchSetParser) other(line string) {
	if !ps.patchInfo {
		ps.cur = -1
		ps.patchInfo = true
	}
	if src, tgt, ok := binaryHeader(line); ok {
		if ps.cur < 0 {
			ps.files = append(ps.files, patchedFile{source: src, target: tgt})
		}
		ps.sourceFile = src
		ps.patchInfo = false
		ps.cur = -1
	}
}

var errShortHunk = errors.New("hunk is shorter than expected")

func skipHunk(r *lineReader, ss, sl, ts, tl int) error {
	src, tgt := ss, ts
	srcEnd, tgtEnd := ss+sl, ts+tl
	for {
		line, ok := r.next()
		if !ok {
			break
		}
		var kind byte
		switch {
		case line != "" && strings.IndexByte("- +\\", line[0]) >= 0:
			kind = line[0]
		case line != "" && (line[0] == '\r' || line[0] == '\n'):
			kind = ' '
		default:
			return fmt.Errorf("test_patch line %d: hunk diff line expected: %q", r.no, strings.TrimSuffix(line, "\n"))
		}
		switch kind {
		case '+':
			tgt++
		case '-':
			src++
		case ' ':
			src++
			tgt++
		}
		if src > srcEnd || tgt > tgtEnd {
			return fmt.Errorf("test_patch line %d: hunk is longer than expected", r.no)
		}
		if src == srcEnd && tgt == tgtEnd {
			break
		}
	}
	if src < srcEnd || tgt < tgtEnd {
		return fmt.Errorf("test_patch line %d: %w", r.no, errShortHunk)
	}
	return nil
}

// testDirectives ports get_test_directives: every `diff --git a/.* b/(.*)`
// capture (re.findall semantics: greedy, so the last " b/" of the line),
// minus paths ending in a NON_TEST_EXTS entry; for django the module form.
func testDirectives(repo, testPatch string, nonTestExts []string) []string {
	if repo == "swe-bench/humaneval" {
		return []string{"test.py"}
	}
	const marker = "diff --git a/"
	var out []string
	pos := 0
	for pos < len(testPatch) {
		i := strings.Index(testPatch[pos:], marker)
		if i < 0 {
			break
		}
		p := pos + i
		body := p + len(marker)
		e := strings.IndexByte(testPatch[body:], '\n')
		if e < 0 {
			e = len(testPatch)
		} else {
			e += body
		}
		j := strings.LastIndex(testPatch[body:e], " b/")
		if j < 0 {
			pos = p + 1
			continue
		}
		d := testPatch[body+j+3 : e]
		pos = e
		skip := false
		for _, ext := range nonTestExts {
			if strings.HasSuffix(d, ext) {
				skip = true
				break
			}
		}
		if skip {
			continue
		}
		if repo == "django/django" {
			d = strings.TrimSuffix(d, ".py")
			d = strings.TrimPrefix(d, "tests/")
			d = strings.ReplaceAll(d, "/", ".")
		}
		out = append(out, d)
	}
	return out
}
