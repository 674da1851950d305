// Package depstest checks what a package links, for the tests that keep the
// house's borders (docs/architecture.md): a pure package links no daemon
// client, a reader no gRPC, and so on. One `go list -deps` per package.
package depstest

import (
	"os/exec"
	"strings"
	"testing"
)

// Linked returns the packages pkg links (go list -deps, run in the test's
// directory: pkg is a relative or an import path) that are one of banned
// or below one of them (a banned "net/http" also matches
// "net/http/httptrace"); a banned path ending in "=" matches only itself
// ("M/builder=" is the builder, not builder/graph).
func Linked(t testing.TB, pkg string, banned ...string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var found []string
	for _, d := range strings.Fields(string(out)) {
		for _, b := range banned {
			exact, ok := strings.CutSuffix(b, "=")
			if d == exact || !ok && strings.HasPrefix(d, b+"/") {
				found = append(found, d)
				break
			}
		}
	}
	return found
}

// Border is one rule: Pkg links none of Banned. Control is a package that
// does link some of them, so the rule is seen able to fail.
type Border struct {
	Pkg, Control string
	Banned       []string
}

// Check checks each border and its control.
func Check(t *testing.T, borders []Border) {
	t.Helper()
	for _, b := range borders {
		t.Run(b.Pkg, func(t *testing.T) {
			if found := Linked(t, b.Pkg, b.Banned...); len(found) > 0 {
				t.Errorf("%s links %d packages of %q, e.g. %s", b.Pkg, len(found), b.Banned, found[0])
			}
			if b.Control != "" {
				if found := Linked(t, b.Control, b.Banned...); len(found) == 0 {
					t.Errorf("control %s links none of %q: the check finds nothing", b.Control, b.Banned)
				}
			}
		})
	}
}
