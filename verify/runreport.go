package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
)

// RunReport is upstream v5's final report of an evaluation run
// (swebench.harness.reporting.make_run_report, schema_version 2), written as
// <model>.<run_id>.json. Fields are in upstream's order.
type RunReport struct {
	TotalInstances            int               `json:"total_instances"`
	SubmittedInstances        int               `json:"submitted_instances"`
	CompletedInstances        int               `json:"completed_instances"`
	ResolvedInstances         int               `json:"resolved_instances"`
	UnresolvedInstances       int               `json:"unresolved_instances"`
	InfraFailureInstances     int               `json:"infra_failure_instances"`
	AmbiguousFailureInstances int               `json:"ambiguous_failure_instances"`
	EmptyPatchInstances       int               `json:"empty_patch_instances"`
	ErrorInstances            int               `json:"error_instances"`
	CompletedIDs              []string          `json:"completed_ids"`
	IncompleteIDs             []string          `json:"incomplete_ids"`
	EmptyPatchIDs             []string          `json:"empty_patch_ids"`
	SubmittedIDs              []string          `json:"submitted_ids"`
	ResolvedIDs               []string          `json:"resolved_ids"`
	UnresolvedIDs             []string          `json:"unresolved_ids"`
	InfraFailureIDs           []string          `json:"infra_failure_ids"`
	AmbiguousFailureIDs       []string          `json:"ambiguous_failure_ids"`
	FailureReasons            map[string]string `json:"failure_reasons"`
	ErrorIDs                  []string          `json:"error_ids"`
	SchemaVersion             int               `json:"schema_version"`
}

// EmptyPatch reports whether a prediction's model_patch is null or "":
// upstream runs neither and counts both as empty_patch_ids.
func (p Prediction) EmptyPatch() bool { return p.Patch == nil || *p.Patch == "" }

// MakeRunReport is make_run_report for one model's predictions (submitted:
// the predictions file's entries of that model, by instance id) over the
// instances of the run (datasetIDs: upstream's full_dataset, the dataset
// as selected) from the results of one platform. As upstream:
//   - an instance without a prediction is incomplete, one whose patch is
//     null or "" an empty patch (and nothing else);
//   - a graded run (a report.json upstream would have written) is completed,
//     resolved or not; a run upstream ends with an EvaluationError (the
//     patch did not apply, the tests timed out, an infrastructure error),
//     one not run at all, and one not run because its patch changes the test
//     harness (FailureHarness, swebuild's own) are errors;
//   - unresolved and error runs are classified from their test_output.txt
//     and run_instance.log (grading.ClassifyRun): environment-tier labels
//     make infra_failure_ids, the others ambiguous_failure_ids, and every
//     label is in failure_reasons.
func MakeRunReport(datasetIDs []string, submitted map[string]Prediction, results []Result, platform core.Platform) RunReport {
	byID := map[string]Result{}
	for _, r := range results {
		if r.Mode == ModePredictions && r.Platform == platform {
			byID[r.InstanceID] = r
		}
	}
	rep := RunReport{
		TotalInstances: len(datasetIDs), SubmittedInstances: len(submitted), SchemaVersion: 2,
		CompletedIDs: []string{}, IncompleteIDs: []string{}, EmptyPatchIDs: []string{}, SubmittedIDs: []string{},
		ResolvedIDs: []string{}, UnresolvedIDs: []string{}, InfraFailureIDs: []string{}, AmbiguousFailureIDs: []string{},
		FailureReasons: map[string]string{}, ErrorIDs: []string{},
	}
	for id := range submitted {
		rep.SubmittedIDs = append(rep.SubmittedIDs, id)
	}
	var classify []Result
	for _, id := range datasetIDs {
		p, ok := submitted[id]
		switch {
		case !ok:
			rep.IncompleteIDs = append(rep.IncompleteIDs, id)
			continue
		case p.EmptyPatch():
			rep.EmptyPatchIDs = append(rep.EmptyPatchIDs, id)
			continue
		}
		r, ok := byID[id]
		switch {
		case !ok || !graded(r):
			rep.ErrorIDs = append(rep.ErrorIDs, id)
		case r.Resolved:
			rep.CompletedIDs = append(rep.CompletedIDs, id)
			rep.ResolvedIDs = append(rep.ResolvedIDs, id)
			continue
		default:
			rep.CompletedIDs = append(rep.CompletedIDs, id)
			rep.UnresolvedIDs = append(rep.UnresolvedIDs, id)
		}
		if ok && r.Dir != "" {
			classify = append(classify, r)
		}
	}
	for _, r := range classify {
		var texts []string
		for _, name := range []string{"test_output.txt", "run_instance.log"} {
			if b, err := os.ReadFile(filepath.Join(r.Dir, name)); err == nil {
				texts = append(texts, string(b))
			}
		}
		f := grading.ClassifyRun(texts...)
		if f.Reason == "" {
			continue
		}
		rep.FailureReasons[r.InstanceID] = f.Reason
		if f.Tier == grading.TierEnvironment {
			rep.InfraFailureIDs = append(rep.InfraFailureIDs, r.InstanceID)
		} else {
			rep.AmbiguousFailureIDs = append(rep.AmbiguousFailureIDs, r.InstanceID)
		}
	}
	for _, l := range [][]string{rep.CompletedIDs, rep.IncompleteIDs, rep.EmptyPatchIDs, rep.SubmittedIDs, rep.ResolvedIDs,
		rep.UnresolvedIDs, rep.InfraFailureIDs, rep.AmbiguousFailureIDs, rep.ErrorIDs} {
		sort.Strings(l)
	}
	rep.CompletedInstances, rep.ResolvedInstances, rep.UnresolvedInstances = len(rep.CompletedIDs), len(rep.ResolvedIDs), len(rep.UnresolvedIDs)
	rep.InfraFailureInstances, rep.AmbiguousFailureInstances = len(rep.InfraFailureIDs), len(rep.AmbiguousFailureIDs)
	rep.EmptyPatchInstances, rep.ErrorInstances = len(rep.EmptyPatchIDs), len(rep.ErrorIDs)
	return rep
}

// graded reports whether upstream would have written a report.json for the
// run: the patch applied (or was not to be applied) and the tests ran to
// the end, and the whole output was graded.
func graded(r Result) bool {
	switch r.Failure {
	case FailureInfra, FailurePatch, FailureTimeout, FailureTruncated, FailureHarness, FailureImageAbsent:
		return false
	}
	return true
}

// JSON is the report as upstream writes it: print(json.dumps(report,
// indent=4)), keys in upstream's order (failure_reasons sorted), a newline
// at the end. Instance ids are ASCII; reasons are written as Python would
// for ASCII text.
func (r RunReport) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encoding the run report: %w", err)
	}
	return b.Bytes(), nil
}

// RunReportName is upstream's file name of a model's run report:
// <model with "/" as "__">.<run_id>.json; a run on linux/arm64 (upstream
// runs linux/amd64 only) adds ".arm64" before ".json". The name is one path
// element (PathName) whatever the model name holds.
func RunReportName(model, runID string, platform core.Platform) string {
	name := strings.ReplaceAll(model, "/", "__") + "." + runID
	if platform != core.AMD64 {
		name += "." + platform.Arch()
	}
	return PathName(name) + ".json"
}
