package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/verify"
)

// runVerify implements `swebuild verify`: run gold (control, predicted)
// patches in containers of the instance images with BuildKit, grade them,
// write report.json and logs per run and a summary.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		g            genInputs
		gold         bool
		control      bool
		predictions  string
		images       string
		metadataFile string
		platforms    []string
		builderAddr  string
		workers      int
		timeout      time.Duration
		repeat       int
		baseline     string
		runDir       string
		summaryFile  string
		format       string
		logParser    string
	)
	g.register(fs)
	fs.BoolVar(&gold, "gold", false, "run each record's gold patch")
	fs.BoolVar(&control, "control", false, "also run with no patch applied: must come out unresolved, or the tests do not discriminate")
	fs.StringVar(&predictions, "predictions", "", "upstream predictions file (JSONL or JSON array of instance_id, model_name_or_path, model_patch) to grade")
	fs.StringVar(&images, "images", "", "registry repository prefix holding the per-arch instance images (REPO/sweb.eval.<arch>.<id>:latest)")
	fs.StringVar(&metadataFile, "metadata-file", "", "builder metadata file naming the pushed instance image of each platform")
	fs.StringSliceVar(&platforms, "platform", []string{core.AMD64.String(), core.ARM64.String()}, "platforms to verify (x86-only instances are never run on linux/arm64)")
	fs.StringVar(&builderAddr, "builder", "", "BuildKit address (default $BUILDKIT_HOST)")
	fs.IntVarP(&workers, "workers", "j", 2, "runs at once")
	fs.DurationVar(&timeout, "timeout", verify.DefaultTimeout, "time limit of each eval.sh run")
	fs.IntVar(&repeat, "repeat", 1, "run every instance N times and flag tests whose results differ")
	fs.StringVar(&baseline, "baseline", "", "earlier summary JSON: exit non-zero on any regression (resolved -> unresolved), listed first")
	fs.StringVar(&runDir, "run-dir", "", "directory for per-run logs and report.json (default runs/verify-<UTC time>)")
	fs.StringVar(&summaryFile, "summary", "", "write the JSON summary here (default RUN_DIR/summary.json)")
	fs.StringVar(&format, "format", "table", "summary on stdout: table or json")
	fs.StringVar(&logParser, "log-parser", "", "upstream log parser for every repository; default: the one the spec profile names, else upstream's map")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild verify --gold|--control|--predictions FILE --dataset FILE [--instance ID]... [--images REPO|--metadata-file F] [--platform ...] [--workers N] [--timeout D] [--repeat N] [--baseline FILE] [--run-dir DIR]\n\nRun patches in containers of the instance images (no network) with BuildKit and grade them as upstream SWE-bench v4.1.0 does.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "swebuild verify: "+format+"\n", a...)
		fs.Usage()
		return errUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	case !gold && !control && predictions == "":
		return usageErr("give --gold, --control or --predictions FILE")
	case (images == "") == (metadataFile == ""):
		return usageErr("give exactly one of --images REPO and --metadata-file F")
	case workers < 1:
		return usageErr("--workers %d: want at least 1", workers)
	case repeat < 1:
		return usageErr("--repeat %d: want at least 1", repeat)
	case timeout <= 0:
		return usageErr("--timeout %s: want a positive duration", timeout)
	case format != "table" && format != "json":
		return usageErr("--format %q: want table or json", format)
	case logParser != "" && !slices.Contains(grading.ParserNames(), logParser):
		return usageErr("--log-parser %q: want one of %s", logParser, strings.Join(grading.ParserNames(), ", "))
	}
	for i, p := range platforms {
		cp, err := core.ParsePlatform(p)
		if err != nil {
			return usageErr("--platform %q: want linux/amd64 or linux/arm64", p)
		}
		platforms[i] = cp.String()
	}
	var base *verify.Summary
	if baseline != "" {
		var err error
		if base, err = verify.ReadSummary(baseline); err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
	}
	if runDir == "" {
		runDir = filepath.Join("runs", "verify-"+time.Now().UTC().Format("20060102-150405"))
	}
	if summaryFile == "" {
		summaryFile = filepath.Join(runDir, "summary.json")
	}

	var problems []error
	loaded, loadErr := g.load(ctx, stderr)
	if errors.Is(loadErr, errUsage) {
		return usageErr("%v", loadErr)
	}
	if loaded == nil {
		return loadErr
	}
	r, insts := loaded.Renderer, loaded.Instances
	if loadErr != nil {
		problems = append(problems, loadErr)
	}
	var preds map[string]verify.Prediction
	if predictions != "" {
		var err error
		preds, err = verify.ReadPredictions(predictions)
		if err != nil {
			fmt.Fprintln(stderr, err)
			problems = append(problems, fmt.Errorf("--predictions %s: %d usable prediction(s); the rest are bad", predictions, len(preds)))
		}
	}
	var imageFn verify.ImageFunc
	if images != "" {
		imageFn = verify.ImagesFromRepo(images)
	} else {
		recs, err := core.ReadFile(metadataFile)
		if len(recs) == 0 && err != nil {
			return fmt.Errorf("--metadata-file: %w", err)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			problems = append(problems, fmt.Errorf("--metadata-file %s has invalid records", metadataFile))
		}
		imageFn = verify.ImagesFromRecords(recs, metadataFile)
	}
	targets, terrs := verify.Targets(ctx, r, insts, platforms, imageFn)
	for _, e := range terrs {
		fmt.Fprintf(stderr, "swebuild verify: %v\n", e)
	}
	if len(terrs) > 0 {
		problems = append(problems, fmt.Errorf("%d instance image(s) could not be verified", len(terrs)))
	}

	addr := builderAddr
	if addr == "" {
		addr = os.Getenv("BUILDKIT_HOST")
	}
	if addr == "" {
		return errors.New("no builder: pass --builder ADDR or set BUILDKIT_HOST")
	}
	c, err := bkclient.New(ctx, addr)
	if err != nil {
		return fmt.Errorf("connecting to BuildKit at %s: %w", addr, err)
	}
	defer c.Close()
	runner := &verify.Runner{
		Engine:   &verify.BuildKitEngine{Client: c},
		Workers:  workers,
		Timeout:  timeout,
		Repeat:   repeat,
		RunDir:   runDir,
		Grade:    grading.GradeOptions{Parser: logParser},
		Progress: stderr,
	}
	fmt.Fprintf(stderr, "swebuild verify: %d instance image(s); logs in %s\n", len(targets), runDir)
	sum, err := runner.Verify(ctx, targets, gold, control, preds)
	if err != nil {
		return errors.Join(append(problems, err)...)
	}
	var regressions []verify.Regression
	if base != nil {
		regressions = sum.Regressions(base)
	}
	if err := sum.WriteFile(summaryFile); err != nil {
		problems = append(problems, err)
	}
	if format == "json" {
		err = sum.WriteJSON(stdout)
	} else {
		err = sum.WriteTable(stdout, regressions)
	}
	if err != nil {
		problems = append(problems, err)
	}
	if n := len(regressions); n > 0 {
		problems = append(problems, fmt.Errorf("%d regression(s) against %s", n, baseline))
	}
	if n := len(sum.Failed()); n > 0 {
		problems = append(problems, fmt.Errorf("%d of %d verification result(s) failed", n, len(sum.Results)))
	}
	return errors.Join(problems...)
}

// verifyBuildFlags are the flags `swebuild build --verify` adds.
type verifyBuildFlags struct {
	timeout   time.Duration
	logParser string
	reverify  bool
}

func (v *verifyBuildFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&v.timeout, "verify-timeout", verify.DefaultTimeout, "with --verify: time limit of each eval.sh run")
	fs.StringVar(&v.logParser, "log-parser", "", "with --verify: upstream log parser for every repository; default: the one the spec profile names, else upstream's map")
	fs.BoolVar(&v.reverify, "reverify", false, "with --verify: run every gold check even when $SWEBUILD_CACHE/verify holds a success for the same image definition and inputs")
}

// options are the gold check's options from the flags.
func (v *verifyBuildFlags) options(env datasetEnv, stderr io.Writer) (pipeline.GoldCheckOptions, error) {
	if v.timeout <= 0 {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--verify-timeout %s: want a positive duration", v.timeout)
	}
	if v.logParser != "" && !slices.Contains(grading.ParserNames(), v.logParser) {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--log-parser %q: want one of %s", v.logParser, strings.Join(grading.ParserNames(), ", "))
	}
	return pipeline.GoldCheckOptions{
		Timeout:  v.timeout,
		Parser:   v.logParser,
		CacheDir: filepath.Join(env.cacheRoot, "verify"),
		Reverify: v.reverify,
		Progress: stderr,
	}, nil
}
