package ci

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedRef locates shared/swebench-reference: $SWEBUILD_SHARED (the shared
// directory, or the reference directory itself), else ../shared beside the
// module root. Missing data skips the test, or fails it when CI is set.
func sharedRef(t *testing.T) string {
	t.Helper()
	var candidates []string
	if env := os.Getenv("SWEBUILD_SHARED"); env != "" {
		candidates = append(candidates, filepath.Join(env, "swebench-reference"), env)
	} else {
		root, err := moduleRoot()
		if err != nil {
			t.Fatalf("finding module root: %v", err)
		}
		candidates = append(candidates, filepath.Join(root, "..", "shared", "swebench-reference"))
	}
	for _, c := range candidates {
		if st, err := os.Stat(filepath.Join(c, "USE_X86_PY.txt")); err == nil && !st.IsDir() {
			return c
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("shared reference data not found (looked in %v); CI needs it", candidates)
	}
	t.Skipf("shared reference data not found (looked in %v)", candidates)
	return ""
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
