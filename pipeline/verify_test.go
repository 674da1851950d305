package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verify"
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

// TestVerifyPredictionsRunPredictedOnly: as upstream's
// get_dataset_from_preds, a predictions run without --instance runs the
// predicted instances, each on its platforms (django__django-10097 is
// USE_X86: linux/amd64 alone), not every record of the dataset (it used to
// make a target of each of Verified's 500 and fail the ones without a
// prediction). The count is what verify says before it connects to the
// daemon, which is not there.
func TestVerifyPredictionsRunPredictedOnly(t *testing.T) {
	shared := spectest.SharedDir(t)
	dir := t.TempDir()
	preds := filepath.Join(dir, "preds.jsonl")
	if err := os.WriteFile(preds, []byte(`{"instance_id": "django__django-11099", "model_name_or_path": "m", "model_patch": "diff"}
{"instance_id": "django__django-10097", "model_name_or_path": "m", "model_patch": "diff"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, preds string
		instances   []string
		want        string
	}{
		{"predicted ids", preds, nil, "verify: eval scripts: 3 from the dataset records (v5 rules), 0 generated"},
		{"--instance narrows them", preds, []string{"django__django-10097"}, "verify: eval scripts: 1 from the dataset records (v5 rules), 0 generated"},
		{"no prediction", empty, nil, "no prediction to run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := Verify(context.Background(), VerifyOptions{
				Inputs: Inputs{
					Dataset:   filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
					CacheDir:  filepath.Join(dir, "cache"),
					Instances: tc.instances,
					Pins:      "none",
				},
				PredictionsFile: tc.preds,
				Images:          "127.0.0.1:1/none",
				BuildKit:        "unix://" + filepath.Join(dir, "no-buildkit.sock"),
				RunDir:          filepath.Join(dir, "run-"+strings.ReplaceAll(tc.name, " ", "-")),
				Log:             &stderr,
			})
			if err == nil {
				t.Fatal("no error without a daemon")
			}
			if !strings.Contains(stderr.String()+err.Error(), tc.want) {
				t.Errorf("want %q\nerr %v\n%s", tc.want, err, stderr.String())
			}
		})
	}
}

// TestVerifyImageAbsentFromMetadata: an instance the metadata file names no
// image of gets its own image_absent result (nothing runs: the daemon is
// never asked), the summary is written and the error says a result failed.
func TestVerifyImageAbsentFromMetadata(t *testing.T) {
	shared := spectest.SharedDir(t)
	dir := t.TempDir()
	md := filepath.Join(dir, "metadata.jsonl")
	if err := os.WriteFile(md, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sum, err := Verify(context.Background(), VerifyOptions{
		Inputs: Inputs{
			Dataset:   filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
			CacheDir:  filepath.Join(dir, "cache"),
			Instances: []string{"django__django-11099"},
			Pins:      "none",
		},
		Platforms:    []core.Platform{core.AMD64},
		Host:         core.AMD64,
		Gold:         true,
		MetadataFile: md,
		BuildKit:     "unix://" + filepath.Join(dir, "no-buildkit.sock"),
		RunDir:       filepath.Join(dir, "run"),
		Log:          &stderr,
	})
	if sum == nil {
		t.Fatalf("no summary: %v\n%s", err, stderr.String())
	}
	if len(sum.Results) != 1 || sum.Results[0].Failure != verify.FailureImageAbsent || !strings.Contains(sum.Results[0].Error, md+": no instance image of django__django-11099 for linux/amd64") {
		t.Errorf("results %+v, want one %s naming the metadata file", sum.Results, verify.FailureImageAbsent)
	}
	if err == nil || !strings.Contains(err.Error(), "1 of 1 verification result(s) failed") {
		t.Errorf("err %v, want the failed result counted", err)
	}
	if _, serr := verify.ReadSummary(filepath.Join(dir, "run", "summary.json")); serr != nil {
		t.Errorf("summary.json: %v", serr)
	}
}
