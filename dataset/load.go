package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"runtime"
	"strconv"
	"sync"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests/naming"
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Known, when not nil, is the spec table: a record whose repo or version
	// it does not know is invalid, unless the record carries its own
	// eval_script, log_parser and image (a v5 record: verified and graded
	// without the tables). Leave nil for datasets whose repos are outside
	// the table (Multilingual, Multimodal).
	Known Known
	// Limits bound what a file may make the loader read and hold; zero
	// fields take the defaults.
	Limits Limits
}

// Limits bound the input a dataset may make swebuild read and hold, so that
// a wrong path (/dev/zero, a disk image) or a hostile file gives an error
// instead of exhausting memory. The defaults are far above real datasets:
// the full SWE-bench test split is 2,294 records, Verified (500 records) is
// 9.5 MB of JSONL, and the largest record of every split in the shared
// reference data (Verified, Lite, dev, Multilingual, Multimodal, whose
// records carry image URLs, not images) is 296 KB.
type Limits struct {
	// MaxFileBytes caps a dataset file, and the decoded records of a
	// parquet file. Default DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxRecordBytes caps one record: a JSONL line, a JSON array element,
	// the values of a parquet row. Default DefaultMaxRecordBytes.
	MaxRecordBytes int64
	// MaxRows caps the rows of a parquet file, read from its footer before
	// any row. Default DefaultMaxRows.
	MaxRows int64
}

// Default limits (see Limits).
const (
	// DefaultMaxFileBytes, 1 GiB: 100 times Verified, over 20 times the
	// full test split at Verified's 19 KB a record; the loader holds the
	// file in memory once (records point into it).
	DefaultMaxFileBytes = 1 << 30
	// DefaultMaxRecordBytes, 16 MiB: 55 times the largest real record, and
	// the size of the largest message a BuildKit client sends by default,
	// which a record's patches (written into eval.sh) must fit in anyway.
	DefaultMaxRecordBytes = 16 << 20
	// DefaultMaxRows, 1,000,000: over 400 times the full test split.
	DefaultMaxRows = 1_000_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxRecordBytes <= 0 {
		l.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxRows
	}
	return l
}

// ErrTooLarge is wrapped by the error for a dataset file over
// Limits.MaxFileBytes.
var ErrTooLarge = errors.New("over the size limit")

// sizeString shows a byte count, with binary units for round sizes.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ErrHubDataset is returned (wrapped) by Load for a HuggingFace dataset name
// such as "princeton-nlp/SWE-bench_Verified" that is not a file: Load reads
// files only; Open with a hub client downloads names.
var ErrHubDataset = errors.New("a HuggingFace dataset name, not a file")

// hubName matches "owner/name" without a file extension swebuild reads, and
// upstream's short aliases.
var hubName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*|(?i:swe-bench|swebench|swe_bench|swe-bench-lite|swebench-lite|swe_bench_lite|swe-bench_lite|lite))$`)
})

// Load reads SWE-bench records from path: JSONL, a JSON array (told apart by
// the first non-space byte, '{' or '['), or parquet (by its "PAR1" magic).
// The file is read once.
//
// It returns the valid records in file order and, when any record (or the
// file) has problems, a *ValidationError listing all of them; the valid
// records are returned even then. Other errors (unreadable file, cancelled
// context) return no records.
func Load(ctx context.Context, path string, opts LoadOptions) ([]core.Instance, error) {
	return loadFile(ctx, path, path, opts)
}

// loadFile is Load of the file at path, naming it display in messages and
// record sources.
func loadFile(ctx context.Context, path, display string, opts LoadOptions) ([]core.Instance, error) {
	insts, err := loadOne(ctx, path, display, opts)
	return checkNames(display, insts, err)
}

// loadOne is loadFile without the image-name collision check (Open checks
// the records of all a split's files together).
func loadOne(ctx context.Context, path, display string, opts LoadOptions) ([]core.Instance, error) {
	opts.Limits = opts.Limits.withDefaults()
	data, err := readFile(ctx, path, opts.Limits.MaxFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && hubName().MatchString(path) && !isFileName(path) {
			return nil, fmt.Errorf("dataset %q: no such file, and it looks like a HuggingFace dataset name: %w", path, ErrHubDataset)
		}
		if errors.Is(err, ErrTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("dataset %s: %w", display, err)
		}
		return nil, fmt.Errorf("dataset: %w", err)
	}
	return decode(ctx, display, data, opts)
}

// checkNames drops every record whose instance id gets the same image names
// as an earlier record's (naming.Collisions, which manifests.Namer.Collisions
// is: ids differing only in case, or in "__" against "_1776_"; also one id in
// two files), reporting it with both ids and where they are. err is the
// loader's error so far.
func checkNames(file string, insts []core.Instance, err error) ([]core.Instance, error) {
	var verr *ValidationError
	if err != nil && !errors.As(err, &verr) {
		return insts, err
	}
	ids := make([]string, len(insts))
	for i := range insts {
		ids[i] = insts[i].InstanceID
	}
	collisions := naming.Collisions(ids, false)
	if len(collisions) == 0 {
		return insts, err
	}
	if verr == nil {
		verr = &ValidationError{File: file}
	}
	drop := make(map[int]bool, len(collisions))
	for _, c := range collisions {
		a, b := &insts[c.First], &insts[c.Second]
		msg := fmt.Sprintf("%s (this record) and %s (%s) get the same image names, sweb.eval.%s and sweb.eval.<arch>.%s; the record at %s is kept",
			quoteShort(b.InstanceID), quoteShort(a.InstanceID), a.Source, c.NameID, c.NameID, a.Source)
		if a.InstanceID == b.InstanceID {
			msg = fmt.Sprintf("%s is a duplicate of %s", quoteShort(b.InstanceID), a.Source)
		}
		verr.Problems = append(verr.Problems, Problem{Source: b.Source, Field: fieldNames[fInstanceID], Msg: msg, InstanceID: b.InstanceID})
		drop[c.Second] = true
	}
	kept := insts[:0:0]
	for i := range insts {
		if !drop[i] {
			kept = append(kept, insts[i])
		}
	}
	return kept, verr
}

// decode parses data read from the file named name. It decodes in place:
// data belongs to decode, and the instances' strings share its memory.
func decode(ctx context.Context, name string, data []byte, opts LoadOptions) ([]core.Instance, error) {
	opts.Limits = opts.Limits.withDefaults()
	display := name
	if bytes.HasPrefix(data, []byte("PAR1")) {
		return loadParquet(ctx, display, data, opts)
	}
	body := data
	if bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) { // UTF-8 byte order mark
		body = body[3:]
	}
	first := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(first) == 0:
		v := newValidator(display, opts.Known, 0)
		v.fileProblem(display, "", "no records: the file is empty")
		return v.result()
	case first[0] == '[':
		return loadArray(ctx, display, data, len(data)-len(body), opts)
	case first[0] == '{':
		return loadJSONL(ctx, display, data, len(data)-len(body), opts)
	default:
		line, col := lineCol(data, len(data)-len(first))
		v := newValidator(display, opts.Known, 0)
		v.fileProblem(fmt.Sprintf("%s:%d:%d", display, line, col), "",
			fmt.Sprintf("not a dataset: expected JSONL ('{'), a JSON array ('[') or parquet, found %s", quoteByte(first[0])))
		return v.result()
	}
}

// lineCol gives the 1-based line and column (in bytes) of offset off.
func lineCol(data []byte, off int) (line, col int) {
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = off - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// syntaxProblem turns a decoder error into a problem located at
// file:line:column; col0 is the offset of the error's line.
func syntaxProblem(v *validator, file string, line, lineStart int, err error) {
	var se *syntaxError
	if !errors.As(err, &se) {
		v.fileProblem(file, "", err.Error())
		return
	}
	field := ""
	if se.field >= 0 {
		field = fieldNames[se.field]
	}
	v.fileProblem(fmt.Sprintf("%s:%d:%d", file, line, se.off-lineStart+1), field, "malformed JSON: "+se.msg)
}

// loadJSONL reads one record per line; blank lines are skipped. A malformed
// line is reported and reading goes on at the next line. data is decoded in
// place, in one pass (no separate search for line ends). A large file is cut
// at line ends into one chunk per CPU, decoded concurrently; the records and
// problems are then validated in file order, so the result is the same as
// one sequential pass.
func loadJSONL(ctx context.Context, file string, data []byte, start int, opts LoadOptions) ([]core.Instance, error) {
	return loadJSONLParts(ctx, file, data, start, opts, runtime.GOMAXPROCS(0))
}

// loadJSONLParts is loadJSONL with at most parts chunks.
func loadJSONLParts(ctx context.Context, file string, data []byte, start int, opts LoadOptions, parts int) ([]core.Instance, error) {
	opts.Limits = opts.Limits.withDefaults()
	bounds := jsonlChunks(data, start, parts)
	// Lines before each chunk, counted before decoding: decoding in place
	// writes unescaped strings (with their newlines) over the data.
	linesBefore := make([]int, len(bounds)-1)
	for i := 1; i < len(linesBefore); i++ {
		linesBefore[i] = linesBefore[i-1] + bytes.Count(data[bounds[i-1]:bounds[i]], []byte{'\n'})
	}
	chunks := make([][]jsonlLine, len(bounds)-1)
	errs := make([]error, len(chunks))
	var wg sync.WaitGroup
	for i := range chunks {
		wg.Go(func() {
			chunks[i], errs[i] = decodeJSONLChunk(ctx, data[:bounds[i+1]], bounds[i], opts.Limits.MaxRecordBytes)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the context was cancelled
		}
	}
	lines := 0
	v := newValidator(file, opts.Known, 0)
	for i, chunk := range chunks {
		lines += len(chunk)
		for j := range chunk {
			l := &chunk[j]
			line := linesBefore[i] + l.line
			if l.err != nil {
				syntaxProblem(v, file, line, l.lineStart, l.err)
				continue
			}
			ln := strconv.Itoa(line)
			if l.size > opts.Limits.MaxRecordBytes {
				v.fileProblem(file+":"+ln, "", recordTooLarge(l.size, opts.Limits.MaxRecordBytes))
				continue
			}
			v.add(&l.rec, file+":"+ln, "line "+ln)
		}
	}
	if lines == 0 {
		v.fileProblem(file, "", "no records: the file has only blank lines")
	}
	return v.result()
}

// minChunk is the smallest JSONL chunk worth a goroutine.
const minChunk = 1 << 20

// jsonlChunks cuts data[start:] into at most n pieces ending at line ends
// and returns their bounds: piece i is data[b[i]:b[i+1]].
func jsonlChunks(data []byte, start, n int) []int {
	bounds := []int{start}
	size := len(data) - start
	n = min(n, size/minChunk)
	for i := 1; i < n; i++ {
		target := start + size*i/n
		if target <= bounds[len(bounds)-1] {
			continue
		}
		nl := bytes.IndexByte(data[target:], '\n')
		if nl < 0 {
			break
		}
		bounds = append(bounds, target+nl+1)
	}
	if bounds[len(bounds)-1] != len(data) {
		bounds = append(bounds, len(data))
	}
	return bounds
}

// jsonlLine is one non-blank line of a chunk: a decoded record or a syntax
// error. line counts from 1 at the chunk's first line.
type jsonlLine struct {
	rec       record
	err       error
	line      int
	lineStart int
	size      int64 // bytes of the line; its record is dropped when over the limit
}

// recordTooLarge is the problem of a record over Limits.MaxRecordBytes.
func recordTooLarge(size, limit int64) string {
	return fmt.Sprintf("the record is %d bytes, over the limit of %s a record", size, sizeString(limit))
}

// decodeJSONLChunk decodes the lines of buf[start:] (start is the start of
// the data, maybe after a byte order mark, or just after a newline). Strings
// are kept in place inside that range only.
func decodeJSONLChunk(ctx context.Context, buf []byte, start int, maxRecord int64) ([]jsonlLine, error) {
	var out []jsonlLine
	d := newDecoder(buf, start)
	d.lineMode = true
	if start > 0 && buf[start-1] == '\n' {
		d.lastNL = start - 1
	}
	for {
		d.skipBlank()
		if d.pos >= len(buf) {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l := jsonlLine{line: 1 + d.nl, lineStart: d.lastNL + 1}
		begin := d.pos
		var err error
		if c := buf[d.pos]; c != '{' {
			err = d.errorf(d.pos, "a JSONL line must hold one object, found %s", kindOf(c))
		} else {
			err = d.object(&l.rec)
		}
		if err == nil {
			err = d.endOfLine()
		}
		if err != nil {
			var se *syntaxError
			errors.As(err, &se)
			l.rec = record{}
			l.err = err
			out = append(out, l)
			d.skipLine(se.off)
			continue
		}
		if l.size = int64(d.pos - begin); l.size > maxRecord {
			l.rec = record{} // its strings may be huge: let them go
		}
		out = append(out, l)
	}
}

// loadArray reads a JSON array of records. A syntax error ends the read
// (the array's structure is lost); records before it are kept. data is
// decoded in place.
func loadArray(ctx context.Context, file string, data []byte, start int, opts LoadOptions) ([]core.Instance, error) {
	v := newValidator(file, opts.Known, 0)
	d := newDecoder(data, start)
	fail := func(err error) ([]core.Instance, error) {
		// Newlines only occur in whitespace, which the decoder counts.
		syntaxProblem(v, file, 1+d.nl, d.lastNL+1, err)
		return v.result()
	}
	d.peek()
	d.pos++ // '['
	var r record
	count := 0
	if d.peek() == ']' {
		d.pos++
	} else {
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			c := d.peek()
			ln := strconv.Itoa(1 + d.nl)
			source := file + ":" + ln
			count++
			if c != '{' {
				if err := d.skipValue(1); err != nil {
					return fail(err)
				}
				v.fileProblem(source, "", fmt.Sprintf("array element %d is %s, want an object", count-1, kindOf(c)))
			} else {
				r.reset()
				begin := d.pos
				if err := d.object(&r); err != nil {
					return fail(err)
				}
				if size := int64(d.pos - begin); size > opts.Limits.MaxRecordBytes {
					v.fileProblem(source, "", recordTooLarge(size, opts.Limits.MaxRecordBytes))
				} else {
					v.add(&r, source, "line "+ln)
				}
			}
			switch d.peek() {
			case ',':
				d.pos++
				continue
			case ']':
				d.pos++
			default:
				return fail(d.unexpected("',' or ']' after array element"))
			}
			break
		}
	}
	if d.peek() != 0 {
		return fail(d.unexpected("end of file after the array"))
	}
	if count == 0 {
		v.fileProblem(file, "", "no records: the array is empty")
	}
	return v.result()
}
