package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
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
	fs := newFlagSet("verify", stderr)
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
	stdout, stderr = core.SyncWriter(stdout), core.SyncWriter(stderr) // its workers write at once
	o := pipeline.VerifyOptions{Gold: f.gold, Control: f.control, PredictionsFile: f.predictions, Images: f.images,
		MetadataFile: f.metadataFile, RunID: f.runID, BuildKit: f.builderAddr, Engine: f.engine, DockerHost: f.dockerHost,
		Workers: f.workers, Repeat: f.repeat, Timeout: f.timeout, Parser: f.logParser, EvalScript: f.evalScript,
		Baseline: f.baseline, AllowHarnessChanges: f.allowHarness, RunDir: f.runDir, SummaryFile: f.summaryFile,
		JSON: f.format == "json", Out: stdout, Log: stderr}
	if f.format != "table" && f.format != "json" {
		return o, fmt.Errorf("--format %q: want table or json", f.format)
	}
	dest, err := o.Check()
	if err != nil {
		return o, err
	}
	host, hostErr := core.HostPlatform()
	if o.Platforms, err = pipeline.VerifyPlatforms(f.platforms, host, hostErr); err != nil {
		return o, err
	}
	o.Host = host
	if o.Inputs, err = f.g.inputs(stderr); err != nil {
		return o, err
	}
	if o.BuildKit == "" && o.Engine == pipeline.EngineBuildKit {
		if o.BuildKit = f.g.env.buildkitHost; o.BuildKit == "" {
			return o, errors.New("no builder: pass --builder ADDR or set BUILDKIT_HOST (or use --engine docker)")
		}
	}
	creds, reader, err := verifyRegistry(f.authEnv, dest)
	o.Auth, o.Reader = verifyAuth(creds), reader
	return o, err
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
	o := pipeline.GoldCheckOptions{Timeout: v.timeout, Parser: v.logParser, EvalScript: v.evalScript,
		CacheDir: filepath.Join(env.cacheRoot, "verify"), Reverify: v.reverify, Repeat: v.repeat, Control: v.control, Progress: stderr}
	return o, o.Check()
}
