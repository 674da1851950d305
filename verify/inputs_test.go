package verify

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestInputFS(t *testing.T) {
	f := NewInputFS()
	if err := f.add("b", map[string]inputFile{"x": {data: []byte("bx"), mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if err := f.add("a", map[string]inputFile{"run.sh": {data: []byte("#!"), mode: 0o755}, "eval.sh": {data: []byte("e"), mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		id    string
		files map[string]inputFile
	}{{"a", nil}, {"..", nil}, {"c/d", nil}, {"c", map[string]inputFile{"../x": {}}}} {
		if err := f.add(bad.id, bad.files); err == nil {
			t.Errorf("add(%q, %v): no error", bad.id, bad.files)
		}
	}
	walk := func(target string, skip string) []string {
		var got []string
		err := f.Walk(context.Background(), target, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			got = append(got, p+" "+info.Mode().String())
			if p == skip {
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		target, skip string
		want         []string
	}{
		{"", "", []string{"a drwxr-xr-x", "a/eval.sh -rw-r--r--", "a/run.sh -rwxr-xr-x", "b drwxr-xr-x", "b/x -rw-r--r--"}},
		{"/", "a", []string{"a drwxr-xr-x", "b drwxr-xr-x", "b/x -rw-r--r--"}},
		{"", "a/eval.sh", []string{"a drwxr-xr-x", "a/eval.sh -rw-r--r--", "b drwxr-xr-x", "b/x -rw-r--r--"}},
		{"b", "", []string{"b drwxr-xr-x", "b/x -rw-r--r--"}},
		{"nope", "", nil},
	} {
		if got := walk(tc.target, tc.skip); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Walk(%q) skipping %q: %q, want %q", tc.target, tc.skip, got, tc.want)
		}
	}
	rc, err := f.Open("a/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rc); string(b) != "#!" {
		t.Errorf("a/run.sh holds %q", b)
	}
	f.remove("a")
	if _, err := f.Open("a/run.sh"); err == nil {
		t.Error("a/run.sh still there after remove")
	}
	if got := walk("", ""); len(got) != 2 {
		t.Errorf("after remove: %q", got)
	}
}

func TestJoinHeadTail(t *testing.T) {
	for _, tc := range []struct {
		name, head, tail string
		total            int64
		want             string
		omitted          int64
	}{
		{"cut at line ends", "l1\nl2\npart", "ial\nl8\nl9\n", 100, "l1\nl2\n[swebuild verify: 88 bytes of output left out here: it was 100 bytes; the first 6 and the last 6 are kept]\nl8\nl9\n", 88},
		{"one long line", "aaaa", "bbbb", 1000, "[swebuild verify: 1000 bytes of output left out here: it was 1000 bytes; the first 0 and the last 0 are kept]\n", 1000},
		{"UTF-8 kept whole", "é1\néé", "é\né2\n", 50, "é1\n[swebuild verify: 42 bytes of output left out here: it was 50 bytes; the first 4 and the last 4 are kept]\né2\n", 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, omitted := joinHeadTail([]byte(tc.head), []byte(tc.tail), tc.total)
			if got != tc.want || omitted != tc.omitted {
				t.Errorf("got %q, %d\nwant %q, %d", got, omitted, tc.want, tc.omitted)
			}
			if strings.Contains(got, ">>>>>") {
				t.Error("the note looks like an upstream marker")
			}
		})
	}
}

// TestOutputNames: every file the prepare script writes is one readOutputs
// reads, and nothing else is.
func TestOutputNames(t *testing.T) {
	script := prepareScript()
	var names []string
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\$out/([a-z][A-Za-z0-9_.$]*)`),
		regexp.MustCompile(`(?m)^\s*now ([a-z_]+)`),
		regexp.MustCompile(`(?m)^\s*capped ([A-Za-z0-9_.$]+)`),
	} {
		for _, m := range re.FindAllStringSubmatch(script, -1) {
			if !strings.HasPrefix(m[1], "$") {
				names = append(names, strings.ReplaceAll(m[1], "$i", "1"))
			}
		}
	}
	if len(names) < 15 {
		t.Fatalf("found only %d output names in the prepare script: %q", len(names), names)
	}
	for _, n := range names {
		if !wrapperOutput(n) && !cappedOutput(n) {
			t.Errorf("the prepare script writes %s, readOutputs does not read it", n)
		}
	}
	for _, n := range []string{"junk", "apply.x.rc", "test_output.txt", "test_rc", "diff_before.size", "leakage"} {
		if wrapperOutput(n) || cappedOutput(n) {
			t.Errorf("%s would be read", n)
		}
	}
}
