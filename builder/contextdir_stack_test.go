package builder

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/internal/stacktest"
)

// The COPY pre-check and the real BuildKit agree on each symbolic link of
// copySymlinkCases: BuildKit (the Dockerfile frontend, a context directory
// sent as is) refuses exactly the COPYs the pre-check refuses. Before the
// pre-check followed links, it passed all of them and BuildKit refused
// five after solving every step before the COPY.
func TestCopyPreCheckAgreesWithBuildKit(t *testing.T) {
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "sub/b.sh"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := symlinkCases(t, dir)
	c, err := bkclient.New(ctx, st.BuildkitHost)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	contextFS, err := fsutil.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range copySymlinkCases {
		tc := cases[i]
		t.Run(sc.name, func(t *testing.T) {
			dfDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dfDir, "Dockerfile"), []byte(tc.dockerfile), 0o644); err != nil {
				t.Fatal(err)
			}
			dfFS, err := fsutil.NewFS(dfDir)
			if err != nil {
				t.Fatal(err)
			}
			_, serr := c.Solve(ctx, nil, bkclient.SolveOpt{
				Frontend:    "dockerfile.v0",
				LocalMounts: map[string]fsutil.FS{"context": contextFS, "dockerfile": dfFS},
			}, nil)
			pre := checkCopySources([]byte(tc.dockerfile), dir)
			if (serr != nil) != sc.refused {
				t.Errorf("BuildKit: %v; the case says refused=%v", serr, sc.refused)
			}
			if (pre != nil) != (serr != nil) {
				t.Errorf("pre-check: %v; BuildKit: %v", pre, serr)
			}
		})
	}
}
