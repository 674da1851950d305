package depstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// initWork lists the package-level variables of a file whose initializer
// compiles a regexp or parses a template outside a function literal: work
// every swebuild process pays at start-up, whatever command it runs (issue
// 27: our own regexps were 2-6 ms of each start-up, GODEBUG=inittrace=1).
// Wrapped in sync.OnceValue(func() ... { ... }) they are built on first use.
func initWork(fset *token.FileSet, f *ast.File) []string {
	var found []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, v := range s.(*ast.ValueSpec).Values {
				ast.Inspect(v, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.FuncLit:
						return false
					case *ast.SelectorExpr:
						if x, ok := n.X.(*ast.Ident); ok && (x.Name == "regexp" && strings.HasPrefix(n.Sel.Name, "MustCompile") ||
							x.Name == "template" && n.Sel.Name == "Must") {
							found = append(found, fset.Position(n.Pos()).String()+": "+x.Name+"."+n.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
	return found
}

func TestInitWorkFinds(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      int
	}{
		{"package-level regexp", "var re = regexp.MustCompile(`a+`)", 1},
		{"in a var block, in a slice", "var (\n\tx = 1\n\tres = []*regexp.Regexp{regexp.MustCompile(`a`), regexp.MustCompilePOSIX(`b`)}\n)", 2},
		{"package-level template", "var page = template.Must(template.New(`p`).Parse(`x`))", 1},
		{"lazy", "var re = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`a+`) })", 0},
		{"in a function", "func f() bool { return regexp.MustCompile(`a+`).MatchString(`a`) }", 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\n"+c.src+"\n", 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := initWork(fset, f); len(got) != c.want {
			t.Errorf("%s: found %q, want %d", c.name, got, c.want)
		}
	}
}

// TestNoInitWork: no package of ours (tests and testdata aside) compiles a
// regexp or parses a template at package init.
func TestNoInitWork(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || path != root && strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, w := range initWork(fset, f) {
			t.Errorf("%s at package init: wrap it in sync.OnceValue", w)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("parsed %d Go files under %s; the walk missed the module", files, root)
	}
}
