package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A log must be a regular file of at most MaxFileBytes: anything else is
// refused before a byte is read, the error naming the file and what it is.
func TestCheckLogFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse.jsonl")
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else {
		if err := f.Truncate(MaxFileBytes + 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, tc := range []struct {
		name, path string
		open       func(string) (*os.File, error)
		is         error
		want       string
	}{
		{"FIFO", fifo, func(p string) (*os.File, error) { return os.OpenFile(p, os.O_RDWR, 0) }, ErrNotRegular, "not a regular file but a FIFO"},
		{"directory", dir, os.Open, ErrNotRegular, "not a regular file but a directory"},
		{"character device", "/dev/null", os.Open, ErrNotRegular, "not a regular file but a character device"},
		{"sparse file over the limit", sparse, os.Open, ErrFileTooLarge, "1073741825 bytes, more than 1073741824"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.open(tc.path)
			if err != nil {
				t.Skipf("opening %s: %v", tc.path, err)
			}
			defer f.Close()
			err = CheckLogFile(f)
			if !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckLogFile(%s) = %v; want %v naming the file, saying %q", tc.path, err, tc.is, tc.want)
			}
		})
	}
	// OpenLog refuses them the same way, and leaves the sparse file alone.
	for _, p := range []string{fifo, sparse} {
		if _, _, _, err := OpenLog(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("OpenLog(%s): %v", p, err)
		}
	}
	if st, _ := os.Stat(sparse); st.Size() != MaxFileBytes+1 {
		t.Errorf("OpenLog changed the refused file's size to %d", st.Size())
	}
	if _, _, _, err := OpenLog(filepath.Join(dir, "no", "such", "dir", "l.jsonl")); err == nil || !strings.Contains(err.Error(), "opening ") {
		t.Errorf("OpenLog in a missing directory: %v", err)
	}
}

func TestLogLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	a, _ := Marshal(built("a", AMD64))
	// A whole record without its newline: kept, and the newline added so
	// the next record starts a line.
	if err := os.WriteFile(path, a[:len(a)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	l, recs, damaged, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || len(damaged) != 0 || l.Torn() != nil || l.Path() != path {
		t.Fatalf("recs %d, damaged %v, torn %v, path %q", len(recs), damaged, l.Torn(), l.Path())
	}
	if err := l.Append(built("b", ARM64)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := l.Append(built("c", AMD64)); err == nil || err.Error() != "appending to "+path+": closed" {
		t.Errorf("Append after Close: %v", err)
	}
	got, err := ReadFile(path)
	if err != nil || len(got) != 2 || got[1].InstanceID != "b" {
		t.Fatalf("after appending: %+v, %v", got, err)
	}

	// A torn last line: dropped from the file, and Torn says which line.
	if err := os.WriteFile(path, append(append([]byte{}, a...), a[:10]...), 0o644); err != nil {
		t.Fatal(err)
	}
	l, recs, _, err = OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || l.Torn() == nil || l.Torn().Line != 2 {
		t.Errorf("torn tail: recs %d, Torn %v; want line 2", len(recs), l.Torn())
	}
	l.Close()
	if data, _ := os.ReadFile(path); string(data) != string(a) {
		t.Errorf("after dropping the torn line the file is %q, want the one whole record", data)
	}

	// A torn line that is the whole file (no newline anywhere): emptied.
	if err := os.WriteFile(path, a[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	l, recs, _, err = OpenLog(path)
	if err != nil || len(recs) != 0 || l.Torn() == nil {
		t.Fatalf("only a torn line: %v, %d records", err, len(recs))
	}
	l.Close()
	if st, _ := os.Stat(path); st.Size() != 0 {
		t.Errorf("only a torn line: %d bytes left", st.Size())
	}

	// Reading stops when the context is done.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := OpenLogContext(ctx, path); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "reading "+path) {
		t.Errorf("OpenLogContext with a done context: %v", err)
	}
}

func TestWriteAndEncodeErrors(t *testing.T) {
	bad := built("x", AMD64)
	bad.Ref = "r/x:latest"
	if _, err := Marshal(bad); err == nil || !strings.HasPrefix(err.Error(), "record instance x linux/amd64: ref: ") {
		t.Errorf("Marshal of an unpinned ref: %v", err)
	}
	path := filepath.Join(t.TempDir(), "meta.jsonl")
	if err := WriteFile(path, []Image{built("a", AMD64)}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []Image{built("b", AMD64), bad}); err == nil || !strings.Contains(err.Error(), "writing "+path) {
		t.Errorf("WriteFile with a bad record: %v", err)
	}
	if recs, err := ReadFile(path); err != nil || len(recs) != 1 || recs[0].InstanceID != "a" {
		t.Errorf("a failed WriteFile changed the file: %+v, %v", recs, err)
	}
	if err := WriteBytesAtomic(filepath.Join(path+".d", "x"), nil, 0o644); err == nil || !strings.Contains(err.Error(), "writing "+filepath.Join(path+".d", "x")) {
		t.Errorf("WriteBytesAtomic into a missing directory: %v", err)
	}
	if _, err := ReadFile(filepath.Join(path + ".none")); err == nil || !strings.Contains(err.Error(), "reading records") {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
}

func TestRecordHelpers(t *testing.T) {
	for _, tc := range []struct {
		im   Image
		id   string
		ok   bool
		name string
	}{
		{Image{Kind: KindInstance, InstanceID: "a__b-1", Platform: ARM64, Status: StatusBuilt}, "instance a__b-1 linux/arm64", true, "built instance"},
		{Image{Kind: KindIndex, InstanceID: "a__b-1", Status: StatusPublished}, "index a__b-1", true, "published index"},
		{Image{Kind: KindBlob, Ref: "h/r", Status: StatusFailed, Error: "x"}, "blob h/r", false, "failed blob"},
		{Image{Kind: KindEnv, Key: "sweb.env.py.x86_64.abc", Platform: AMD64, Status: StatusBuilt, Error: "warn"}, "env sweb.env.py.x86_64.abc linux/amd64", false, "built with an error"},
		{Image{Kind: KindBase, Key: "sweb.base.py.x86_64", Platform: AMD64, Status: StatusPublished}, "base sweb.base.py.x86_64 linux/amd64", true, "base"},
	} {
		if got := tc.im.ID(); got != tc.id {
			t.Errorf("%s: ID() = %q, want %q", tc.name, got, tc.id)
		}
		if got := tc.im.OK(); got != tc.ok {
			t.Errorf("%s: OK() = %v, want %v", tc.name, got, tc.ok)
		}
	}
	im := Image{Flaky: []Flake{{Test: "tests/test_x.py::test_y", Failed: 1, Runs: 3}}}
	if !im.IsFlaky() || (Image{}).IsFlaky() {
		t.Error("IsFlaky")
	}
	if s := im.Flaky[0].String(); s != "tests/test_x.py::test_y (failed 1/3)" {
		t.Errorf("Flake.String() = %q", s)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 800, time.FixedZone("CET", 3600))
	if s := Now(at); s != "2026-03-04T04:06:07.0000008Z" {
		t.Errorf("Now = %q, want RFC 3339 in UTC with nanoseconds", s)
	}
}

func TestInstanceHelpers(t *testing.T) {
	in := Instance{BaseCommit: "base"}
	if in.EnvSetupCommit() != "base" {
		t.Errorf("no environment_setup_commit: %q, want the base commit", in.EnvSetupCommit())
	}
	in.EnvironmentSetupCommit = "env"
	if in.EnvSetupCommit() != "env" {
		t.Errorf("EnvSetupCommit = %q, want env", in.EnvSetupCommit())
	}
	in.SetExtra("a", `1`)
	in.SetExtra("b", `"x"`)
	in.SetExtra("a", `[2]`)
	if len(in.Extra) != 2 || in.Extra[0] != (Column{"a", `[2]`}) || in.Extra[1] != (Column{"b", `"x"`}) {
		t.Errorf("Extra = %+v; want a replaced in place, b after it", in.Extra)
	}
}

func TestPlatformCompareAndHost(t *testing.T) {
	ps := []Platform{{}, AMD64, ARM64}
	for i, p := range ps {
		for j, q := range ps {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := p.Compare(q); got != want {
				t.Errorf("%q.Compare(%q) = %d, want %d", p, q, got, want)
			}
		}
	}
	h, err := HostPlatform()
	switch runtime.GOARCH {
	case "amd64":
		if err != nil || h != AMD64 {
			t.Errorf("HostPlatform on amd64 = %v, %v", h, err)
		}
	case "arm64":
		if err != nil || h != ARM64 {
			t.Errorf("HostPlatform on arm64 = %v, %v", h, err)
		}
	default:
		if err == nil {
			t.Errorf("HostPlatform on %s = %v, want an error", runtime.GOARCH, h)
		}
	}
}
