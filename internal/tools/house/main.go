// Command house prints the measures of the code's house that issue 27 asks
// for, so that a before and an after can be compared by anyone:
//
//	go run ./internal/tools/house [-json]
//
// What it measures (non-test Go files of this module only):
//   - the import graph of the module's packages: floors (the longest import
//     chain, a package with no module imports on floor 1), arrows (import
//     edges between module packages) and the arrows that point up against
//     the floors declared in docs/architecture.md's house table (when given
//     with -floors FILE);
//   - per named package, how many BuildKit, gRPC, parquet and net/http
//     packages it links (go list -deps);
//   - the packages and size of the swebuild binary's dependency set;
//   - cmd/swebuild's lines, and over the whole module the functions' worst
//     cyclomatic complexity (1 + each if, for, range, case, comm clause, &&,
//     ||) and the functions longer than 100 lines.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const module = "github.com/swebuild/swebuild"

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

type report struct {
	Packages     int                       `json:"packages"`
	Floors       int                       `json:"floors"`
	Arrows       int                       `json:"arrows"`
	Upward       []string                  `json:"upward_arrows"`
	FloorOf      map[string]int            `json:"floor_of"`
	Deps         map[string]map[string]int `json:"deps"`
	BinaryDeps   int                       `json:"swebuild_deps"`
	CmdLines     int                       `json:"cmd_swebuild_lines"`
	WorstComplex []fn                      `json:"worst_complexity"`
	Long         []fn                      `json:"functions_over_100_lines"`
}

type fn struct {
	Name       string `json:"name"`
	Lines      int    `json:"lines"`
	Complexity int    `json:"complexity"`
}

func main() {
	asJSON := flag.Bool("json", false, "print JSON")
	floorsFile := flag.String("floors", "", "a file of lines 'FLOOR PACKAGE' (package relative to the module) declaring the house; arrows that point to a higher floor are listed")
	flag.Parse()
	if err := run(*asJSON, *floorsFile); err != nil {
		fmt.Fprintln(os.Stderr, "house:", err)
		os.Exit(1)
	}
}

func list(args ...string) ([]pkg, error) {
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func short(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

func run(asJSON bool, floorsFile string) error {
	pkgs, err := list("./...")
	if err != nil {
		return err
	}
	r := report{FloorOf: map[string]int{}, Deps: map[string]map[string]int{}}
	edges := map[string][]string{}
	for _, p := range pkgs {
		if strings.Contains(p.ImportPath, "/internal/tools/") || strings.Contains(p.ImportPath, "/internal/benchtools/") {
			continue
		}
		r.Packages++
		for _, im := range p.Imports {
			if strings.HasPrefix(im, module+"/") {
				edges[short(p.ImportPath)] = append(edges[short(p.ImportPath)], short(im))
				r.Arrows++
			}
		}
		if _, ok := edges[short(p.ImportPath)]; !ok {
			edges[short(p.ImportPath)] = nil
		}
	}
	var floor func(string) int
	floor = func(p string) int {
		if f, ok := r.FloorOf[p]; ok {
			return f
		}
		f := 1
		for _, d := range edges[p] {
			if g := floor(d) + 1; g > f {
				f = g
			}
		}
		r.FloorOf[p] = f
		return f
	}
	for p := range edges {
		if f := floor(p); f > r.Floors {
			r.Floors = f
		}
	}
	if floorsFile != "" {
		declared, err := readFloors(floorsFile)
		if err != nil {
			return err
		}
		for p, ds := range edges {
			fp, ok := declared[p]
			if !ok {
				r.Upward = append(r.Upward, p+" (no declared floor)")
				continue
			}
			for _, d := range ds {
				if fd, ok := declared[d]; ok && fd > fp {
					r.Upward = append(r.Upward, fmt.Sprintf("%s (%d) -> %s (%d)", p, fp, d, fd))
				}
			}
		}
		sort.Strings(r.Upward)
	}
	for _, name := range []string{"publish", "ci", "sizes", "check", "drift", "grading", "builder/render", "registry", "verify", "cmd/swebuild"} {
		deps, err := exec.Command("go", "list", "-deps", module+"/"+name).Output()
		if err != nil {
			continue // the package may have moved
		}
		c := map[string]int{}
		for _, d := range strings.Fields(string(deps)) {
			c["all"]++
			switch {
			case strings.HasPrefix(d, "github.com/moby/buildkit"):
				c["buildkit"]++
			case strings.HasPrefix(d, "google.golang.org/grpc"):
				c["grpc"]++
			case strings.HasPrefix(d, "github.com/parquet-go"):
				c["parquet"]++
			case strings.HasPrefix(d, "go.opentelemetry.io"):
				c["otel"]++
			}
			if d == "net/http" {
				c["net/http"] = 1
			}
		}
		r.Deps[name] = c
	}
	r.BinaryDeps = r.Deps["cmd/swebuild"]["all"]
	fset := token.NewFileSet()
	var fns []fn
	for _, p := range pkgs {
		if strings.Contains(p.ImportPath, "/internal/") {
			continue
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			if short(p.ImportPath) == "cmd/swebuild" {
				n, err := lines(path)
				if err != nil {
					return err
				}
				r.CmdLines += n
			}
			file, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name := short(p.ImportPath) + "." + fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					name = short(p.ImportPath) + "." + recvName(fd.Recv.List[0].Type) + "." + fd.Name.Name
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				fns = append(fns, fn{Name: name, Lines: n, Complexity: complexity(fd)})
			}
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Complexity > fns[j].Complexity })
	r.WorstComplex = fns[:min(10, len(fns))]
	for _, f := range fns {
		if f.Lines > 100 {
			r.Long = append(r.Long, f)
		}
	}
	sort.Slice(r.Long, func(i, j int) bool { return r.Long[i].Lines > r.Long[j].Lines })
	if asJSON {
		e := json.NewEncoder(os.Stdout)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	fmt.Printf("packages %d, floors %d, arrows %d, upward arrows %d\n", r.Packages, r.Floors, r.Arrows, len(r.Upward))
	for _, u := range r.Upward {
		fmt.Println("  upward:", u)
	}
	byFloor := map[int][]string{}
	for p, f := range r.FloorOf {
		byFloor[f] = append(byFloor[f], p)
	}
	for f := 1; f <= r.Floors; f++ {
		sort.Strings(byFloor[f])
		fmt.Printf("  floor %d: %s\n", f, strings.Join(byFloor[f], " "))
	}
	fmt.Println("linked packages (all / buildkit / grpc / otel / parquet / net/http):")
	var names []string
	for n := range r.Deps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := r.Deps[n]
		fmt.Printf("  %-16s %4d %4d %4d %4d %4d %4d\n", n, c["all"], c["buildkit"], c["grpc"], c["otel"], c["parquet"], c["net/http"])
	}
	fmt.Printf("cmd/swebuild: %d lines\n", r.CmdLines)
	fmt.Println("worst complexity:")
	for _, f := range r.WorstComplex {
		fmt.Printf("  %3d %4d lines  %s\n", f.Complexity, f.Lines, f.Name)
	}
	fmt.Printf("functions over 100 lines: %d\n", len(r.Long))
	for _, f := range r.Long {
		fmt.Printf("  %4d lines  %s\n", f.Lines, f.Name)
	}
	return nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	}
	return "?"
}

// complexity is McCabe's number as gocyclo counts it.
func complexity(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return true
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

func lines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

func readFloors(path string) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var f int
		var p string
		if _, err := fmt.Sscanf(line, "%d %s", &f, &p); err != nil {
			return nil, fmt.Errorf("%s:%d: want 'FLOOR PACKAGE': %v", path, i+1, err)
		}
		out[p] = f
	}
	return out, nil
}
