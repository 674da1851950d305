package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

func TestDatasetImage(t *testing.T) {
	const img = "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
	for _, tc := range []struct {
		image, registry string
		p               core.Platform
		want, err       string
	}{
		{img, "", core.AMD64, "docker.io/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", ""},
		{img, "", core.ARM64, "docker.io/swebench/sweb.eval.arm64.astropy_1776_astropy-12907:latest", ""},
		{img, "127.0.0.1:5000/mirror/", core.AMD64, "127.0.0.1:5000/mirror/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", ""},
		{img, "127.0.0.1:5000", core.ARM64, "127.0.0.1:5000/swebench/sweb.eval.arm64.astropy_1776_astropy-12907:latest", ""},
		{"ghcr.io/o/img@sha256:" + strings.Repeat("a", 64), "reg:5000", core.ARM64, "reg:5000/o/img@sha256:" + strings.Repeat("a", 64), ""},
		{"ubuntu", "reg:5000", core.AMD64, "reg:5000/library/ubuntu", ""},
		{img, "Bad Registry", core.AMD64, "", "not an image reference"},
		{"Nope__X", "", core.AMD64, "", "not an image reference"},
	} {
		got, err := DatasetImage(tc.image, tc.registry, tc.p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("DatasetImage(%q, %q, %s) = %q, %v; want an error with %q", tc.image, tc.registry, tc.p, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DatasetImage(%q, %q, %s) = %q, %v; want %q", tc.image, tc.registry, tc.p, got, err, tc.want)
		}
	}
}

// TestMakeRunReport follows make_run_report through each bucket: an
// instance without a prediction (incomplete), null and "" patches (empty,
// nothing else), a resolved and an unresolved graded run (completed), a
// patch that did not apply and a run that was never made (errors), and the
// classification of an unresolved run whose log shows an environment fault.
func TestMakeRunReport(t *testing.T) {
	dir := t.TempDir()
	infraDir := filepath.Join(dir, "u2")
	if err := os.MkdirAll(infraDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A line upstream's classify_logs labels network_unreachable
	// (environment tier, swebench/harness/infra_failure.py).
	if err := os.WriteFile(filepath.Join(infraDir, "test_output.txt"), []byte("fatal: unable to access 'https://github.com/o/r/': Could not resolve host: github.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fix := "diff fix\n"
	empty := ""
	preds := map[string]Prediction{
		"r": {InstanceID: "r", Model: "m", Patch: &fix}, "u": {InstanceID: "u", Model: "m", Patch: &fix},
		"u2": {InstanceID: "u2", Model: "m", Patch: &fix}, "p": {InstanceID: "p", Model: "m", Patch: &fix},
		"never": {InstanceID: "never", Model: "m", Patch: &fix},
		"null":  {InstanceID: "null", Model: "m"}, "blank": {InstanceID: "blank", Model: "m", Patch: &empty},
	}
	res := func(id string, resolved bool, failure, d string) Result {
		return Result{InstanceID: id, Platform: core.AMD64, Mode: ModePredictions, Model: "m", Resolved: resolved, Failure: failure, Dir: d}
	}
	results := []Result{
		res("r", true, "", dir), res("u", false, FailureTests, dir), res("u2", false, FailureTests, infraDir),
		res("p", false, FailurePatch, dir), res("null", false, FailureEmptyPatch, dir), res("blank", false, FailureEmptyPatch, dir),
		// Another platform's and another mode's results are not this report's.
		{InstanceID: "never", Platform: core.ARM64, Mode: ModePredictions, Model: "m", Resolved: true, Dir: dir},
		{InstanceID: "never", Platform: core.AMD64, Mode: ModeGold, Resolved: true, Dir: dir},
	}
	ids := []string{"r", "u", "u2", "p", "never", "null", "blank", "nopred"}
	rep := MakeRunReport(ids, preds, results, core.AMD64)
	b, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"{\n    \"total_instances\": 8,\n    \"submitted_instances\": 7,\n    \"completed_instances\": 3,\n    \"resolved_instances\": 1,\n    \"unresolved_instances\": 2,\n",
		"\"empty_patch_instances\": 2,\n    \"error_instances\": 2,\n",
		"\"completed_ids\": [\n        \"r\",\n        \"u\",\n        \"u2\"\n    ],\n    \"incomplete_ids\": [\n        \"nopred\"\n    ],\n    \"empty_patch_ids\": [\n        \"blank\",\n        \"null\"\n    ],\n",
		"\"error_ids\": [\n        \"never\",\n        \"p\"\n    ],\n    \"schema_version\": 2\n}\n",
		"\"infra_failure_instances\": 1,",
		"\"infra_failure_ids\": [\n        \"u2\"\n    ],\n    \"ambiguous_failure_ids\": [],\n    \"failure_reasons\": {\n        \"u2\": ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("run report lacks %q:\n%s", want, got)
		}
	}
	if n := RunReportName("org/model", "run1", core.AMD64); n != "org__model.run1.json" {
		t.Errorf("RunReportName = %q", n)
	}
	if n := RunReportName("m", "run1", core.ARM64); n != "m.run1.arm64.json" {
		t.Errorf("RunReportName arm64 = %q", n)
	}
}
