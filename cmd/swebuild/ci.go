package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// ciCommands are the subcommands of `swebuild ci`.
func ciCommands() []command {
	return []command{
		{"matrix", "shard the instances into a GitHub matrix, skipping what the registry has", runCIMatrix},
		{"envs", "build and push by digest one env-stage job's base and env images", runCIEnvs},
		{"contexts", "print the --build-context of an instance's env from the env stage", runCIContexts},
		{"ids", "print the instance ids of one matrix job, one per line", runCIIDs},
		{"repair", "find the package that broke tonight's gold patches, pin it with evidence", runCIRepair},
		{"merge", "decide per instance what to index and what regressed", runCIMerge},
		{"summary", "write the Markdown job summary; fail on regressions", runCISummary},
		{"ledger", "pull or push a ledger kept as an artifact in the target repository", runCILedger},
	}
}

// runCI dispatches `swebuild ci matrix|ids|merge|summary|...`.
func runCI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "ci", "Helpers for the nightly GitHub Actions workflow.", "matrix, ids, merge or summary", ciCommands(), args, stdout, stderr)
}

func newCIFlags(name, synopsis, what string, stderr io.Writer) *pflag.FlagSet {
	fs := newFlagSet("ci "+name, stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild ci %s %s\n\n%s\n\nOptions:\n", name, synopsis, what)
		fs.PrintDefaults()
	}
	return fs
}

// planFlag registers --plan, the plan file `ci matrix --plan-out` writes,
// which ci envs, contexts and merge read (and require: requireFlags).
func planFlag(fs *pflag.FlagSet) *string {
	return fs.String("plan", "", "plan written by `ci matrix --plan-out`")
}

// recordsFlag registers a repeatable flag of build records as ci.ReadRecords
// reads them: what (e.g. "shard build records") in a metadata file or a
// directory's *.jsonl files.
func recordsFlag(fs *pflag.FlagSet, name, what string) *[]string {
	return fs.StringArray(name, nil, what+": a metadata file, or a directory whose *.jsonl files are read (repeatable)")
}

// requiredFlag is a string flag a ci command cannot run without; why, when
// set, says what needs it.
type requiredFlag struct{ name, why string }

// requireFlags reports the first flag of reqs whose value is empty as a
// usage error ("--NAME is required[: why]").
func requireFlags(fs *pflag.FlagSet, stderr io.Writer, reqs ...requiredFlag) error {
	for _, r := range reqs {
		f := fs.Lookup(r.name)
		if f == nil {
			return fmt.Errorf("swebuild %s: no flag --%s to require", fs.Name(), r.name)
		}
		if f.Value.String() != "" {
			continue
		}
		if r.why != "" {
			return usageErr(fs, stderr, "--%s is required: %s", r.name, r.why)
		}
		return usageErr(fs, stderr, "--%s is required", r.name)
	}
	return nil
}

// ciMatrixFlags are the flags of `swebuild ci matrix`.
type ciMatrixFlags struct {
	g                                      genInputs
	ids, skipRepo, ledger, planOut, idsDir string
	envLedger, githubOutput, authEnv       string
	contextDirs, runners                   []string
	platforms                              []core.Platform
	shards, maxJobs, envShards, parallel   int
	force, envStage, insecure              bool
}

func (f *ciMatrixFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	fs.StringVar(&f.ids, "ids", "", "file of instance ids, one per line, instead of --dataset or --task-repo (platforms decided from the id alone)")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding profile context files, as for build (default $SWEBUILD_CACHE/rootfs)")
	platformsVar(fs, &f.platforms, "platform", core.AllPlatforms(), "platforms to build")
	fs.IntVar(&f.shards, "shards", 32, "shards per platform (lowered to fit 256 jobs and the instance count)")
	fs.IntVar(&f.maxJobs, "max-jobs", ci.MaxMatrixJobs, "most matrix jobs in total")
	fs.StringArrayVar(&f.runners, "runner", nil, "runner for a platform: PLATFORM=LABEL[@RUNNER_PLATFORM] (QEMU when they differ); default linux/amd64=ubuntu-24.04, linux/arm64=ubuntu-24.04-arm")
	fs.StringVar(&f.skipRepo, "skip-existing", "", "skip images the ledger records as verified and that this registry repository prefix still holds by digest")
	fs.StringVar(&f.ledger, "ledger", "", "publish ledger (JSON lines) to read with --skip-existing; a missing file means nothing exists yet")
	fs.BoolVar(&f.force, "force", false, "build everything: ignore --skip-existing")
	fs.StringVar(&f.planOut, "plan-out", "", "write the plan (per instance: build in which shard, or reuse which digest) for `ci merge`")
	fs.StringVar(&f.idsDir, "ids-dir", "", "directory for per-shard id files, used when the matrix would exceed the 1 MiB job output limit")
	fs.BoolVar(&f.envStage, "env-stage", true, "plan the env stage: the env images the shards need are built once per platform by `ci envs` jobs (envs_matrix=...), or reused from --env-ledger")
	fs.StringVar(&f.envLedger, "env-ledger", "", "env stage records of earlier nights (JSON lines); an env built from the same inputs that --skip-existing's registry still holds is reused")
	fs.IntVar(&f.envShards, "env-shards", 1, "env jobs per platform at most (a base's envs stay in one job)")
	fs.StringVar(&f.githubOutput, "github-output", os.Getenv("GITHUB_OUTPUT"), "append matrix=..., jobs=N, envs_matrix=... and envs_jobs=N to this file (default $GITHUB_OUTPUT)")
	fs.IntVar(&f.parallel, "registry-parallel", 8, "registry lookups at once for --skip-existing")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (or REGISTRY=USER:PASSWORD,...); the Docker config and credential helpers are used otherwise")
	fs.BoolVar(&f.insecure, "insecure-registry", false, "allow plain HTTP to a non-loopback registry")
}

// options are the pipeline's options from the flags; a usage problem is
// a usageProblem.
func (f *ciMatrixFlags) options(stderr io.Writer) (pipeline.MatrixOptions, error) {
	stderr = core.SyncWriter(stderr) // its workers write at once
	o := pipeline.MatrixOptions{IDsFile: f.ids, Ledger: f.ledger, SkipRepo: f.skipRepo, Force: f.force, Parallel: f.parallel,
		PlanOut: f.planOut, IDsDir: f.idsDir, Log: stderr, EnvStage: f.envStage, EnvLedger: f.envLedger, EnvShards: f.envShards,
		ContextDirs: f.contextDirs}
	if f.g.given() == (f.ids != "") {
		return o, usageProblem{errors.New("exactly one of --dataset, --task-repo and --ids is required")}
	}
	runners, err := ci.ParseRunners(f.runners)
	if err != nil {
		return o, err
	}
	if f.envShards < 1 {
		return o, usageProblem{fmt.Errorf("--env-shards %d: want at least 1", f.envShards)}
	}
	o.Inputs = pipeline.Inputs{Specs: f.g.specs, Pins: f.g.pins, SpecsVersion: f.g.specsVer}
	if f.g.given() {
		if o.Inputs, err = f.g.inputs(stderr); err != nil {
			return o, usageProblem{err}
		}
	}
	o.Matrix = ci.MatrixOptions{Platforms: f.platforms, Shards: f.shards, MaxJobs: f.maxJobs, Runners: runners}
	if len(o.ContextDirs) == 0 {
		o.ContextDirs = []string{filepath.Join(f.g.env.cacheRoot, "rootfs")}
	}
	if f.skipRepo != "" && !f.force {
		o.Registry, err = registryClient(f.authEnv, f.skipRepo, "--skip-existing", registry.Options{Insecure: f.insecure, Concurrency: f.parallel})
	}
	return o, err
}

func runCIMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("matrix", "(--dataset FILE | --task-repo DIR | --ids FILE) [OPTIONS]",
		"Shard the instances per platform into a GitHub Actions matrix ({\"include\":[...]}) on stdout.\n"+
			"Never more than 256 jobs; shard sizes per platform differ by at most one; x86-only\n"+
			"instances (USE_X86) get no arm64 job.", stderr)
	var f ciMatrixFlags
	f.register(fs)
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	o, err := f.options(stderr)
	var up usageProblem
	if errors.As(err, &up) {
		return usageErr(fs, stderr, "%v", up.error)
	}
	if err != nil {
		return err
	}
	m, out, err := pipeline.Matrix(ctx, o)
	if err != nil {
		return err
	}
	lines, err := ci.MatrixOutput(m, out)
	if err != nil {
		return err
	}
	if err := ci.AppendGitHubOutput(f.githubOutput, lines); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
func runCIEnvs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("envs", "--dataset FILE --plan FILE --job NAME --push REPO [OPTIONS]",
		"Build one env-stage job of the plan (`ci matrix --plan-out`): its env images and the base images\n"+
			"they build FROM, pushed by digest to --push, one record per image in --metadata-file (what\n"+
			"`ci contexts` binds and the env ledger keeps).", stderr)
	f := ciBuildFlags(fs, "push every image by digest to this repository (required)")
	planPath := planFlag(fs)
	job := fs.String("job", "", "env job name (the envs matrix's name, e.g. envs-amd64-0)")
	fs.StringArrayVar(&f.bk.CacheFrom, "cache-from", nil, "cache import, e.g. type=registry,ref=HOST/REPO:cache (repeatable)")
	fs.StringArrayVar(&f.bk.CacheTo, "cache-to", nil, "cache export, e.g. type=registry,ref=HOST/REPO:cache,mode=max (repeatable)")
	fs.StringVar(&f.metadataFile, "metadata-file", "", "write one record per image (digest, pushed ref, spec key) to this file (required)")
	fs.StringVar(&f.bk.RunDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	f.registerBuilderID(fs)
	if help, err := parseFlags(fs, args, false, stdout, stderr); help {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "plan"}, requiredFlag{name: "job"},
		requiredFlag{"push", "the instance shards start from the pushed digests"},
		requiredFlag{"metadata-file", "the instance shards read the env digests from it"}); err != nil {
		return err
	}
	plan, err := ci.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	platform, keys, err := plan.EnvJobKeys(*job)
	if err != nil {
		return err
	}
	f.platforms = []core.Platform{platform}
	bo, err := f.options(stdout, stderr)
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	_, err = pipeline.BuildEnvs(ctx, bo, keys)
	return err
}

func runCIContexts(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("contexts", "--plan FILE --envs PATH... --platform P --instance ID",
		"Print the env image an instance shard's build of ID starts from, as KEY=docker-image://REF for\n"+
			"`swebuild build --build-context`: the env stage's pushed digest (--envs: the env jobs' metadata\n"+
			"files or directories) or the one the plan reuses. Prints nothing when the plan names no env\n"+
			"for it; fails naming the env when its env job failed or left no record.", stderr)
	planPath := planFlag(fs)
	envs := recordsFlag(fs, "envs", "env job records")
	platform := fs.String("platform", "", "the shard's platform")
	instance := fs.String("instance", "", "instance id")
	failureRecord := fs.String("failure-record", "", "when the env is not available, also write a failed record of the instance image here (the shard's metadata file, so `ci merge` says why)")
	if help, err := parseFlags(fs, args, false, stdout, stderr); help {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "plan"}, requiredFlag{name: "instance"}); err != nil {
		return err
	}
	pl, err := core.ParsePlatform(*platform)
	if err != nil {
		return usageErr(fs, stderr, "--platform: %v", err)
	}
	plan, err := ci.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	var recs []core.Image
	if len(*envs) > 0 {
		if recs, err = ci.ReadRecords(*envs, stderr); err != nil {
			return err
		}
	}
	key, ref, err := plan.EnvBinding(recs, *instance, pl)
	if err != nil && *failureRecord != "" {
		return ci.WriteEnvUnavailable(*failureRecord, *instance, pl, err)
	}
	if err != nil || key == "" {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s=docker-image://%s\n", key, ref)
	return err
}

func runCIIDs(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("ids", "(--ids A,B,C | --ids-file FILE)",
		"Print one matrix job's instance ids, one per line (the job's ids, or its ids_file).", stderr)
	inline := fs.String("ids", "", "comma-separated ids (the job's ids)")
	file := fs.String("ids-file", "", "file of ids, one per line (the job's ids_file)")
	if help, err := parseFlags(fs, args, false, stdout, stderr); help {
		return err
	}
	if *inline != "" && *file != "" {
		return usageErr(fs, stderr, "only one of --ids and --ids-file")
	}
	ids, err := ci.JobIDs(*inline, *file)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, strings.Join(ids, "\n"))
	return err
}

func runCIMerge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("merge", "--plan FILE --results PATH... [OPTIONS]",
		"Read every shard's build metadata (files or directories) against the plan and decide per\n"+
			"instance what to index and what regressed. Writes the merge report (for `ci summary`),\n"+
			"the publish metadata of the instances to index (for `swebuild publish`), and exits 1\n"+
			"when anything regressed or failed unless --fail-on-regression=false.", stderr)
	planPath := planFlag(fs)
	results := recordsFlag(fs, "results", "shard build records")
	out := fs.String("out", "merge.json", "merge report (JSON)")
	publishOut := fs.String("publish-metadata", "", "write the metadata file for `swebuild publish` (instances to index)")
	failOn := fs.Bool("fail-on-regression", true, "exit 1 when an instance regressed or failed")
	githubOutput := fs.String("github-output", os.Getenv("GITHUB_OUTPUT"), "append indexed=N, regressed=N, failed=N to this file (default $GITHUB_OUTPUT)")
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "plan"}); err != nil {
		return err
	}
	plan, err := ci.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	var recs []core.Image
	var readErr error
	if len(*results) > 0 {
		// Bad lines are reported and the rest merged: their images count as
		// missing, so the run still fails.
		if recs, readErr = ci.ReadRecords(*results, stderr); readErr != nil {
			fmt.Fprintln(stderr, readErr)
		}
	}
	rep := ci.Merge(plan, recs)
	if err := ci.WriteReport(*out, rep); err != nil {
		return err
	}
	if *publishOut != "" {
		if err := rep.WritePublishMetadata(*publishOut); err != nil {
			return err
		}
	}
	if err := ci.AppendGitHubOutput(*githubOutput, rep.GitHubOutput()); err != nil {
		return err
	}
	rep.WriteText(stdout)
	if readErr != nil {
		return errors.New("some shard results could not be read (see above)")
	}
	if *failOn {
		return rep.Err()
	}
	return nil
}

func runCISummary(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("summary", "--merge FILE [OPTIONS]",
		"Write the Markdown job summary (regressions first) for $GITHUB_STEP_SUMMARY, then exit 1\n"+
			"if anything regressed or failed, sizes grew or environments drifted over the limit.", stderr)
	mergePath := fs.String("merge", "merge.json", "merge report written by `ci merge`")
	sizesPath := fs.String("sizes", "", "Markdown report from `swebuild sizes --format md` to include")
	var o ci.SummaryOptions
	fs.BoolVar(&o.SizesFailed, "sizes-failed", false, "the sizes step failed (growth over --max-growth): a regression")
	driftPath := fs.String("drift", "", "Markdown report from `swebuild drift --format md` to include")
	fs.BoolVar(&o.DriftFailed, "drift-failed", false, "the drift step failed (more package changes than --max-drift, or a document unreadable)")
	repairPath := fs.String("repair", "", "Markdown report from `swebuild ci repair` (its report.md) to include")
	fs.StringVar(&o.Title, "title", "", "heading (default \"swebuild nightly\")")
	outPath := fs.StringP("output", "o", "", "write here instead of stdout (appends, like $GITHUB_STEP_SUMMARY)")
	failOn := fs.Bool("fail-on-regression", true, "exit 1 when the run has regressions")
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	rep, err := ci.ReadReport(*mergePath)
	if err != nil {
		return err
	}
	if err := o.ReadReports(*sizesPath, *driftPath, *repairPath); err != nil {
		return err
	}
	if err := ci.AppendSummary(*outPath, stdout, rep, o); err != nil {
		return err
	}
	if *failOn {
		return o.RunErr(rep)
	}
	return nil
}
