package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestImageAbsentResults: a target without an image (Target.Absent) runs
// nothing and gets one image_absent result per mode asked, which fails the
// summary and is an error id of the run report; the other targets still run.
// Results of a platform other than the runner's host are marked emulated.
func TestImageAbsentResults(t *testing.T) {
	mk := func(id string, p core.Platform, absent string) Target {
		inst := core.Instance{Repo: "o/r", InstanceID: id, BaseCommit: "abc", Patch: "diff fix\n",
			FailToPass: []string{"tests/test_a.py::test_fix"}}
		return Target{Instance: inst, Platform: p, EvalScript: "#!/bin/bash\n", Parser: "parse_log_pytest", Absent: absent}
	}
	why := fmt.Errorf("%w: m.jsonl: no instance image of o__r-2 for linux/amd64", ErrImageAbsent).Error()
	targets := []Target{mk("o__r-1", core.AMD64, ""), mk("o__r-2", core.AMD64, why), mk("o__r-1", core.ARM64, "")}
	fix := "diff fix\n"
	preds := map[string]Prediction{"o__r-1": {InstanceID: "o__r-1", Model: "m", Patch: &fix}, "o__r-2": {InstanceID: "o__r-2", Model: "m", Patch: &fix}}
	e := &countingEngine{}
	r := &Runner{Engine: e, RunDir: t.TempDir(), Host: core.AMD64}
	sum, err := r.Verify(context.Background(), targets, true, true, preds)
	if err != nil {
		t.Fatal(err)
	}
	// o__r-1 on two platforms, three modes each; nothing for o__r-2.
	if len(e.patches) != 6 {
		t.Errorf("%d runs, want 6 (o__r-2 has no image)", len(e.patches))
	}
	got := map[string]Result{}
	for _, res := range sum.Results {
		got[res.InstanceID+" "+res.Platform.String()+" "+res.Mode] = res
	}
	for _, mode := range []string{ModeGold, ModeControl, ModePredictions} {
		a, ok := got["o__r-2 linux/amd64 "+mode]
		if !ok || a.Failure != FailureImageAbsent || a.OK() || a.Resolved || len(a.Runs) != 0 || !strings.Contains(a.Error, "no instance image of o__r-2") || a.Emulated {
			t.Errorf("o__r-2 %s: %+v, want a failed %s result naming the missing image, nothing run", mode, a, FailureImageAbsent)
		}
		if r1 := got["o__r-1 linux/amd64 "+mode]; !r1.OK() || r1.Emulated {
			t.Errorf("o__r-1 amd64 %s: ok %v emulated %v (%s)", mode, r1.OK(), r1.Emulated, r1.Why())
		}
		if r1 := got["o__r-1 linux/arm64 "+mode]; !r1.OK() || !r1.Emulated {
			t.Errorf("o__r-1 arm64 %s: ok %v emulated %v, want ok and emulated on an amd64 host", mode, r1.OK(), r1.Emulated)
		}
	}
	if n := len(sum.Failed()); n != 3 {
		t.Errorf("%d failed results, want the 3 of o__r-2", n)
	}
	rep := MakeRunReport([]string{"o__r-1", "o__r-2"}, preds, sum.Results, core.AMD64)
	if strings.Join(rep.ErrorIDs, " ") != "o__r-2" || strings.Join(rep.ResolvedIDs, " ") != "o__r-1" {
		t.Errorf("run report: errors %v resolved %v, want o__r-2 an error and o__r-1 resolved", rep.ErrorIDs, rep.ResolvedIDs)
	}
	var table strings.Builder
	if err := sum.WriteTable(&table, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "o__r-2 linux/amd64 gold: "+FailureImageAbsent) {
		t.Errorf("summary table does not name the absent image:\n%s", table.String())
	}
	if _, err := os.Stat(r.RunDir + "/gold/o__r-2"); !os.IsNotExist(err) {
		t.Errorf("a run directory was made for the absent image: %v", err)
	}
}

// TestImageLookupsSayAbsent: the metadata-file lookup wraps ErrImageAbsent
// when it names no image (none recorded, failed, not exported), and not for
// an image it has.
func TestImageLookupsSayAbsent(t *testing.T) {
	recs := []core.Image{
		{Kind: core.KindInstance, InstanceID: "a", Platform: core.AMD64, Status: core.StatusBuilt, Ref: "r/x@sha256:" + strings.Repeat("0", 64)},
		{Kind: core.KindInstance, InstanceID: "b", Platform: core.AMD64, Status: core.StatusFailed, Error: "boom"},
		{Kind: core.KindInstance, InstanceID: "c", Platform: core.AMD64, Status: core.StatusBuilt},
	}
	f := ImagesFromRecords(recs, "m.jsonl")
	for _, tc := range []struct {
		id     string
		p      core.Platform
		absent bool
	}{
		{"a", core.AMD64, false}, {"a", core.ARM64, true}, {"b", core.AMD64, true}, {"c", core.AMD64, true}, {"z", core.AMD64, true},
	} {
		_, err := f(tc.id, tc.p)
		if errors.Is(err, ErrImageAbsent) != tc.absent || (err == nil) == tc.absent {
			t.Errorf("%s %s: %v, want absent %t", tc.id, tc.p, err, tc.absent)
		}
	}
}
