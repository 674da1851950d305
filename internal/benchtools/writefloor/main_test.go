package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunWritesTheListedTree(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	if err := os.WriteFile(list, []byte("a/x86_64/eval.sh 5\na/x86_64/meta.json 0\nb/arm64/Dockerfile.env 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(list, out, 2); err != nil {
		t.Fatal(err)
	}
	for path, size := range map[string]int64{"a/x86_64/eval.sh": 5, "a/x86_64/meta.json": 0, "b/arm64/Dockerfile.env": 3} {
		fi, err := os.Stat(filepath.Join(out, path))
		if err != nil || fi.Size() != size {
			t.Errorf("%s: %v, size %v, want %d", path, err, fi, size)
		}
	}
}

func TestRunRejectsBadLines(t *testing.T) {
	for _, line := range []string{"nosize", "a -1", "/abs 3", "../up 3", "a/b x"} {
		dir := t.TempDir()
		list := filepath.Join(dir, "list")
		if err := os.WriteFile(list, []byte("ok 1\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := run(list, filepath.Join(dir, "out"), 1)
		if err == nil || !strings.Contains(err.Error(), list+":2:") {
			t.Errorf("%q: error %v, want one naming %s:2", line, err, list)
		}
	}
}
