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

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/verify"
)

// runVerify implements `swebuild verify`: flags -> pipeline.VerifyOptions ->
// pipeline.Verify (run gold, control or predicted patches in containers of
// the instance images with BuildKit, grade them, write report.json and logs
// per run and a summary).
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var f verifyFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild verify --gold|--control|--predictions FILE|gold --dataset FILE|--task-repo DIR [--instance ID]... [--images REPO|oci:DIR|dataset[=REGISTRY]|--metadata-file F] [--platform P,... (default: the host's)] [--engine buildkit|docker] [--workers N] [--timeout D] [--repeat N] [--eval-script dataset|generated] [--allow-harness-changes] [--baseline FILE] [--run-dir DIR]\n\nRun patches in containers of the instance images (no network) with BuildKit or Docker and grade them as upstream SWE-bench does: by default each record's own eval_script, log_parser and eval_type, as v5 does.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	o, err := f.options(stdout, stderr)
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	_, err = pipeline.Verify(ctx, o)
	return err
}

// verifyFlags are the flags of `swebuild verify`.
type verifyFlags struct {
	g            genInputs
	gold         bool
	control      bool
	predictions  string
	images       string
	runID        string
	metadataFile string
	platforms    []core.Platform
	builderAddr  string
	engine       string
	dockerHost   string
	workers      int
	timeout      time.Duration
	repeat       int
	baseline     string
	runDir       string
	summaryFile  string
	format       string
	logParser    string
	evalScript   string
	authEnv      string
	allowHarness bool
}

func (f *verifyFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	fs.BoolVar(&f.gold, "gold", false, "run each record's gold patch")
	fs.BoolVar(&f.control, "control", false, "also run with no patch applied: must come out unresolved, or the tests do not discriminate")
	fs.StringVar(&f.predictions, "predictions", "", "upstream predictions file (JSONL or JSON array of instance_id, model_name_or_path, model_patch) to grade, or gold (the records' patches, model \"gold\"); ids not in the dataset are an error, null or empty patches are not run; writes upstream's <model>.<run_id>.json run report")
	fs.StringVar(&f.runID, "run-id", "", "run id in the run reports' names (default: the run directory's name)")
	fs.StringVar(&f.images, "images", "", "registry repository prefix holding the per-arch instance images (REPO/sweb.eval.<arch>.<id>:latest), oci:DIR (an OCI layout written by swebuild build --output type=oci,dest=DIR), or dataset[=REGISTRY]: each record's image field (sweb.eval.arm64.<id> on linux/arm64), re-rooted at REGISTRY when given")
	fs.StringVar(&f.metadataFile, "metadata-file", "", "builder metadata file naming the instance image of each platform (its pushed ref, else its OCI layout)")
	platformsVar(fs, &f.platforms, "platform", nil, "platforms to verify (default: this host's, linux/amd64 on an amd64 machine; another platform runs emulated through QEMU and its results say \"emulated\": true; x86-only instances are never run on linux/arm64)")
	fs.StringVar(&f.engine, "engine", pipeline.EngineBuildKit, "what runs the containers: buildkit (a BuildKit daemon, --builder) or docker (a Docker daemon, --docker-host)")
	fs.StringVar(&f.builderAddr, "builder", "", "BuildKit address (default $BUILDKIT_HOST)")
	fs.StringVar(&f.dockerHost, "docker-host", os.Getenv("DOCKER_HOST"), "with --engine docker: the Docker daemon's address, unix:///PATH or tcp://HOST:PORT (default $DOCKER_HOST, else unix:///var/run/docker.sock)")
	fs.IntVarP(&f.workers, "workers", "j", 2, "runs at once")
	fs.DurationVar(&f.timeout, "timeout", verify.DefaultTimeout, "time limit of each eval.sh run")
	fs.IntVar(&f.repeat, "repeat", 1, "run every instance N times and flag tests whose results differ")
	fs.StringVar(&f.baseline, "baseline", "", "earlier summary JSON: exit non-zero on any regression (resolved -> unresolved), listed first")
	fs.StringVar(&f.runDir, "run-dir", "", "directory for per-run logs and report.json (default: a new runs/verify-<UTC time>-<random>)")
	fs.StringVar(&f.summaryFile, "summary", "", "write the JSON summary here (default RUN_DIR/summary.json)")
	fs.StringVar(&f.format, "format", "table", "summary on stdout: table or json")
	fs.StringVar(&f.evalScript, "eval-script", verify.ScriptDataset, "eval script to run: dataset (the record's eval_script as upstream v5 runs it, graded by its log_parser under v5's rules; records without one use the generated script, and the results say so) or generated (the v4.1.0 eval.sh rendered from the spec tables, v4.1.0's rules)")
	fs.StringVar(&f.logParser, "log-parser", "", "upstream log parser for every repository; default: the record's log_parser with its own script, else the one the spec profile names, else upstream's map")
	fs.BoolVar(&f.allowHarness, "allow-harness-changes", false, "run predictions whose patch changes the test harness (a conftest.py the test patch does not set, a root pytest.py, sitecustomize, .pth files, test-runner configuration, a Go TestMain, .git/, the scripts the eval script runs); without it they are not run and come out patch_modifies_test_harness, naming the files. Gold patches are never refused, only reported")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (for the --images registry only) or REGISTRY=USER:PASSWORD,... for pulling the images; the Docker config and credential helpers are used too")
}

// options are the pipeline's options from the flags.
func (f *verifyFlags) options(stdout, stderr io.Writer) (pipeline.VerifyOptions, error) {
	var o pipeline.VerifyOptions
	switch {
	case !f.gold && !f.control && f.predictions == "":
		return o, errors.New("give --gold, --control or --predictions FILE")
	case (f.images == "") == (f.metadataFile == ""):
		return o, errors.New("give exactly one of --images REPO|dataset[=REGISTRY] and --metadata-file F")
	case f.workers < 1:
		return o, fmt.Errorf("--workers %d: want at least 1", f.workers)
	case f.repeat < 1:
		return o, fmt.Errorf("--repeat %d: want at least 1", f.repeat)
	case f.timeout <= 0:
		return o, fmt.Errorf("--timeout %s: want a positive duration", f.timeout)
	case f.format != "table" && f.format != "json":
		return o, fmt.Errorf("--format %q: want table or json", f.format)
	case f.logParser != "" && !slices.Contains(grading.ParserNames(), f.logParser):
		return o, fmt.Errorf("--log-parser %q: want one of %s", f.logParser, strings.Join(grading.ParserNames(), ", "))
	case f.runID != "" && verify.PathName(f.runID) != f.runID:
		return o, fmt.Errorf("--run-id %q: want a plain name ([A-Za-z0-9._-], not starting with '.')", f.runID)
	case f.evalScript != verify.ScriptDataset && f.evalScript != verify.ScriptGenerated:
		return o, fmt.Errorf("--eval-script %q: want %s or %s", f.evalScript, verify.ScriptDataset, verify.ScriptGenerated)
	case f.engine != pipeline.EngineBuildKit && f.engine != pipeline.EngineDocker:
		return o, fmt.Errorf("--engine %q: want %s or %s", f.engine, pipeline.EngineBuildKit, pipeline.EngineDocker)
	case f.engine == pipeline.EngineDocker && f.builderAddr != "":
		return o, errors.New("--builder is for --engine buildkit; with --engine docker give --docker-host")
	}
	host, hostErr := core.HostPlatform()
	plats, err := verifyPlatforms(f.platforms, host, hostErr)
	if err != nil {
		return o, err
	}
	in, err := f.g.inputs(stderr)
	if err != nil {
		return o, err
	}
	addr := f.builderAddr
	if addr == "" && f.engine == pipeline.EngineBuildKit {
		addr = f.g.env.buildkitHost
		if addr == "" {
			return o, errors.New("no builder: pass --builder ADDR or set BUILDKIT_HOST (or use --engine docker)")
		}
	}
	var datasetImages bool
	images, datasetRegistry := f.images, ""
	if rest, ok := strings.CutPrefix(f.images, "dataset"); ok && (rest == "" || strings.HasPrefix(rest, "=")) {
		datasetImages, images = true, ""
		if rest != "" {
			if datasetRegistry = strings.TrimPrefix(rest, "="); datasetRegistry == "" {
				return o, errors.New("--images dataset=: want a registry (and path) after '='")
			}
		}
	}
	dest := ""
	switch {
	case strings.HasPrefix(images, "oci:"):
		// An OCI layout: no registry to log in to.
	case images != "":
		if dest, err = registry.RegistryOf(images); err != nil {
			return o, fmt.Errorf("--images: %w", err)
		}
	case datasetRegistry != "":
		if dest, err = registry.RegistryOf(datasetRegistry); err != nil {
			return o, fmt.Errorf("--images dataset=: %w", err)
		}
	}
	creds, reader, err := verifyRegistry(f.authEnv, dest)
	if err != nil {
		return o, err
	}
	return pipeline.VerifyOptions{
		Inputs:          in,
		DatasetImages:   datasetImages,
		DatasetRegistry: datasetRegistry,
		RunID:           f.runID,
		Platforms:       plats,
		Host:            host,
		Gold:            f.gold,
		Control:         f.control,
		PredictionsFile: f.predictions,
		Images:          images,
		MetadataFile:    f.metadataFile,
		BuildKit:        addr,
		Auth:            verifyAuth(creds),
		Reader:          reader,
		Engine:          f.engine,
		DockerHost:      f.dockerHost,
		Workers:         f.workers,
		Repeat:          f.repeat,
		Timeout:         f.timeout,
		Parser:          f.logParser,
		EvalScript:      f.evalScript,
		Baseline:        f.baseline,

		AllowHarnessChanges: f.allowHarness,
		RunDir:              f.runDir,
		SummaryFile:         f.summaryFile,
		JSON:                f.format == "json",
		Out:                 stdout,
		Log:                 stderr,
	}, nil
}

// verifyPlatforms are the platforms verify runs: those given with
// --platform, else the host's (core.HostPlatform: host, or hostErr when
// this machine is neither amd64 nor arm64, and --platform is then needed).
// Another platform than the host's is only run when asked: it is emulated.
func verifyPlatforms(given []core.Platform, host core.Platform, hostErr error) ([]core.Platform, error) {
	if len(given) > 0 {
		plats, err := core.PlatformSet(given)
		if err != nil {
			return nil, fmt.Errorf("--platform: %w", err)
		}
		return plats, nil
	}
	if hostErr != nil {
		return nil, fmt.Errorf("no --platform given and no default: %w; give --platform linux/amd64 and/or linux/arm64", hostErr)
	}
	return []core.Platform{host}, nil
}

// verifyRegistry is verify's credential source (for BuildKit's pulls) and
// its publication reader (resolving the images before any run), on one
// credential source.
func verifyRegistry(authEnv, dest string) (*registry.Credentials, *publication.Reader, error) {
	creds, err := registryCredentials(authEnv, dest)
	if err != nil {
		return nil, nil, fmt.Errorf("--registry-auth-env: %w", err)
	}
	client, err := registry.New(registry.Options{Keychain: creds})
	if err != nil {
		return nil, nil, err
	}
	return creds, publication.New(client), nil
}

// verifyBuildFlags are the flags `swebuild build --verify` adds.
type verifyBuildFlags struct {
	timeout    time.Duration
	logParser  string
	evalScript string
	reverify   bool
	repeat     int
	control    bool
}

func (v *verifyBuildFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&v.repeat, "verify-repeat", 1, "with --verify: run each gold patch this many times (network off); a gold that resolves in some runs only is flaky: exported and published labelled, never as verified, its tests' failure rates in the statement (the nightly runs 3)")
	fs.BoolVar(&v.control, "verify-control", true, "with --verify: after the gold runs, run the tests once with no patch: they must fail (else the image is not exported: its tests do not tell a fix from none); the statement records the control")
	fs.DurationVar(&v.timeout, "verify-timeout", verify.DefaultTimeout, "with --verify: time limit of each eval.sh run")
	fs.StringVar(&v.logParser, "log-parser", "", "with --verify: upstream log parser for every repository; default: the one the spec profile names, else upstream's map")
	fs.StringVar(&v.evalScript, "verify-eval-script", verify.ScriptDataset, "with --verify: eval script to run: dataset (the record's, as upstream v5 runs it; generated where a record has none) or generated (the v4.1.0 eval.sh)")
	fs.BoolVar(&v.reverify, "reverify", false, "with --verify: run every gold check even when $SWEBUILD_CACHE/verify holds a success for the same image definition and inputs")
}

// options are the gold check's options from the flags.
func (v *verifyBuildFlags) options(env datasetEnv, stderr io.Writer) (pipeline.GoldCheckOptions, error) {
	if v.timeout <= 0 {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--verify-timeout %s: want a positive duration", v.timeout)
	}
	if v.repeat < 1 || v.repeat > 100 {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--verify-repeat %d: want 1 to 100 runs", v.repeat)
	}
	if v.logParser != "" && !slices.Contains(grading.ParserNames(), v.logParser) {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--log-parser %q: want one of %s", v.logParser, strings.Join(grading.ParserNames(), ", "))
	}
	if v.evalScript != verify.ScriptDataset && v.evalScript != verify.ScriptGenerated {
		return pipeline.GoldCheckOptions{}, fmt.Errorf("--verify-eval-script %q: want %s or %s", v.evalScript, verify.ScriptDataset, verify.ScriptGenerated)
	}
	return pipeline.GoldCheckOptions{
		Timeout:    v.timeout,
		Parser:     v.logParser,
		EvalScript: v.evalScript,
		CacheDir:   filepath.Join(env.cacheRoot, "verify"),
		Reverify:   v.reverify,
		Repeat:     v.repeat,
		Control:    v.control,
		Progress:   stderr,
	}, nil
}
