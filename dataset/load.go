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
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Known, when not nil, is the spec table: a record whose repo or version
	// it does not know is invalid. Leave nil for datasets whose repos are
	// outside the table (Multilingual, Multimodal).
	Known Known
}

// ErrHubDataset is returned (wrapped) for a HuggingFace dataset name such as
// "princeton-nlp/SWE-bench_Verified": downloading needs the network, which
// swebuild does not use for datasets. Download the split as JSONL or parquet
// and pass the file.
var ErrHubDataset = errors.New("HuggingFace dataset names are not supported offline")

// hubName matches "owner/name" without a file extension swebuild reads, and
// upstream's short aliases.
var hubName = regexp.MustCompile(`^(?:[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*|(?i:swe-bench|swebench|swe_bench|swe-bench-lite|swebench-lite|swe_bench_lite|swe-bench_lite|lite))$`)

// Load reads SWE-bench records from path: JSONL, a JSON array (told apart by
// the first non-space byte, '{' or '['), or parquet (by its "PAR1" magic).
// The file is read once.
//
// It returns the valid records in file order and, when any record (or the
// file) has problems, a *ValidationError listing all of them; the valid
// records are returned even then. Other errors (unreadable file, cancelled
// context) return no records.
func Load(ctx context.Context, path string, opts LoadOptions) ([]Instance, error) {
	data, err := readFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && hubName.MatchString(path) {
			return nil, fmt.Errorf("dataset %q: no such file, and it looks like a HuggingFace dataset name: %w; download the split as JSONL or parquet and pass the file path", path, ErrHubDataset)
		}
		return nil, fmt.Errorf("dataset: %w", err)
	}
	return decode(ctx, path, data, opts)
}

// decode parses data read from the file named name. It decodes in place:
// data belongs to decode, and the instances' strings share its memory.
func decode(ctx context.Context, name string, data []byte, opts LoadOptions) ([]Instance, error) {
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
func loadJSONL(ctx context.Context, file string, data []byte, start int, opts LoadOptions) ([]Instance, error) {
	return loadJSONLParts(ctx, file, data, start, opts, runtime.GOMAXPROCS(0))
}

// loadJSONLParts is loadJSONL with at most parts chunks.
func loadJSONLParts(ctx context.Context, file string, data []byte, start int, opts LoadOptions, parts int) ([]Instance, error) {
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
			chunks[i], errs[i] = decodeJSONLChunk(ctx, data[:bounds[i+1]], bounds[i])
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
}

// decodeJSONLChunk decodes the lines of buf[start:] (start is the start of
// the data, maybe after a byte order mark, or just after a newline). Strings
// are kept in place inside that range only.
func decodeJSONLChunk(ctx context.Context, buf []byte, start int) ([]jsonlLine, error) {
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
		out = append(out, l)
	}
}

// loadArray reads a JSON array of records. A syntax error ends the read
// (the array's structure is lost); records before it are kept. data is
// decoded in place.
func loadArray(ctx context.Context, file string, data []byte, start int, opts LoadOptions) ([]Instance, error) {
	v := newValidator(file, opts.Known, 0)
	d := newDecoder(data, start)
	fail := func(err error) ([]Instance, error) {
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
				if err := d.object(&r); err != nil {
					return fail(err)
				}
				v.add(&r, source, "line "+ln)
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
