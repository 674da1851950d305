package verify

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
)

// TestDatasetScriptsVsGenerated counts, for Verified, Multilingual and
// Multimodal, the records whose own eval_script differs byte for byte from
// the eval.sh swebuild generates (upstream v4.1.0's, --pins none, x86_64):
// what `verify --eval-script dataset` (the default) runs differently from
// `--eval-script generated`. The reference's NOTES (upstream-v5/NOTES.md)
// say 480/500 Verified records are identical and no Multilingual or
// Multimodal record is. It also checks that every record makes a dataset
// target: its log_parser is one v5 grades with, and its script records the
// test command's exit status (it has an end marker).
func TestDatasetScriptsVsGenerated(t *testing.T) {
	ref := spectest.SharedDir(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables}
	for _, tc := range []struct {
		file            string
		records, differ int
	}{
		{"SWE-bench_Verified/test.jsonl", 500, 20},
		{"SWE-bench_Multilingual/test.jsonl", 300, 300},
		{"SWE-bench_Multimodal/dev.jsonl", 102, 102},
	} {
		insts, err := dataset.Load(context.Background(), filepath.Join(ref, "datasets", tc.file), dataset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		differ := 0
		var firstDiffer string
		for i := range insts {
			in := &insts[i]
			res, err := r.Render(context.Background(), in, core.AMD64)
			if err != nil {
				t.Fatalf("%s: %v", in.InstanceID, err)
			}
			if res.Eval != in.EvalScript {
				differ++
				if firstDiffer == "" {
					firstDiffer = in.InstanceID
				}
			}
		}
		targets, errs := Targets(context.Background(), r, insts, TargetOptions{Platforms: []core.Platform{core.AMD64}})
		if len(errs) > 0 {
			t.Errorf("%s: %d records make no dataset target, e.g. %v", tc.file, len(errs), errs[0])
		}
		for _, tg := range targets {
			if tg.Script.Source != ScriptDataset || !tg.RecordsExit {
				t.Errorf("%s: %s: script %+v, records the exit status: %v", tc.file, tg.Instance.InstanceID, tg.Script, tg.RecordsExit)
				break
			}
		}
		t.Logf("%s: %d of %d records' eval_script differ from the generated eval.sh (first: %s); %d dataset targets", tc.file, differ, len(insts), firstDiffer, len(targets))
		if len(insts) != tc.records || differ != tc.differ {
			t.Errorf("%s: %d of %d records differ, want %d of %d", tc.file, differ, len(insts), tc.differ, tc.records)
		}
	}
}
