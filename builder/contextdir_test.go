package builder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

func TestCheckCopySources(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "problem_assets/0-x.png", "sub/b.sh"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, dockerfile string
		wantErr          []string // substrings; none: no error
	}{
		{"present file and dir, JSON form", "FROM scratch\nCOPY a.txt /a\nCOPY [\"problem_assets\", \"/problem_assets\"]\n", nil},
		{"leading slash and dot-dot stay in the context", "FROM scratch\nCOPY /sub/b.sh ../a.txt /x/\n", nil},
		{"glob with a match", "FROM scratch\nCOPY problem_assets/*.png /p/\n", nil},
		{"COPY --from and ADD of a URL read no context", "FROM scratch AS s\nFROM scratch\nCOPY --from=s /nothing /n\nADD https://example.com/x.tar /x\n", nil},
		{"heredoc COPY reads no context", "FROM scratch\nCOPY <<EOF /x\nhello\nEOF\n", nil},
		{"build argument is not checked", "FROM scratch\nARG F=gone\nCOPY $F /f\n", nil},
		{"missing directory", "FROM scratch\nRUN true\nCOPY [\"problem_assets2\", \"/problem_assets\"]\n", []string{`line 3: COPY source "problem_assets2" is not in the context directory`}},
		{"missing ADD source and glob without a match", "FROM scratch\nADD gone.tar /\nCOPY *.gif /g/\n", []string{`line 2: ADD source "gone.tar"`, `line 3: COPY source "*.gif" matches no file`}},
	}
	tests = append(tests, symlinkCases(t, dir)...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCopySources([]byte(tc.dockerfile), dir)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// symlinkCase is a COPY of one symbolic link (or a path through one) in a
// context directory, and whether BuildKit refuses it.
type symlinkCase struct {
	name, src string
	refused   bool
	wantErr   string // in the pre-check's error when refused
}

// symlinkCases makes symbolic links in dir (and files beside it, outside
// the context) and returns the COPY of each. Which ones BuildKit refuses
// is what buildctl with the Dockerfile frontend did (v0.34.2, 2026-12-03:
// "failed to compute cache key: ... not found" for each refused one), and
// what TestCopyPreCheckAgreesWithBuildKit checks on the stack: BuildKit
// follows links inside the context, an absolute target from its root.
func symlinkCases(t *testing.T, dir string) []struct {
	name, dockerfile string
	wantErr          []string
} {
	t.Helper()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, outside)
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-abs-out":    filepath.Join(outside, "secret.txt"),
		"link-rel-out":    filepath.Join(rel, "secret.txt"),
		"link-dangling":   "nothing-here",
		"link-dir-out":    outside,
		"link-in":         "a.txt",
		"link-abs-in":     "/a.txt",
		"link-dir-in":     "sub",
		"sub/link-parent": "../a.txt",
	} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	var out []struct {
		name, dockerfile string
		wantErr          []string
	}
	for _, c := range copySymlinkCases {
		var want []string
		if c.refused {
			want = []string{c.wantErr}
		}
		out = append(out, struct {
			name, dockerfile string
			wantErr          []string
		}{"symlink: " + c.name, "FROM scratch\nCOPY " + c.src + " /x\n", want})
	}
	return out
}

var copySymlinkCases = []symlinkCase{
	{"absolute target outside", "link-abs-out", true, `COPY source "link-abs-out" is a symbolic link, or under one (link-abs-out -> /`},
	{"relative target climbing out", "link-rel-out", true, `COPY source "link-rel-out" is a symbolic link, or under one (link-rel-out -> ../`},
	{"dangling", "link-dangling", true, `COPY source "link-dangling" is a symbolic link, or under one (link-dangling -> nothing-here)`},
	{"directory link outside", "link-dir-out/secret.txt", true, `COPY source "link-dir-out/secret.txt" is a symbolic link, or under one, whose target is not in the context directory`},
	{"glob matching a link outside", "link-abs-*", true, `COPY source "link-abs-*": its match "link-abs-out" is a symbolic link`},
	{"target inside", "link-in", false, ""},
	{"absolute target read from the context root", "link-abs-in", false, ""},
	{"directory link inside", "link-dir-in/b.sh", false, ""},
	{"relative target to the parent, inside", "sub/link-parent", false, ""},
}

func TestContextDirState(t *testing.T) {
	dir := t.TempDir()
	n := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-1",
		Dockerfile: []byte("FROM scratch\nCOPY [\"problem_assets\", \"/problem_assets\"]\n"), ContextDir: dir}
	_, err := contextState(n, map[string]fsutil.FS{})
	if err == nil || !strings.Contains(err.Error(), "task a__b-1: Dockerfile line 2: COPY source \"problem_assets\"") {
		t.Fatalf("missing source: got %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "problem_assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := map[string]fsutil.FS{}
	if _, err := contextState(n, mounts); err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 {
		t.Fatalf("got %d local mounts, want the one directory", len(mounts))
	}
}

func TestValidateContextDir(t *testing.T) {
	base := graph.Node{Key: "k:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-1", Dockerfile: []byte("FROM scratch\n")}
	rel := base
	rel.ContextDir = "tasks/a__b-1"
	if err := validateNode(&rel); err == nil || !strings.Contains(err.Error(), "context dir") {
		t.Errorf("relative dir: got %v", err)
	}
	both := base
	both.ContextDir = "/tmp"
	both.Context = map[string][]byte{"x": nil}
	if err := validateNode(&both); err == nil || !strings.Contains(err.Error(), "context dir") {
		t.Errorf("dir and files: got %v", err)
	}
	ok := base
	ok.ContextDir = "/tmp"
	if err := validateNode(&ok); err != nil {
		t.Errorf("absolute dir: got %v", err)
	}
}
