package ci

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadIDList reads instance ids, one per line; blank lines and lines starting
// with '#' are ignored. A repeated id is an error naming both lines.
func ReadIDList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading id list: %w", err)
	}
	defer f.Close()
	return parseIDList(f, path)
}

func parseIDList(r io.Reader, name string) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := map[string]int{}
	var ids []string
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if strings.ContainsAny(s, " \t,") {
			return nil, fmt.Errorf("%s:%d: instance id %q contains a space or comma", name, line, s)
		}
		if prev, ok := first[s]; ok {
			return nil, fmt.Errorf("%s:%d: instance id %q repeats line %d", name, line, s, prev)
		}
		first[s] = line
		ids = append(ids, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return ids, nil
}

// SplitIDs parses the comma-separated ids of a matrix job.
func SplitIDs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ReadDatasetIDs returns the instance_id of every record of a JSONL file or a
// JSON array file, in file order. Errors name the file, line and field.
//
// Local adapter: only the ids are needed here, so ci does not wait for the
// dataset loader; parquet and Hugging Face names are the dataset package's
// job (use --ids with such datasets).
func ReadDatasetIDs(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading dataset: %w", err)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	var recs []idRecord
	if len(trimmed) > 0 && trimmed[0] == '[' {
		recs, err = jsonArrayIDs(data, path)
	} else {
		recs, err = jsonlIDs(data, path)
	}
	if err != nil {
		return nil, err
	}
	first := map[string]int{}
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if r.id == "" {
			return nil, fmt.Errorf("%s:%d: instance_id: missing or empty", path, r.line)
		}
		if prev, ok := first[r.id]; ok {
			return nil, fmt.Errorf("%s:%d: instance_id: %q repeats line %d", path, r.line, r.id, prev)
		}
		first[r.id] = r.line
		ids = append(ids, r.id)
	}
	return ids, nil
}

type idRecord struct {
	id   string
	line int
}

type idOnly struct {
	InstanceID *string `json:"instance_id"`
}

func jsonlIDs(data []byte, path string) ([]idRecord, error) {
	var out []idRecord
	line := 0
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		var rec idOnly
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		id := ""
		if rec.InstanceID != nil {
			id = *rec.InstanceID
		}
		out = append(out, idRecord{id: id, line: line})
	}
	return out, nil
}

func jsonArrayIDs(data []byte, path string) ([]idRecord, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:off], []byte("\n")) }
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s:1: %w", path, err)
	}
	var out []idRecord
	for dec.More() {
		start := dec.InputOffset()
		var rec idOnly
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, lineAt(start), err)
		}
		// The record starts after any separator whitespace/comma.
		rest := data[start:]
		skip := len(rest) - len(bytes.TrimLeft(rest, " \t\r\n,"))
		id := ""
		if rec.InstanceID != nil {
			id = *rec.InstanceID
		}
		out = append(out, idRecord{id: id, line: lineAt(start + int64(skip))})
	}
	return out, nil
}
