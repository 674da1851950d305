package grading

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoDaemonLinked asserts that grading, a pure function of a log, links
// neither BuildKit nor go-containerregistry (issue 13), nor the dataset
// loaders, parquet or an HTTP client (issue 27: grading takes core.Instance):
// `swebuild grade` must not need the runner's or the loaders' dependencies. The runner package, which does
// link BuildKit, is the control that shows the check can fail.
func TestNoDaemonLinked(t *testing.T) {
	banned := []string{"github.com/moby/buildkit", "github.com/google/go-containerregistry",
		"github.com/swebuild/swebuild/dataset", "github.com/parquet-go/parquet-go", "net/http"}
	for _, c := range []struct {
		pkg        string
		wantBanned bool
	}{
		{".", false},
		{"../verify", true},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", c.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", c.pkg, err)
			}
			var found []string
			for _, d := range strings.Fields(string(out)) {
				for _, b := range banned {
					if d == b || strings.HasPrefix(d, b+"/") {
						found = append(found, d)
					}
				}
			}
			if c.wantBanned && len(found) == 0 {
				t.Errorf("%s links none of %q: the check finds nothing", c.pkg, banned)
			}
			if !c.wantBanned && len(found) > 0 {
				t.Errorf("%s links %d packages of %q, e.g. %s", c.pkg, len(found), banned, found[0])
			}
		})
	}
}
