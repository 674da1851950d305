package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/verify"
)

// VerifyOptions are one `swebuild verify`: which patches (Gold, Control,
// PredictionsFile) to run on which images (Images or MetadataFile) of the
// loaded instances, and how.
type VerifyOptions struct {
	Inputs
	// Platforms to verify; x86-only instances never run on linux/arm64.
	Platforms []core.Platform
	// Host, when set, is this machine's platform: runs of another platform
	// are said to be emulated through QEMU (in the log, and
	// verify.Result.Emulated).
	Host core.Platform
	// Gold runs each instance's gold patch; Control runs no patch (it must
	// come out unresolved); PredictionsFile, when set, grades a model's
	// predictions (upstream's JSONL or JSON array; "gold", as upstream, the
	// records' gold patches as the predictions of model "gold"). As
	// upstream, a prediction whose instance is not in the dataset is an
	// error (nothing runs), and one with a null or empty patch is not run.
	Gold, Control   bool
	PredictionsFile string
	// RunID names the run in the predictions' run reports
	// (<model>.<run_id>.json in the run directory); default: the run
	// directory's name.
	RunID string
	// Images is a registry repository prefix holding the per-arch
	// instance images (REPO/sweb.eval.<arch>.<id>:latest), or oci:DIR, an
	// OCI layout a build wrote (its instance images by the instance-id
	// annotation); MetadataFile names the built images instead (core
	// records: a pushed ref, else the record's OCI layout); DatasetImages
	// names them as each record's image field says, re-rooted at
	// DatasetRegistry when it is set (verify.ImagesFromDataset). Exactly
	// one is set.
	Images          string
	MetadataFile    string
	DatasetImages   bool
	DatasetRegistry string
	// Reader, when set, resolves each registry image before any run to
	// the platform's image manifest, pinned by digest (REPO@sha256:...):
	// the runs, the summary and the statements bind to what was found,
	// and an image missing or refused is said first. nil: the references
	// are run as named.
	Reader *publication.Reader
	// BuildKit is the BuildKit daemon's address (Engine EngineBuildKit).
	BuildKit string
	// Auth, when set, makes each run's registry login (the images are
	// pulled by BuildKit); nil: anonymous.
	Auth func() verify.SessionAuth
	// Engine runs the containers: EngineBuildKit ("" too) or EngineDocker.
	Engine string
	// DockerHost is the Docker daemon's address with EngineDocker
	// (unix:///path or tcp://host:port; "": the client's default).
	DockerHost string
	// Workers is how many runs go at once (default 1); Repeat runs each
	// instance that many times and flags tests whose results differ.
	Workers, Repeat int
	// Timeout limits each eval.sh run (default verify.DefaultTimeout).
	Timeout time.Duration
	// EvalScript chooses the script each run executes: verify.ScriptDataset
	// ("" too: the record's eval_script as upstream v5 runs it, graded by
	// its log_parser under v5's rules; records without one fall back to the
	// generated eval.sh) or verify.ScriptGenerated (the v4.1.0 eval.sh).
	EvalScript string
	// Parser, when set, grades every repository with this upstream parser.
	Parser string
	// AllowHarnessChanges runs predictions whose patch changes the test
	// harness (verify.HarnessChanges); otherwise they are not run and
	// their result is verify.FailureHarness. Gold patches are never
	// refused, only reported.
	AllowHarnessChanges bool
	// Baseline, when set, is an earlier summary: any regression against
	// it (resolved -> unresolved) is an error, listed first.
	Baseline string
	// RunDir receives per-run logs and report.json (default: a new
	// runs/verify-<UTC time>-<random>); SummaryFile the JSON summary
	// (default RunDir/summary.json).
	RunDir, SummaryFile string
	// JSON writes the summary to Out as JSON instead of a table.
	JSON bool
	// Out receives the summary; Log the progress.
	Out, Log io.Writer
}

// Verify loads the instances, runs the asked patches in containers of their
// images with BuildKit, grades the runs as upstream does and writes the
// summary. The error joins every problem (invalid records or predictions,
// images it could not find, failed results, regressions); the summary is
// written even then.
func Verify(ctx context.Context, o VerifyOptions) (*verify.Summary, error) {
	out, log := writerOr(o.Out), writerOr(o.Log)
	if err := o.check(); err != nil {
		return nil, err
	}
	var base *verify.Summary
	if o.Baseline != "" {
		var err error
		if base, err = verify.ReadSummary(o.Baseline); err != nil {
			return nil, fmt.Errorf("reading the baseline summary: %w", err)
		}
	}
	loaded, preds, problems, err := o.load(ctx, log)
	if err != nil {
		return nil, err
	}
	targets, err := o.targets(ctx, loaded, log, &problems)
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}

	// The runner's workers and the engine both write progress lines.
	progress := core.SyncWriter(log)
	engine, closeEngine, err := o.engine(ctx, progress)
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}
	defer closeEngine()
	runDir, summaryFile, unlock, err := o.runDir()
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}
	defer unlock()
	emulated(log, o.Host, targets)
	absent := 0
	for _, t := range targets {
		if t.Absent != "" {
			absent++
		}
	}
	fmt.Fprintf(log, "swebuild verify: %d instance image(s), %d absent (%s); logs in %s\n", len(targets)-absent, absent, verify.FailureImageAbsent, runDir)
	sum, err := o.runner(engine, runDir, progress).Verify(ctx, targets, o.Gold, o.Control, preds)
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}
	if preds != nil {
		runID := o.RunID
		if runID == "" {
			runID = filepath.Base(runDir)
		}
		if err := writeRunReports(runDir, runID, loaded.Instances, preds, sum, o.Platforms, log); err != nil {
			problems = append(problems, err)
		}
	}
	problems = append(problems, o.report(sum, base, summaryFile, out)...)
	return sum, errors.Join(problems...)
}

// check refuses options that ask nothing or contradict each other.
func (o VerifyOptions) check() error {
	if !o.Gold && !o.Control && o.PredictionsFile == "" {
		return errors.New("nothing to verify: no gold, control or predictions run asked")
	}
	if n := btoi(o.Images != "") + btoi(o.MetadataFile != "") + btoi(o.DatasetImages); n != 1 {
		return errors.New("images: give exactly one of a repository prefix, a metadata file and the dataset's image fields")
	}
	switch o.Engine {
	case "", EngineBuildKit:
		if o.BuildKit == "" {
			return errors.New("no BuildKit address")
		}
	case EngineDocker:
	default:
		return fmt.Errorf("unknown engine %q: want %s or %s", o.Engine, EngineBuildKit, EngineDocker)
	}
	return nil
}

// load loads the whole dataset (prediction ids are checked against it, as
// upstream does, whatever instances are selected), the predictions, and
// selects the instances to verify. problems are those that leave the others
// to verify; err, when set, joins them with what stops the run.
func (o VerifyOptions) load(ctx context.Context, log io.Writer) (loaded *Loaded, preds map[string]verify.Prediction, problems []error, err error) {
	in := o.Inputs
	in.Instances = nil
	loaded, problems, err = loadKeepGoing(ctx, in, log)
	if err != nil {
		return nil, nil, nil, err
	}
	datasetIDs := map[string]bool{}
	for _, inst := range loaded.Instances {
		datasetIDs[inst.InstanceID] = true
	}
	if err = loaded.Select(o.Inputs.Instances); err != nil {
		return nil, nil, nil, errors.Join(append(problems, err)...)
	}
	preds, soft, perr := o.predictions(loaded.Instances, datasetIDs, log)
	if perr != nil {
		return nil, nil, nil, errors.Join(append(problems, perr)...)
	}
	if soft != nil {
		problems = append(problems, soft)
	}
	if err := o.selectPredicted(loaded, preds); err != nil {
		return nil, nil, nil, errors.Join(append(problems, err)...)
	}
	return loaded, preds, problems, nil
}

// runDir is the run directory (made when not given), locked for this run,
// and the summary file's path. One verify per run directory: a second would
// overwrite this one's summary and reports (issue 20 row 13).
func (o VerifyOptions) runDir() (runDir, summaryFile string, unlock func() error, err error) {
	runDir, summaryFile = o.RunDir, o.SummaryFile
	if runDir == "" {
		if runDir, err = verify.NewRunDir("runs", time.Now()); err != nil {
			return "", "", nil, err
		}
	}
	if unlock, err = verify.LockRunDir(runDir); err != nil {
		return "", "", nil, err
	}
	if summaryFile == "" {
		summaryFile = filepath.Join(runDir, "summary.json")
	}
	return runDir, summaryFile, unlock, nil
}

// runner is the verify.Runner the options ask for.
func (o VerifyOptions) runner(engine verify.Engine, runDir string, progress io.Writer) *verify.Runner {
	runner := &verify.Runner{
		Engine:   engine,
		Host:     o.Host,
		Workers:  max(o.Workers, 1),
		Timeout:  o.Timeout,
		Repeat:   max(o.Repeat, 1),
		RunDir:   runDir,
		Grade:    grading.GradeOptions{Parser: o.Parser},
		Progress: progress,

		AllowHarnessChanges: o.AllowHarnessChanges,
	}
	if runner.Timeout <= 0 {
		runner.Timeout = verify.DefaultTimeout
	}
	return runner
}

// report writes the summary to summaryFile and out, and gives the problems
// it finds: regressions against base, failed results, and what could not
// be written.
func (o VerifyOptions) report(sum, base *verify.Summary, summaryFile string, out io.Writer) []error {
	var problems []error
	var regressions []verify.Regression
	if base != nil {
		regressions = sum.Regressions(base)
	}
	if err := sum.WriteFile(summaryFile); err != nil {
		problems = append(problems, err)
	}
	var err error
	if o.JSON {
		err = sum.WriteJSON(out)
	} else {
		err = sum.WriteTable(out, regressions)
	}
	if err != nil {
		problems = append(problems, err)
	}
	if n := len(regressions); n > 0 {
		problems = append(problems, fmt.Errorf("%d regression(s) against %s", n, o.Baseline))
	}
	if n := len(sum.Failed()); n > 0 {
		problems = append(problems, fmt.Errorf("%d of %d verification result(s) failed", n, len(sum.Results)))
	}
	return problems
}

// images says where each instance's image is: under the repository prefix,
// an OCI layout (oci:DIR), as the records' image fields say, or as the
// metadata file's records name it (a file with some invalid records still
// names the others; the invalid ones are a problem).
func (o VerifyOptions) images(insts []core.Instance, log io.Writer, problems *[]error) (verify.ImageFunc, error) {
	if dir, ok := strings.CutPrefix(o.Images, "oci:"); ok {
		return verify.ImagesFromLayout(dir)
	}
	switch {
	case o.Images != "":
		return verify.ImagesFromRepo(o.Images), nil
	case o.DatasetImages:
		return verify.ImagesFromDataset(insts, o.DatasetRegistry), nil
	}
	recs, err := core.ReadRecords(o.MetadataFile, log)
	if len(recs) == 0 && err != nil {
		return nil, fmt.Errorf("reading the metadata file: %w", err)
	}
	if err != nil {
		fmt.Fprintln(log, err)
		*problems = append(*problems, fmt.Errorf("metadata file %s has invalid records", o.MetadataFile))
	}
	return verify.ImagesFromRecords(recs, o.MetadataFile), nil
}

// targets are the verify targets of the loaded instances, each with its
// image (images, pinned through the reader); what cannot be verified is
// logged and counted in problems.
func (o VerifyOptions) targets(ctx context.Context, loaded *Loaded, log io.Writer, problems *[]error) ([]verify.Target, error) {
	imageFn, err := o.images(loaded.Instances, log, problems)
	if err != nil {
		return nil, err
	}
	targets, terrs := loaded.Targets(ctx, o.Platforms, imageFn, o.EvalScript)
	for _, e := range terrs {
		fmt.Fprintf(log, "verify: %v\n", e)
	}
	if len(terrs) > 0 {
		*problems = append(*problems, fmt.Errorf("%d instance image(s) could not be verified", len(terrs)))
	}
	if targets, err = o.pin(ctx, targets, log, problems); err != nil {
		return nil, err
	}
	scriptNote(log, targets)
	return targets, nil
}

// pin resolves each target's registry image through the reader (see
// VerifyOptions.Reader) and keeps the targets whose image was found. A
// registry that could not be asked is the error.
func (o VerifyOptions) pin(ctx context.Context, targets []verify.Target, log io.Writer, problems *[]error) ([]verify.Target, error) {
	if o.Reader == nil {
		return targets, nil
	}
	var refs []string
	var plats []core.Platform
	var at []int
	for i, t := range targets {
		if t.Image != "" && !strings.HasPrefix(t.Image, verify.LayoutScheme) {
			refs, plats, at = append(refs, t.Image), append(plats, t.Platform), append(at, i)
		}
	}
	found, errs := o.Reader.ResolveAll(ctx, refs, plats)
	drop := map[int]bool{}
	absent := 0
	for k, err := range errs {
		t := &targets[at[k]]
		switch {
		case err != nil && !publication.IsProblem(err):
			return nil, fmt.Errorf("resolving the instance images: %w", err)
		case errors.Is(err, publication.ErrNotFound):
			// Its own result (verify.FailureImageAbsent); the others run.
			t.Absent = fmt.Sprintf("%v: %s: %v", verify.ErrImageAbsent, t.Image, err)
			absent++
		case err != nil:
			fmt.Fprintf(log, "verify: %s (%s): image %s: %v\n", t.Instance.InstanceID, t.Platform, t.Image, err)
			drop[at[k]] = true
		default:
			t.Image = found[k].Ref.String()
		}
	}
	if n := len(refs) - len(drop) - absent; n > 0 {
		fmt.Fprintf(log, "verify: %d image(s) resolved in the registry, pinned by digest\n", n)
	}
	if absent > 0 {
		fmt.Fprintf(log, "verify: %d image(s) not in the registry: their results are %s\n", absent, verify.FailureImageAbsent)
	}
	if len(drop) == 0 {
		return targets, nil
	}
	*problems = append(*problems, fmt.Errorf("%d instance image(s) not found in the registry or refused", len(drop)))
	kept := targets[:0]
	for i, t := range targets {
		if !drop[i] {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// emulated says which platforms of the targets are not the host's: their
// containers run through QEMU.
func emulated(log io.Writer, host core.Platform, targets []verify.Target) {
	if host.IsZero() {
		return
	}
	seen := map[core.Platform]bool{}
	for _, t := range targets {
		if t.Platform != host && t.Absent == "" && !seen[t.Platform] {
			seen[t.Platform] = true
			fmt.Fprintf(log, "verify: %s is not this host's platform (%s): its runs are emulated through QEMU (slower; results say \"emulated\": true)\n", t.Platform, host)
		}
	}
}

// predictions reads the predictions file, or makes the records' gold
// patches the predictions of model "gold" for PredictionsFile "gold", as
// upstream's get_predictions_from_file does. As upstream's
// get_dataset_from_preds: prediction ids not in the dataset are an error
// naming them (nothing runs); selected instances without a prediction are a
// warning. Unusable entries of the file are listed to log and make soft a
// problem; the usable ones still run.
func (o VerifyOptions) predictions(selected []core.Instance, datasetIDs map[string]bool, log io.Writer) (preds map[string]verify.Prediction, soft, hard error) {
	if o.PredictionsFile == "" {
		return nil, nil, nil
	}
	var bad error
	if o.PredictionsFile == "gold" {
		fmt.Fprintln(log, "verify: using gold predictions (the records' patches, model \"gold\"), as upstream's --predictions_path gold")
		preds = map[string]verify.Prediction{}
		for _, in := range selected {
			p := in.Patch
			preds[in.InstanceID] = verify.Prediction{InstanceID: in.InstanceID, Model: "gold", Patch: &p}
		}
	} else {
		preds, bad = verify.ReadPredictions(o.PredictionsFile)
		if bad != nil {
			fmt.Fprintln(log, bad)
		}
	}
	var unknown []string
	for id := range preds {
		if !datasetIDs[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, nil, fmt.Errorf("predictions %s: %d prediction id(s) not found in the dataset: %s", o.PredictionsFile, len(unknown), strings.Join(unknown, " "))
	}
	var missing int
	for _, in := range selected {
		if _, ok := preds[in.InstanceID]; !ok {
			missing++
		}
	}
	if missing > 0 && len(o.Inputs.Instances) > 0 {
		fmt.Fprintf(log, "verify: warning: missing predictions for %d instance id(s)\n", missing)
	}
	if bad != nil {
		soft = fmt.Errorf("predictions %s: %d usable prediction(s); see the errors above", o.PredictionsFile, len(preds))
	}
	return preds, soft, nil
}

// selectPredicted narrows a predictions run without --instance to the
// predicted instances, as upstream's get_dataset_from_preds does: the run
// is those, not the whole dataset. No prediction to run is an error.
func (o VerifyOptions) selectPredicted(loaded *Loaded, preds map[string]verify.Prediction) error {
	if preds == nil || len(o.Inputs.Instances) > 0 {
		return nil
	}
	ids := make([]string, 0, len(preds))
	for _, in := range loaded.Instances {
		if _, ok := preds[in.InstanceID]; ok {
			ids = append(ids, in.InstanceID)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("predictions %s: no prediction to run", o.PredictionsFile)
	}
	return loaded.Select(ids)
}

// scriptNote says which eval scripts the targets run, and how many records
// fell back to the generated one.
func scriptNote(log io.Writer, targets []verify.Target) {
	counts := map[string]int{}
	fallback := 0
	for _, t := range targets {
		counts[t.Script.Source]++
		if t.Script.Fallback != "" {
			fallback++
		}
	}
	fmt.Fprintf(log, "verify: eval scripts: %d from the dataset records (v5 rules), %d generated (v4.1.0 rules)", counts[verify.ScriptDataset], counts[verify.ScriptGenerated])
	if fallback > 0 {
		fmt.Fprintf(log, "; %d of the generated because the record has no eval_script", fallback)
	}
	fmt.Fprintln(log)
}

// writeRunReports writes upstream's run report of each model, one per
// platform run (verify.RunReportName), into the run directory.
func writeRunReports(runDir, runID string, selected []core.Instance, preds map[string]verify.Prediction, sum *verify.Summary, platforms []core.Platform, log io.Writer) error {
	ids := make([]string, len(selected))
	for i, in := range selected {
		ids[i] = in.InstanceID
	}
	byModel := map[string]map[string]verify.Prediction{}
	for id, p := range preds {
		if byModel[p.Model] == nil {
			byModel[p.Model] = map[string]verify.Prediction{}
		}
		byModel[p.Model][id] = p
	}
	ran := map[core.Platform]bool{}
	for _, r := range sum.Results {
		ran[r.Platform] = true
	}
	var errs []error
	for _, model := range slices.Sorted(maps.Keys(byModel)) {
		for _, p := range []core.Platform{core.AMD64, core.ARM64} {
			if !ran[p] && !(p == core.AMD64 && len(ran) == 0) {
				continue
			}
			if len(platforms) > 0 && !slices.Contains(platforms, p) {
				continue
			}
			rep := verify.MakeRunReport(ids, byModel[model], sum.Results, p)
			b, err := rep.JSON()
			if err == nil {
				path := filepath.Join(runDir, verify.RunReportName(model, runID, p))
				if err = os.WriteFile(path, b, 0o644); err == nil {
					fmt.Fprintf(log, "verify: run report of %q on %s: %s (%d resolved, %d unresolved, %d empty patches, %d errors, of %d instances)\n",
						model, p, path, rep.ResolvedInstances, rep.UnresolvedInstances, rep.EmptyPatchInstances, rep.ErrorInstances, rep.TotalInstances)
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("writing the run report of %q: %w", model, err))
			}
		}
	}
	return errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The engines VerifyOptions.Engine names.
const (
	EngineBuildKit = "buildkit"
	EngineDocker   = "docker"
)

// engine connects to the daemon o.Engine names.
func (o VerifyOptions) engine(ctx context.Context, progress io.Writer) (verify.Engine, func(), error) {
	if o.Engine == EngineDocker {
		e, err := verify.NewDockerEngine(ctx, o.DockerHost)
		if err != nil {
			return nil, nil, err
		}
		e.Progress = progress
		return e, func() { e.Close() }, nil
	}
	c, err := bkclient.New(ctx, o.BuildKit)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to BuildKit at %s: %w", o.BuildKit, err)
	}
	return &verify.BuildKitEngine{Client: c, Auth: o.Auth}, func() { c.Close() }, nil
}
