package grading

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLog(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte("PASSED a\r\nFAILED b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		path    string
		limit   int64
		want    string
		wantErr string
	}{
		{"whole file, bytes as they are", small, 0, "PASSED a\r\nFAILED b\n", ""},
		{"exactly at the limit", small, 19, "PASSED a\r\nFAILED b\n", ""},
		{"regular file over the limit", small, 18, "", "19 bytes, more than the limit of 18"},
		{"endless device stops at the limit", "/dev/zero", 1 << 20, "", "more than the limit of 1048576 bytes"},
		{"missing file", filepath.Join(dir, "nope.txt"), 0, "", "nope.txt: no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadLog(c.path, c.limit)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), c.path) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, c.path, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ReadLog = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
