package dataset

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// A hand-written JSON decoder for SWE-bench records.
//
// Why not encoding/json (v1): reflection, a validating pre-scan and a copy
// of every string make it cost more than everything else `swebuild render`
// does. Measured 2026-12-01 (2 vCPUs, load average 1.5-1.8, 21 interleaved
// rounds, `go run ./internal/benchtools/plainbench`, whose "json" variant
// is the cheapest encoding/json decoding of the same fields), median wall:
// `swebuild render --arch all --pins none` over Verified 0.303 s with
// encoding/json -> 0.199 s with this decoder (x1.54; CPU 0.507 -> 0.301 s,
// peak RSS 54 -> 39 MiB), over Multilingual+Multimodal 0.285 -> 0.180 s
// (x1.57), `swebuild plan` over Verified 0.293 -> 0.224 s (x1.30).
// encoding/json/jsontext (v2) is still behind GOEXPERIMENT=jsonv2 in Go
// 1.26. This decoder reads each byte once (8 at a time inside strings),
// unescapes kept strings in place (see decoder), and skips the fields the
// loader does not know without allocating. It accepts exactly
// RFC 8259 JSON (no NaN, comments or trailing commas); invalid UTF-8 is an
// error. FuzzRecordString checks it against encoding/json, and it gives the
// file:line:column messages the loader's tests ask for.

// syntaxError is malformed JSON at byte offset off of the decoder's input.
type syntaxError struct {
	off   int
	msg   string
	field int // the field whose value was being read, or -1
}

func (e *syntaxError) Error() string { return e.msg }

const maxDepth = 1000

// decoder reads JSON from buf[pos:].
//
// Strings the loader keeps are unescaped in place: their bytes are moved
// down to buf[w:] (unescaping never makes a string longer, and w never
// passes pos), so every kept string is a view of the one buffer read from
// the file and decoding allocates no copy of the 9.5 MB of patches. The
// caller must own buf and never change it afterwards (see keepString).
type decoder struct {
	buf     []byte
	pos     int
	w       int    // end of the kept, unescaped strings at the start of buf
	scratch []byte // unescaped keys and skipped strings
	field   int    // field whose value is being decoded, for error messages; -1 for none
	nl      int    // newlines skipped as whitespace so far
	lastNL  int    // offset of the last of them, -1 for none
	// lineMode (JSONL) makes a newline end the input for ws and peek.
	lineMode bool
}

func newDecoder(buf []byte, pos int) decoder {
	return decoder{buf: buf, pos: pos, w: pos, field: -1, lastNL: -1}
}

// attention marks the bytes that end the fast scan of a string's contents:
// the closing quote, a backslash and control characters (invalid raw).
var attention = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

func (d *decoder) errorf(off int, format string, args ...any) *syntaxError {
	return &syntaxError{off: off, msg: fmt.Sprintf(format, args...), field: d.field}
}

func (d *decoder) unexpected(what string) *syntaxError {
	if d.pos >= len(d.buf) {
		return d.errorf(d.pos, "unexpected end of input, want %s", what)
	}
	if d.lineMode && d.buf[d.pos] == '\n' {
		return d.errorf(d.pos, "unexpected end of line, want %s", what)
	}
	return d.errorf(d.pos, "invalid character %s, want %s", quoteByte(d.buf[d.pos]), what)
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (d *decoder) ws() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\r':
			d.pos++
		case '\n':
			if d.lineMode {
				return // a JSONL record ends at the end of its line
			}
			d.nl++
			d.lastNL = d.pos
			d.pos++
		default:
			return
		}
	}
}

// endOfLine consumes spaces up to and including the end of the line, or
// fails if something else follows on the line.
func (d *decoder) endOfLine() error {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\r':
			d.pos++
		case '\n':
			d.nl++
			d.lastNL = d.pos
			d.pos++
			return nil
		default:
			return d.unexpected("end of line after the record")
		}
	}
	return nil
}

// skipLine moves past the end of the line holding offset off.
func (d *decoder) skipLine(off int) {
	i := bytes.IndexByte(d.buf[off:], '\n')
	if i < 0 {
		d.pos = len(d.buf)
		return
	}
	d.pos = off + i + 1
	d.nl++
	d.lastNL = off + i
}

// peek returns the next non-space byte without consuming it, or 0 at the
// end (in lineMode, also at the end of the line).
func (d *decoder) peek() byte {
	d.ws()
	if d.pos < len(d.buf) && !(d.lineMode && d.buf[d.pos] == '\n') {
		return d.buf[d.pos]
	}
	return 0
}

// skipBlank skips spaces and newlines, counting the newlines.
func (d *decoder) skipBlank() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\r':
		case '\n':
			d.nl++
			d.lastNL = d.pos
		default:
			return
		}
		d.pos++
	}
}

// kindOf names, with an article, the JSON type starting with byte c.
func kindOf(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if c == '-' || '0' <= c && c <= '9' {
		return "a number"
	}
	return "an invalid value"
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainRun returns the end of the run of bytes from p on that need no
// attention in a string (see attention), testing 8 bytes at a time. The
// lowest flagged byte of a word is exact (a borrow only spreads upwards), so
// a hit gives the position without a byte-by-byte rescan.
func plainRun(b []byte, p int) int {
	for p+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[p : p+8])
		q := x ^ (ones * '"')
		s := x ^ (ones * '\\')
		// A byte of x is < 0x20, or a byte of q or s is zero.
		if m := ((x-ones*0x20)&^x | (q-ones)&^q | (s-ones)&^s) & highs; m != 0 {
			return p + bits.TrailingZeros64(m)>>3
		}
		p += 8
	}
	for p < len(b) && !attention[b[p]] {
		p++
	}
	return p
}

// str reads a string (d.pos at the opening quote) and returns its decoded
// contents. With keep, the contents are moved to buf[w:] and stay valid
// for good; without, the result aliases buf or scratch and is valid only
// until the next call.
func (d *decoder) str(keep bool) ([]byte, error) {
	b := d.buf
	start := d.pos + 1
	p := plainRun(b, start)
	if p < len(b) && b[p] == '"' && !keep {
		d.pos = p + 1
		if !utf8.Valid(b[start:p]) {
			return nil, d.invalidUTF8(start, p)
		}
		return b[start:p], nil
	}
	var out []byte
	if keep {
		// Appends below never outgrow the capacity: out writes at most as
		// many bytes as have been read, so the write stays behind p.
		out = b[d.w:d.w:len(b)]
	} else {
		out = d.scratch[:0]
	}
	out = append(out, b[start:p]...)
	for {
		if p >= len(b) {
			return nil, d.errorf(p, "unexpected end of input in string")
		}
		c := b[p]
		switch {
		case c == '"':
			d.pos = p + 1
			if keep {
				d.w += len(out)
			} else {
				d.scratch = out
			}
			if !utf8.Valid(out) {
				return nil, d.invalidUTF8(start, p)
			}
			return out, nil
		case c < 0x20:
			return nil, d.errorf(p, "invalid control character %s in string (must be escaped)", strconv.QuoteRune(rune(c)))
		case c == '\\':
			var err error
			if out, p, err = d.escape(out, p); err != nil {
				return nil, err
			}
		default:
			q := plainRun(b, p)
			out = append(out, b[p:q]...)
			p = q
		}
	}
}

// simpleEscapes are the bytes the one-letter escapes (\n, \") stand for, by
// the letter; 0 for letters that are not one.
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape appends what the escape at b[p] ('\\') stands for to out and gives
// the position after it.
func (d *decoder) escape(out []byte, p int) ([]byte, int, error) {
	b := d.buf
	if p+1 >= len(b) {
		return nil, p, d.errorf(p, "unexpected end of input in string escape")
	}
	e := b[p+1]
	if c := simpleEscapes[e]; c != 0 {
		return append(out, c), p + 2, nil
	}
	if e != 'u' {
		return nil, p, d.errorf(p, "invalid escape %s in string", strconv.Quote(string(b[p:p+2])))
	}
	r, ok := hex4(b, p+2)
	if !ok {
		return nil, p, d.errorf(p, "invalid \\u escape in string")
	}
	p += 6
	if utf16.IsSurrogate(r) {
		r2, ok2 := rune(0), false
		if p+1 < len(b) && b[p] == '\\' && b[p+1] == 'u' {
			r2, ok2 = hex4(b, p+2)
		}
		if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
			r = dec
			p += 6
		} else {
			r = utf8.RuneError // lone surrogate, as encoding/json does
		}
	}
	return utf8.AppendRune(out, r), p, nil
}

// keepString makes a string of bytes returned by str(true). It does not
// copy: the string shares the decoder's buffer, which nothing writes to
// once the string is made (later strings are kept further on, at w).
// Measured 2026-12-01 (plainbench variant "json-copy", string(b) here;
// 21 rounds, load 1.5-1.8), median wall of `swebuild render --arch all
// --pins none` over Verified 0.230 -> 0.199 s (x1.16, peak RSS 46 -> 39
// MiB), `swebuild plan` over Verified 0.255 -> 0.224 s (x1.11).
func keepString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (d *decoder) invalidUTF8(start, end int) *syntaxError {
	off := start
	for off < end {
		r, n := utf8.DecodeRune(d.buf[off:end])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return d.errorf(off, "invalid UTF-8 in string")
}

// skipString skips a string (d.pos at the opening quote), checking it.
func (d *decoder) skipString() error {
	_, err := d.str(false)
	return err
}

// number reads a number and returns its literal text.
func (d *decoder) number() ([]byte, error) {
	b := d.buf
	start := d.pos
	p := start
	if p < len(b) && b[p] == '-' {
		p++
	}
	switch {
	case p < len(b) && b[p] == '0':
		p++
	case p < len(b) && '1' <= b[p] && b[p] <= '9':
		p = skipDigits(b, p)
	default:
		d.pos = p
		return nil, d.unexpected("a digit")
	}
	if p < len(b) && b[p] == '.' {
		q := skipDigits(b, p+1)
		if q == p+1 {
			d.pos = q
			return nil, d.unexpected("a digit after the decimal point")
		}
		p = q
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		q := skipDigits(b, p)
		if p == q {
			d.pos = p
			return nil, d.unexpected("a digit in the exponent")
		}
		p = q
	}
	d.pos = p
	return b[start:p], nil
}

// skipDigits is the position of the first byte from p on that is not an
// ASCII digit.
func skipDigits(b []byte, p int) int {
	for p < len(b) && '0' <= b[p] && b[p] <= '9' {
		p++
	}
	return p
}

func (d *decoder) literal(word string) error {
	if len(d.buf)-d.pos >= len(word) && string(d.buf[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return nil
	}
	return d.unexpected("a value")
}

// skipValue skips any value, checking its syntax.
func (d *decoder) skipValue(depth int) error {
	if depth > maxDepth {
		return d.errorf(d.pos, "nested too deeply")
	}
	switch c := d.peek(); c {
	case '"':
		return d.skipString()
	case '{':
		if d.open('}') {
			return nil
		}
		for {
			if d.peek() != '"' {
				return d.unexpected("an object key")
			}
			if err := d.skipString(); err != nil {
				return err
			}
			if d.peek() != ':' {
				return d.unexpected("':' after object key")
			}
			d.pos++
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := d.afterElement('}'); err != nil || done {
				return err
			}
		}
	case '[':
		if d.open(']') {
			return nil
		}
		for {
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := d.afterElement(']'); err != nil || done {
				return err
			}
		}
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			_, err := d.number()
			return err
		}
		return d.unexpected("a value")
	}
}

// keepBytes moves b, a part of buf at or after w, to w and returns the
// moved bytes.
func (d *decoder) keepBytes(b []byte) []byte {
	out := append(d.buf[d.w:d.w:len(d.buf)], b...)
	d.w += len(out)
	return out
}

// stringList reads an array of strings (d.pos at '['), keeping the
// strings. A non-string element is reported through bad (the rest of the
// array is still checked for syntax) and makes the result nil.
func (d *decoder) stringList() (list []string, bad string, err error) {
	return d.stringListCap(0)
}

func (d *decoder) stringListCap(n int) (list []string, bad string, err error) {
	list = make([]string, 0, n)
	if d.open(']') {
		return list, "", nil
	}
	for i := 0; ; i++ {
		if c := d.peek(); c == '"' {
			s, err := d.str(bad == "")
			if err != nil {
				return nil, "", err
			}
			if bad == "" {
				list = append(list, keepString(s))
			}
		} else {
			if bad == "" {
				bad = fmt.Sprintf("element %d is %s, want a string", i, kindOf(c))
				list = nil
			}
			if err := d.skipValue(1); err != nil {
				return nil, "", err
			}
		}
		done, err := d.afterElement(']')
		if err != nil {
			return nil, "", err
		}
		if done {
			return list, bad, nil
		}
	}
}

// object decodes one record (d.pos at '{') into r.
func (d *decoder) object(r *record) error {
	d.field = -1
	if d.open('}') {
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.unexpected("an object key")
		}
		key, err := d.str(false)
		if err != nil {
			return err
		}
		f := fieldIndex(key)
		if d.peek() != ':' {
			return d.unexpected("':' after object key")
		}
		d.pos++
		d.field = f
		if f < 0 {
			err = d.otherColumn(r, key)
		} else {
			err = d.fieldValue(r, f)
		}
		if err != nil {
			return err
		}
		d.field = -1
		if done, err := d.afterElement('}'); err != nil || done {
			return err
		}
	}
}

// open steps past the '{' or '[' at d.pos; empty reports that end (its
// '}' or ']') follows at once, and steps past that too.
func (d *decoder) open(end byte) (empty bool) {
	d.pos++
	if d.peek() != end {
		return false
	}
	d.pos++
	return true
}

// afterElement reads what follows a value in an object (end '}') or an
// array (end ']'): a comma, or end, which ends it (done).
func (d *decoder) afterElement(end byte) (done bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return false, nil
	case end:
		d.pos++
		return true, nil
	}
	if end == '}' {
		return false, d.unexpected("',' or '}' after object value")
	}
	return false, d.unexpected("',' or ']' after array element")
}

// otherColumn keeps the value of a column the loader has no field for as
// its JSON text (core.Instance.Extra), so a record written out again loses
// nothing. key aliases the scratch buffer: it is copied.
func (d *decoder) otherColumn(r *record, key []byte) error {
	name := string(key)
	d.peek()
	start := d.pos
	if err := d.skipValue(1); err != nil {
		return err
	}
	r.inst.SetExtra(name, keepString(d.keepBytes(d.buf[start:d.pos])))
	return nil
}

// fieldValue decodes the value of a known field. A later occurrence of the
// same key replaces an earlier one, as in Python's json module.
func (d *decoder) fieldValue(r *record, f int) error {
	c := d.peek()
	r.seen[f] = true
	r.present[f] = false
	if c == 'n' {
		// null: treated as absent (required fields then fail validation).
		return d.literal("null")
	}
	switch f {
	case fFailToPass, fPassToPass:
		var list []string
		var bad string
		switch c {
		case '[':
			l, b, err := d.stringList()
			if err != nil {
				return err
			}
			list, bad = l, b
		case '"':
			w0 := d.w
			s, err := d.str(true)
			if err != nil {
				return err
			}
			var used int
			list, used, bad = listString(s)
			d.w = w0 + used
		default:
			if err := d.skipValue(1); err != nil {
				return err
			}
			bad = fmt.Sprintf("is %s, want an array of strings or a string holding a JSON array", kindOf(c))
		}
		if bad != "" {
			r.typeProblem(f, bad)
			return nil
		}
		setList(r, f, list)
		return nil
	case fImageAssets:
		if c == '{' {
			// Kept as the object's JSON text (decoded when rendering).
			start := d.pos
			if err := d.skipValue(1); err != nil {
				return err
			}
			setString(r, f, keepString(d.keepBytes(d.buf[start:d.pos])))
			return nil
		}
	case fVersion, fCreatedAt:
		if c == '-' || '0' <= c && c <= '9' {
			// A number keeps its literal text: 3.0 -> "3.0".
			lit, err := d.number()
			if err != nil {
				return err
			}
			setString(r, f, keepString(d.keepBytes(lit)))
			return nil
		}
	}
	if c != '"' {
		if err := d.skipValue(1); err != nil {
			return err
		}
		want := "a string"
		if f == fVersion || f == fCreatedAt {
			want = "a string or a number"
		}
		r.typeProblem(f, fmt.Sprintf("is %s, want %s", kindOf(c), want))
		return nil
	}
	s, err := d.str(true)
	if err != nil {
		return err
	}
	setString(r, f, keepString(s))
	return nil
}

// listString parses s, a string holding a JSON array of strings (the
// HuggingFace encoding of FAIL_TO_PASS / PASS_TO_PASS), in place: the
// caller must own s, and the list's strings share its first used bytes.
func listString(s []byte) (list []string, used int, bad string) {
	inner := newDecoder(s, 0)
	if inner.peek() != '[' {
		return nil, 0, fmt.Sprintf("string is not a JSON array of strings (it starts with %s)", quoteShort(string(s[:min(len(s), 20)])))
	}
	// Each element takes two quotes: size the list once.
	l, b, err := inner.stringListCap(bytes.Count(s, []byte{'"'}) / 2)
	if err == nil && inner.peek() != 0 {
		err = inner.unexpected("end of the JSON array")
	}
	switch {
	case err != nil:
		return nil, 0, fmt.Sprintf("string is not a JSON array of strings: %v at offset %d of the string", err, err.(*syntaxError).off)
	case b != "":
		return nil, 0, "string holds a JSON array whose " + b
	}
	return l, inner.w, ""
}

func setString(r *record, f int, s string) {
	in := &r.inst
	switch f {
	case fRepo:
		in.Repo = s
	case fInstanceID:
		in.InstanceID = s
	case fBaseCommit:
		in.BaseCommit = s
	case fPatch:
		in.Patch = s
	case fTestPatch:
		in.TestPatch = s
	case fProblemStatement:
		in.ProblemStatement = s
	case fHintsText:
		in.HintsText = s
	case fCreatedAt:
		in.CreatedAt = s
	case fVersion:
		in.Version = s
	case fEnvSetupCommit:
		in.EnvironmentSetupCommit = s
	case fImageAssets:
		in.ImageAssets = s
	case fEvalScript:
		in.EvalScript = s
	case fLogParser:
		in.LogParser = s
	case fEvalType:
		in.EvalType = s
	case fImage:
		in.Image = s
	}
	r.present[f] = true
}
