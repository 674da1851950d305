// Package spectest holds test helpers shared by builder/spec, builder/render,
// builder/plan and pins: locating the shared reference data and reading its
// dataset files.
package spectest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// SharedDir returns the swebench-reference folder: $SWEBUILD_SHARED, else
// ../shared/swebench-reference beside the module root. When it is missing the
// test is skipped, or fails if $CI is set.
func SharedDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("SWEBUILD_SHARED")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			tb.Fatalf("finding module root: %v", err)
		}
		dir = filepath.Join(root, "..", "shared", "swebench-reference")
	}
	if _, err := os.Stat(filepath.Join(dir, "upstream-v4.1.0")); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("shared reference data missing at %s: %v", dir, err)
		}
		tb.Skipf("shared reference data missing at %s (set SWEBUILD_SHARED)", dir)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

type record struct {
	core.Instance
	F2P json.RawMessage `json:"FAIL_TO_PASS"`
	P2P json.RawMessage `json:"PASS_TO_PASS"`
}

func decodeList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = json.RawMessage(s)
	}
	var out []string
	err := json.Unmarshal(raw, &out)
	return out, err
}

// ReadJSONL reads a SWE-bench JSONL file (FAIL_TO_PASS/PASS_TO_PASS as JSON
// strings or arrays). A minimal reader for tests, independent of package
// dataset.
func ReadJSONL(path string) ([]core.Instance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []core.Instance
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		inst := r.Instance
		if inst.FailToPass, err = decodeList(r.F2P); err != nil {
			return nil, fmt.Errorf("%s:%d: FAIL_TO_PASS: %w", path, line, err)
		}
		if inst.PassToPass, err = decodeList(r.P2P); err != nil {
			return nil, fmt.Errorf("%s:%d: PASS_TO_PASS: %w", path, line, err)
		}
		inst.Source = fmt.Sprintf("%s:%d", path, line)
		out = append(out, inst)
	}
	return out, sc.Err()
}

// PythonSplits are the dataset files upstream-v4.1.0 was generated from, in
// generation order.
func PythonSplits() []string {
	return []string{"SWE-bench_Verified/test", "SWE-bench_Lite/test", "SWE-bench_Lite/dev", "SWE-bench/dev"}
}

// Records loads the given splits ("SWE-bench_Verified/test", ...) and indexes
// them by split then instance id.
func Records(tb testing.TB, shared string, splits ...string) map[string]map[string]*core.Instance {
	tb.Helper()
	out := map[string]map[string]*core.Instance{}
	for _, sp := range splits {
		insts, err := ReadJSONL(filepath.Join(shared, "datasets", sp+".jsonl"))
		if err != nil {
			tb.Fatalf("reading split %s: %v", sp, err)
		}
		m := make(map[string]*core.Instance, len(insts))
		for i := range insts {
			m[insts[i].InstanceID] = &insts[i]
		}
		out[sp] = m
	}
	return out
}
