// Command fixture-index writes a fixture package index scenario
// (internal/pyindex) for scripts/nightly-local.sh --scenario:
//
//	go run ./internal/pyindex/cmd/fixture-index --scenario NAME --specs testdata/fixture/specs.json --out DIR
//
// DIR/specs.json is the fixture's specs with calc's env installing the
// scenario's packages unpinned from the build context's wheels directory;
// DIR/night1/wheels and DIR/night2/wheels are the index before and after
// the release (give DIR/nightN as a context directory).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/swebuild/swebuild/internal/pyindex"
)

func main() {
	name := flag.String("scenario", "", "scenario: "+strings.Join(pyindex.ScenarioNames, ", "))
	specs := flag.String("specs", "testdata/fixture/specs.json", "the fixture's specs file")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if err := run(*name, *specs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fixture-index:", err)
		os.Exit(1)
	}
}

func run(name, specs, out string) error {
	if out == "" {
		return fmt.Errorf("--out is required")
	}
	sc, err := pyindex.Lookup(name)
	if err != nil {
		return fmt.Errorf("--scenario: %w", err)
	}
	raw, err := os.ReadFile(specs)
	if err != nil {
		return err
	}
	b, err := pyindex.Specs(raw, sc.Requires)
	if err != nil {
		return fmt.Errorf("%s: %w", specs, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "specs.json"), b, 0o644); err != nil {
		return err
	}
	for _, n := range []int{1, 2} {
		if err := pyindex.WriteIndex(filepath.Join(out, fmt.Sprintf("night%d", n), "wheels"), sc.Night(n)); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(out, "scenario.txt"), []byte(sc.Name+": "+sc.What+"\n"), 0o644)
}
