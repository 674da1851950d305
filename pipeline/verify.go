package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/verify"
)

// VerifyOptions are one `swebuild verify`: which patches (Gold, Control,
// PredictionsFile) to run on which images (Images or MetadataFile) of the
// loaded instances, and how.
type VerifyOptions struct {
	Inputs
	// Platforms to verify; x86-only instances never run on linux/arm64.
	Platforms []core.Platform
	// Gold runs each instance's gold patch; Control runs no patch (it must
	// come out unresolved); PredictionsFile, when set, grades a model's
	// predictions (upstream's JSONL or JSON array).
	Gold, Control   bool
	PredictionsFile string
	// Images is a registry repository prefix holding the per-arch
	// instance images (REPO/sweb.eval.<arch>.<id>:latest); MetadataFile
	// names the built images instead (core records). Exactly one is set.
	Images       string
	MetadataFile string
	// BuildKit is the BuildKit daemon's address (Engine EngineBuildKit).
	BuildKit string
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
	// Parser, when set, grades every repository with this upstream parser.
	Parser string
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
	if !o.Gold && !o.Control && o.PredictionsFile == "" {
		return nil, errors.New("nothing to verify: no gold, control or predictions run asked")
	}
	if (o.Images == "") == (o.MetadataFile == "") {
		return nil, errors.New("images: give exactly one of a repository prefix and a metadata file")
	}
	switch o.Engine {
	case "", EngineBuildKit:
		if o.BuildKit == "" {
			return nil, errors.New("no BuildKit address")
		}
	case EngineDocker:
	default:
		return nil, fmt.Errorf("unknown engine %q: want %s or %s", o.Engine, EngineBuildKit, EngineDocker)
	}
	var base *verify.Summary
	if o.Baseline != "" {
		var err error
		if base, err = verify.ReadSummary(o.Baseline); err != nil {
			return nil, fmt.Errorf("reading the baseline summary: %w", err)
		}
	}
	loaded, problems, err := loadKeepGoing(ctx, o.Inputs, log)
	if err != nil {
		return nil, err
	}
	var preds map[string]verify.Prediction
	if o.PredictionsFile != "" {
		var err error
		if preds, err = verify.ReadPredictions(o.PredictionsFile); err != nil {
			fmt.Fprintln(log, err)
			problems = append(problems, fmt.Errorf("predictions %s: %d usable prediction(s); see the errors above", o.PredictionsFile, len(preds)))
		}
	}
	imageFn, err := o.images(log, &problems)
	if err != nil {
		return nil, err
	}
	targets, terrs := verify.Targets(ctx, loaded.Renderer, loaded.Instances, o.Platforms, imageFn)
	for _, e := range terrs {
		fmt.Fprintf(log, "verify: %v\n", e)
	}
	if len(terrs) > 0 {
		problems = append(problems, fmt.Errorf("%d instance image(s) could not be verified", len(terrs)))
	}

	// The runner's workers and the engine both write progress lines.
	progress := &lockedWriter{w: log}
	engine, closeEngine, err := o.engine(ctx, progress)
	if err != nil {
		return nil, err
	}
	defer closeEngine()
	runDir, summaryFile := o.RunDir, o.SummaryFile
	if runDir == "" {
		if runDir, err = verify.NewRunDir("runs", time.Now()); err != nil {
			return nil, errors.Join(append(problems, err)...)
		}
	}
	if summaryFile == "" {
		summaryFile = filepath.Join(runDir, "summary.json")
	}
	runner := &verify.Runner{
		Engine:   engine,
		Workers:  max(o.Workers, 1),
		Timeout:  o.Timeout,
		Repeat:   max(o.Repeat, 1),
		RunDir:   runDir,
		Grade:    grading.GradeOptions{Parser: o.Parser},
		Progress: progress,
	}
	if runner.Timeout <= 0 {
		runner.Timeout = verify.DefaultTimeout
	}
	fmt.Fprintf(log, "swebuild verify: %d instance image(s); logs in %s\n", len(targets), runDir)
	sum, err := runner.Verify(ctx, targets, o.Gold, o.Control, preds)
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}
	var regressions []verify.Regression
	if base != nil {
		regressions = sum.Regressions(base)
	}
	if err := sum.WriteFile(summaryFile); err != nil {
		problems = append(problems, err)
	}
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
	return sum, errors.Join(problems...)
}

// images says where each instance's image is: under the repository prefix,
// or as the metadata file's records name it (a file with some invalid
// records still names the others; the invalid ones are a problem).
func (o VerifyOptions) images(log io.Writer, problems *[]error) (verify.ImageFunc, error) {
	if o.Images != "" {
		return verify.ImagesFromRepo(o.Images), nil
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
	return &verify.BuildKitEngine{Client: c}, func() { c.Close() }, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
