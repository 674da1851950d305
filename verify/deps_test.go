package verify

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBuilderNotLinked: the runner asks for a context digest through
// package ctxdigest, not the BuildKit builder, and links no dataset loader;
// the pipeline, which composes both, links them (so the check finds what
// it looks for).
func TestBuilderNotLinked(t *testing.T) {
	banned := map[string]bool{"github.com/swebuild/swebuild/builder": true, "github.com/swebuild/swebuild/dataset": true,
		"github.com/swebuild/swebuild/fetch": true}
	for _, c := range []struct {
		pkg        string
		wantBanned bool
	}{
		{".", false},
		{"../pipeline", true},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", c.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", c.pkg, err)
			}
			var found []string
			for _, d := range strings.Fields(string(out)) {
				if banned[d] {
					found = append(found, d)
				}
			}
			if c.wantBanned && len(found) == 0 {
				t.Errorf("%s links none of the banned packages: the check finds nothing", c.pkg)
			}
			if !c.wantBanned && len(found) > 0 {
				t.Errorf("%s links %q", c.pkg, found)
			}
		})
	}
}
