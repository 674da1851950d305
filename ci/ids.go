package ci

import (
	"bufio"
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
