package core

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// MaxLine is the longest record line the codec reads (1 MiB); a longer line
// is an error naming the line, never a reason to grow memory without bound.
const MaxLine = 1 << 20

// LineError is a record that could not be read: the file, the 1-based line
// and, when the JSON was well-formed, the field.
type LineError struct {
	File  string
	Line  int
	Field string // empty when the line is not a JSON object of the right shape
	Msg   string
	// Torn is set for a last line with no newline that does not parse:
	// what a process killed mid-write leaves behind.
	Torn bool
}

func (e *LineError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Decode reads JSON-lines records from r (name is the file name used in
// errors). Unknown fields are errors, and every record is validated. It
// returns every good record in file order and, joined, one *LineError per bad
// line, so a caller can go on with the good records and still fail at the
// end. Blank lines are skipped.
//
// At most MaxFileBytes are read: past that, reading stops with an error
// wrapping ErrFileTooLarge.
func Decode(r io.Reader, name string) ([]Image, error) {
	br := bufio.NewReaderSize(&cappedReader{r: r, left: MaxFileBytes}, 64<<10)
	var (
		out  []Image
		errs []error
		line int
	)
	for {
		b, err := readLine(br)
		if len(b) == 0 && errors.Is(err, io.EOF) {
			break
		}
		line++
		if errors.Is(err, errLineTooLong) {
			errs = append(errs, &LineError{File: name, Line: line, Msg: fmt.Sprintf("line longer than %d bytes", MaxLine)})
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, fmt.Errorf("reading %s: %w", name, err))
			break
		}
		complete := err == nil // ended with a newline
		if t := bytes.TrimSpace(b); len(t) > 0 {
			im, lerr := decodeLine(t)
			if lerr != nil {
				lerr.File, lerr.Line = name, line
				lerr.Torn = !complete && lerr.Field == ""
				errs = append(errs, lerr)
			} else {
				out = append(out, im)
			}
		}
		if !complete {
			break
		}
	}
	return out, errors.Join(errs...)
}

var errLineTooLong = errors.New("line too long")

// TornWarning is the one warning every reader gives for a dropped torn
// last line.
func TornWarning(le *LineError) string {
	return fmt.Sprintf("warning: %s:%d: dropped a torn last line (a run killed while writing it; what it recorded is done again): %s", le.File, le.Line, le.Msg)
}

// DecodeRecords is ReadRecords for a reader (name is the file name in
// errors and warnings).
func DecodeRecords(r io.Reader, name string, warn io.Writer) ([]Image, error) {
	recs, derr := Decode(r, name)
	lines, err := LineErrors(derr)
	if err != nil {
		return recs, derr
	}
	var damaged []error
	for _, le := range lines {
		if le.Torn {
			if warn != nil {
				fmt.Fprintln(warn, TornWarning(le))
			}
			continue
		}
		damaged = append(damaged, le)
	}
	return recs, errors.Join(damaged...)
}

// readLine returns the next line without its newline; err is nil when the
// line ended with a newline, io.EOF at the end of the input.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxLine+1 {
			// Skip the rest of the line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

func decodeLine(b []byte) (Image, *LineError) {
	var im Image
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&im); err != nil {
		var pe *PlatformError
		if errors.As(err, &pe) {
			return Image{}, &LineError{Field: "platform", Msg: pe.Error()}
		}
		return Image{}, &LineError{Msg: "not a record: " + err.Error()}
	}
	if dec.More() {
		return Image{}, &LineError{Msg: "not a record: more than one JSON value on the line"}
	}
	if err := im.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return Image{}, &LineError{Field: fe.Field, Msg: fe.Msg}
		}
		return Image{}, &LineError{Msg: err.Error()}
	}
	return im, nil
}

// ReadFile is ReadRecords with no warning written.
func ReadFile(path string) ([]Image, error) { return ReadRecords(path, nil) }

// ReadRecords is the one reader of record files: the build metadata file,
// the publish ledger, verify's and sizes' metadata files and the nightly's
// shard files are all read through it (OpenLog too), so every command sees
// the same records in a file. It returns every good record in file order. A
// torn last line (no newline and not a record: what a process killed while
// appending leaves) is dropped, with a warning to warn (nil: none); a last
// line without a newline that is a whole record is kept. A damaged line
// anywhere else is an error (joined *LineError values, see LineErrors),
// returned with the good records. Relative OCILayout paths are made
// absolute against the file's directory.
func ReadRecords(path string, warn io.Writer) ([]Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading records: %w", err)
	}
	defer f.Close()
	return readRecords(f, path, warn)
}

// readRecords is ReadRecords' decoding of the opened file r.
func readRecords(r io.Reader, path string, warn io.Writer) ([]Image, error) {
	recs, err := DecodeRecords(r, path, warn)
	dir := filepath.Dir(path)
	for i := range recs {
		if recs[i].OCILayout != "" && !filepath.IsAbs(recs[i].OCILayout) {
			recs[i].OCILayout = filepath.Join(dir, recs[i].OCILayout)
		}
	}
	return recs, err
}

// Marshal encodes one validated record as a JSON line (with the newline).
func Marshal(im Image) ([]byte, error) {
	if err := im.Validate(); err != nil {
		return nil, fmt.Errorf("record %s: %w", im.ID(), err)
	}
	b, err := json.Marshal(im)
	if err != nil {
		return nil, fmt.Errorf("encoding record %s: %w", im.ID(), err)
	}
	return append(b, '\n'), nil
}

// Encode writes records as JSON lines, in the order given.
func Encode(w io.Writer, recs []Image) error {
	bw := bufio.NewWriter(w)
	for _, im := range recs {
		b, err := Marshal(im)
		if err != nil {
			return err
		}
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("writing records: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing records: %w", err)
	}
	return nil
}

// WriteFile replaces path with recs, atomically (a temporary file in the
// same directory, renamed over path), so a reader never sees half a file.
func WriteFile(path string, recs []Image) error {
	return WriteAtomic(path, 0o644, func(w io.Writer) error {
		if err := Encode(w, recs); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	})
}

// ErrInUse is returned by OpenLog when another process holds the file.
var ErrInUse = errors.New("in use by another process")

// Log is a record file opened for appending by one writer: the metadata
// file a build appends to as nodes finish, or the publish ledger. It holds an
// exclusive lock (flock) on the file while open, so a second writer fails at
// once with ErrInUse instead of interleaving lines; every record is one
// write(2) of one whole line with O_APPEND. Safe for concurrent use.
type Log struct {
	path string
	mu   sync.Mutex
	f    *os.File
	torn *LineError
}

// Torn is the torn last line OpenLog dropped from the file (nil when there
// was none), for the warning ReadRecords writes.
func (l *Log) Torn() *LineError { return l.torn }

// OpenLog is OpenLogContext with a context that is never done.
func OpenLog(path string) (log *Log, recs []Image, damaged []*LineError, err error) {
	return OpenLogContext(context.Background(), path)
}

// OpenLogContext locks path (creating it if needed), reads the records
// already in it as ReadRecords does, drops a torn last line (a kill
// mid-write) from the file and opens it for appending.
// Damaged lines elsewhere are returned as *LineError values in damaged, not
// as an error: a log is a record of work done, so a caller can skip those
// lines and re-check what they were about.
//
// The file is checked before a byte of it is read (CheckLogFile): a log is
// locked, appended to and truncated in place, so it must be a regular file
// (not /dev/zero, a FIFO or a device), and no larger than MaxFileBytes.
// Reading stops when ctx is done (a SIGTERM).
func OpenLogContext(ctx context.Context, path string) (log *Log, recs []Image, damaged []*LineError, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := CheckLogFile(f); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	if err := Lock(f); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	recs, derr := Decode(ctxReader{ctx: ctx, r: f}, path)
	if cerr := ctx.Err(); cerr != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("reading %s: %w", path, cerr)
	}
	lines, err := LineErrors(derr)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	var tornLine *LineError
	for _, le := range lines {
		if le.Torn {
			tornLine = le
			continue
		}
		damaged = append(damaged, le)
	}
	switch {
	case tornLine != nil:
		if err := dropTail(f); err != nil {
			f.Close()
			return nil, nil, nil, fmt.Errorf("%s: dropping a torn last line: %w", path, err)
		}
	case !endsWithNewline(f):
		// A whole record without its newline: kept (as ReadRecords keeps
		// it), and terminated so the next record starts a line.
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, nil, nil, fmt.Errorf("%s: ending its last line: %w", path, err)
		}
	}
	return &Log{path: path, f: f, torn: tornLine}, recs, damaged, nil
}

// ErrNotRegular is wrapped by CheckLogFile's error for a log that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// CheckLogFile checks an open log (a file of records that is locked,
// appended to and truncated in place: the publish ledger) before any of it
// is read: a regular file, at most MaxFileBytes long. /dev/zero, a FIFO or
// a device would be read for ever or block; a larger file (a sparse one
// included) is refused by its size.
func CheckLogFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w but %s: a log is locked, appended to and truncated in place", f.Name(), ErrNotRegular, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileBytes {
		return fmt.Errorf("%s: %d bytes, more than %d: %w", f.Name(), fi.Size(), int64(MaxFileBytes), ErrFileTooLarge)
	}
	return nil
}

// fileKind names what a file that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "a file of mode " + m.Type().String()
}

// Lock takes the exclusive lock of a file of records (OpenLog's) without
// waiting: a file another process holds is ErrInUse.
func Lock(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s: %w (another swebuild run is writing to it; wait for it to finish or give another file)", f.Name(), ErrInUse)
		}
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}

// LineErrors splits what Decode returned into its line errors; any other
// error (a read error) is returned as err.
func LineErrors(derr error) (lines []*LineError, err error) {
	errs := []error{derr}
	if j, ok := derr.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if e == nil {
			continue
		}
		var le *LineError
		if !errors.As(e, &le) {
			return lines, e
		}
		lines = append(lines, le)
	}
	return lines, nil
}

func endsWithNewline(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return true
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()-1); err != nil {
		return true
	}
	return b[0] == '\n'
}

// dropTail truncates f after its last newline.
func dropTail(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	for end := size; end > 0; {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}

// Append validates im and writes it as one line.
func (l *Log) Append(im Image) error {
	b, err := Marshal(im)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("appending to %s: closed", l.path)
	}
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("appending to %s: %w", l.path, err)
	}
	return nil
}

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Close syncs the file and releases the lock.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	serr := l.f.Sync()
	cerr := l.f.Close()
	l.f = nil
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("closing %s: %w", l.path, err)
	}
	return nil
}
