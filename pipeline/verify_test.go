package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// TestVerifyPredictionsNotInDataset: as upstream's get_dataset_from_preds, a
// prediction id that is not in the dataset is an error naming it, before
// anything runs, also when the file mixes it with known ids and --instance
// selects only a known one (ids are checked against the whole dataset); a
// known id outside the selection is not an error.
func TestVerifyPredictionsNotInDataset(t *testing.T) {
	shared := spectest.SharedDir(t)
	dir := t.TempDir()
	preds := filepath.Join(dir, "preds.jsonl")
	if err := os.WriteFile(preds, []byte(`{"instance_id": "django__django-11099", "model_name_or_path": "m", "model_patch": "diff"}
{"instance_id": "django__django-10097", "model_name_or_path": "m", "model_patch": "diff"}
{"instance_id": "nobody__nothing-1", "model_name_or_path": "m", "model_patch": "diff"}
{"instance_id": "acme__widget-2", "model_name_or_path": "m", "model_patch": null}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	_, err := Verify(context.Background(), VerifyOptions{
		Inputs: Inputs{
			Dataset:   filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
			CacheDir:  filepath.Join(dir, "cache"),
			Instances: []string{"django__django-11099"},
			Pins:      "none",
		},
		PredictionsFile: preds,
		Images:          "127.0.0.1:1/none",
		BuildKit:        "unix://" + filepath.Join(dir, "no-buildkit.sock"),
		RunDir:          filepath.Join(dir, "run"),
		Log:             &stderr,
	})
	if err == nil || !strings.Contains(err.Error(), "2 prediction id(s) not found in the dataset: acme__widget-2 nobody__nothing-1") {
		t.Fatalf("err %v, want the two unknown ids named\n%s", err, stderr.String())
	}
	if strings.Contains(err.Error(), "django__django-10097") {
		t.Errorf("a dataset id outside --instance was reported: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run")); !os.IsNotExist(err) {
		t.Errorf("the run directory was made: something ran (%v)", err)
	}
}
