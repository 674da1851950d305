package verify

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/dataset"
)

// TestHarnessChangesGoldPatches counts the gold patches of the shared
// Verified, Multilingual and Multimodal datasets that change the test
// harness (HarnessChanges with each record's test_patch and eval_script):
// none. A scan of the same records outside Go (every `diff --git` target's
// name against conftest.py, pytest.py, sitecustomize, .pth, pytest.ini,
// tox.ini, setup.cfg, pyproject.toml, package.json, jest/mocha
// configuration, .git/, TestMain, and the files eval scripts run: setup.py,
// runtests.py, bin/test, gradlew, runtest, ci.sh, run-tests.py) finds six
// patches touching such a name, all read by hand: pylint-dev__pylint-4661
// changes setup.cfg's [options], [isort] and [mypy-appdirs] sections, and
// five change dependency versions in a package.json. Those six must be
// found touching the file and not be reported.
func TestHarnessChangesGoldPatches(t *testing.T) {
	ref := spectest.SharedDir(t)
	nearMisses := map[string]string{
		"pylint-dev__pylint-4661":      "setup.cfg",
		"axios__axios-5316":            "package.json",
		"chartjs__Chart.js-9613":       "package.json",
		"diegomura__react-pdf-1285":    "packages/fontkit/package.json",
		"Automattic__wp-calypso-21635": "package.json",
		"Automattic__wp-calypso-33948": "package.json",
	}
	seen := 0
	for _, tc := range []struct {
		file    string
		records int
	}{
		{"SWE-bench_Verified/test.jsonl", 500},
		{"SWE-bench_Multilingual/test.jsonl", 300},
		{"SWE-bench_Multimodal/dev.jsonl", 102},
	} {
		insts, err := dataset.Load(context.Background(), filepath.Join(ref, "datasets", tc.file), dataset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(insts) != tc.records {
			t.Fatalf("%s: %d records, want %d", tc.file, len(insts), tc.records)
		}
		harness := 0
		for _, in := range insts {
			if h := HarnessChanges(in.Patch, in.TestPatch, in.EvalScript); len(h) > 0 {
				harness++
				t.Errorf("%s %s: gold patch reported as changing the harness: %+v", tc.file, in.InstanceID, h)
			}
			if want, ok := nearMisses[in.InstanceID]; ok {
				seen++
				var touched []string
				for _, f := range scanPatch(in.Patch) {
					touched = append(touched, f.paths...)
				}
				if !slices.Contains(touched, want) {
					t.Errorf("%s: the patch's files %q lack %s: the check looked at nothing", in.InstanceID, touched, want)
				}
			}
		}
		t.Logf("%s: %d of %d gold patches change the test harness", tc.file, harness, len(insts))
	}
	if seen != len(nearMisses) {
		t.Errorf("%d of the %d hand-read records found", seen, len(nearMisses))
	}
}
