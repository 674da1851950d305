package render

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRenderingDoesNoNetworkIO: rendering is pure, its repository files
// come resolved (Renderer.RepoFiles): the package links no HTTP client, no
// downloader and no dataset loader. The pipeline, which resolves them,
// links all three, so the check finds what it looks for.
func TestRenderingDoesNoNetworkIO(t *testing.T) {
	banned := []string{"net/http", "github.com/swebuild/swebuild/fetch",
		"github.com/swebuild/swebuild/dataset", "github.com/parquet-go/parquet-go"}
	for _, c := range []struct {
		pkg        string
		wantBanned bool
	}{
		{".", false},
		{"./taskwrite", false},
		{"../plan", false},
		{"../../pipeline", true},
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
