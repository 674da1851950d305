package verify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultMaxPredictionsBytes is the largest predictions file ReadPredictions
// reads: far above a real one (2,294 patches of SWE-bench's test split from
// one model are a few tens of MiB), far below what would exhaust memory.
const DefaultMaxPredictionsBytes = 512 << 20

// ReadPredictions reads an upstream predictions file of at most
// DefaultMaxPredictionsBytes: see ReadPredictionsMax.
func ReadPredictions(path string) (map[string]Prediction, error) {
	return ReadPredictionsMax(path, DefaultMaxPredictionsBytes)
}

// ReadPredictionsMax reads an upstream predictions file: JSON Lines, or a
// JSON array, of {instance_id, model_name_or_path, model_patch}. A file
// larger than maxBytes, or one that does not start like JSON (a device such
// as /dev/zero, a binary file), is an error before more than maxBytes are
// read. Errors name the file, line (entry, for an array) and field; the
// usable predictions are returned with the error.
func ReadPredictionsMax(path string, maxBytes int64) (map[string]Prediction, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading predictions: %w", err)
	}
	defer f.Close()
	tooBig := fmt.Errorf("%s: larger than the %d-byte limit of a predictions file", path, maxBytes)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxBytes {
		return nil, tooBig
	}
	// One byte more than the limit tells a file at the limit from a larger
	// one (or an endless stream): lr.N reaches 0 only then.
	lr := &io.LimitedReader{R: f, N: maxBytes + 1}
	br := bufio.NewReaderSize(lr, 64<<10)
	first, line, err := firstByte(br)
	if errors.Is(err, io.EOF) {
		return map[string]Prediction{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	switch {
	case first != '{' && first != '[':
		return nil, fmt.Errorf("%s:%d: not a predictions file: starts with byte %#02x, want a JSON object per line or a JSON array", path, line, first)
	}
	var raws []json.RawMessage
	var where []string
	if first == '[' {
		data, err := io.ReadAll(br)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if lr.N <= 0 {
			return nil, tooBig
		}
		if err := json.Unmarshal(bytes.TrimSpace(data), &raws); err != nil {
			return nil, fmt.Errorf("%s: parsing JSON array: %w", path, err)
		}
		for i := range raws {
			where = append(where, fmt.Sprintf("%s: entry %d", path, i+1))
		}
	} else {
		for lineNo := line; ; lineNo++ {
			b, err := br.ReadBytes('\n')
			if lr.N <= 0 {
				return nil, tooBig
			}
			if t := bytes.TrimSpace(b); len(t) > 0 {
				raws = append(raws, json.RawMessage(t))
				where = append(where, fmt.Sprintf("%s:%d", path, lineNo))
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", path, err)
			}
		}
	}
	out := map[string]Prediction{}
	var problems []string
	for i, raw := range raws {
		var p Prediction
		if err := json.Unmarshal(raw, &p); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where[i], err))
			continue
		}
		switch {
		case p.InstanceID == "":
			problems = append(problems, fmt.Sprintf("%s: instance_id: missing or empty", where[i]))
		case p.Model == "":
			problems = append(problems, fmt.Sprintf("%s: model_name_or_path: missing or empty", where[i]))
		default:
			if _, dup := out[p.InstanceID]; dup {
				problems = append(problems, fmt.Sprintf("%s: instance_id: %s appears twice", where[i], p.InstanceID))
				continue
			}
			out[p.InstanceID] = p
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("%d bad prediction(s):\n%s", len(problems), strings.Join(problems, "\n"))
	}
	return out, nil
}

// firstByte returns the first byte of br that is not JSON white space (0 at
// io.EOF at the end of the input) and the line it is on, leaving it unread.
func firstByte(br *bufio.Reader) (byte, int, error) {
	line := 1
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, line, err
		}
		switch b {
		case '\n':
			line++
			continue
		case ' ', '\t', '\r':
			continue
		}
		return b, line, br.UnreadByte()
	}
}
