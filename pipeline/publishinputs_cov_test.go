package pipeline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestPublishVerification: a verify summary's gold results become the
// verdicts publish attaches, each with its run's report.json and eval.sh
// and its control's outcome; a summary that cannot be read, or whose gold
// run left no report, is an error naming the file.
func TestPublishVerification(t *testing.T) {
	dir := t.TempDir()
	gold, control := filepath.Join(dir, "gold"), filepath.Join(dir, "control")
	report := []byte(`{"fixture__calc-1": {"resolved": true}}`)
	eval := []byte("#!/bin/bash\npytest -rA\n")
	for _, d := range []string{gold, control} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(gold, "report.json"), report, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gold, "eval.sh"), eval, 0o644); err != nil {
		t.Fatal(err)
	}
	summary := func(goldDir string) string {
		return fmt.Sprintf(`{"results": [
  {"instance_id": "fixture__calc-1", "platform": "linux/arm64", "mode": "gold", "image": "127.0.0.1:5000/x@sha256:%s", "resolved": true, "dir": %q, "runs": [{}]},
  {"instance_id": "fixture__calc-1", "platform": "linux/arm64", "mode": "control", "resolved": false, "dir": %q, "runs": [{}]}
]}`, strings.Repeat("b", 64), goldDir, control)
	}
	path := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(path, []byte(summary(gold)), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := PublishVerification(path, "swebuild test")
	if err != nil {
		t.Fatal(err)
	}
	if src.Verifier != "swebuild test" || len(src.Verdicts) != 1 {
		t.Fatalf("%+v: want one verdict (the gold result) by swebuild test", src)
	}
	v := src.Verdicts[0]
	switch {
	case v.InstanceID != "fixture__calc-1" || v.Platform != core.ARM64 || !v.GoldResolved || v.Image != "127.0.0.1:5000/x@sha256:"+strings.Repeat("b", 64):
		t.Errorf("verdict %+v", v)
	case !bytes.Equal(v.Report, report) || !bytes.Equal(v.EvalScript, eval):
		t.Errorf("verdict report %q, eval %q: not the run's files", v.Report, v.EvalScript)
	case v.ControlUnresolved == nil || !*v.ControlUnresolved:
		t.Errorf("control unresolved %v, want true", v.ControlUnresolved)
	}

	// The gold run's directory has no report.json.
	if err := os.WriteFile(path, []byte(summary(control)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishVerification(path, "v"); err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), "report.json") {
		t.Errorf("gold run without report.json: %v", err)
	}
	// Not a summary.
	if err := os.WriteFile(path, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishVerification(path, "v"); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("not a summary: %v", err)
	}
	if _, err := PublishVerification(filepath.Join(dir, "absent.json"), "v"); err == nil {
		t.Error("absent summary: no error")
	}
}
