package sizes

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestRunRefusesBadConfig: Run says what is wrong with its Config in its
// own words (no flag names) and before any registry request.
func TestRunRefusesBadConfig(t *testing.T) {
	ten := 10.0
	file := filepath.Join(t.TempDir(), "images.jsonl")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no images", Config{}, "no image set to measure"},
		{"growth without a second set", Config{Images: file, MaxGrowthPercent: &ten}, "a growth limit needs a set to compare against"},
		{"bad image set", Config{Images: "registry.example/img:{arch}"}, "measured set: image set \"registry.example/img:{arch}\": a template needs {id}"},
		{"bad set compared against", Config{Images: file, Against: "upstream:registry.example/x:{id}"}, "set compared against: image set \"upstream:registry.example/x:{id}\": a named scheme takes a repository"},
		{"scheme set with nothing to name", Config{Images: "registry.example/swebench/sweb.eval.{arch}.{id}:latest"}, "measured set \"registry.example/swebench/sweb.eval.{arch}.{id}:latest\" names images by a naming scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Source = refuseSource{t}
			_, err := Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("library error names a flag: %v", err)
			}
		})
	}
}

// refuseSource fails the test on any registry request.
type refuseSource struct{ t *testing.T }

func (s refuseSource) Manifest(_ context.Context, ref string, _ core.Platform) (Manifest, error) {
	s.t.Errorf("manifest request for %s", ref)
	return Manifest{}, context.Canceled
}

func (s refuseSource) Blob(_ context.Context, ref, _ string) (io.ReadCloser, error) {
	s.t.Errorf("blob request in %s", ref)
	return nil, context.Canceled
}
