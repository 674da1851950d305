package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// runCI dispatches `swebuild ci matrix|ids|merge|summary`.
func runCI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: swebuild ci COMMAND [OPTIONS]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Helpers for the nightly GitHub Actions workflow.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Commands:")
		fmt.Fprintln(w, "  matrix    shard the instances into a GitHub matrix, skipping what the registry has")
		fmt.Fprintln(w, "  envs      build and push by digest one env-stage job's base and env images")
		fmt.Fprintln(w, "  contexts  print the --build-context of an instance's env from the env stage")
		fmt.Fprintln(w, "  ids       print the instance ids of one matrix job, one per line")
		fmt.Fprintln(w, "  repair    find the package that broke tonight's gold patches, pin it with evidence")
		fmt.Fprintln(w, "  merge     decide per instance what to index and what regressed")
		fmt.Fprintln(w, "  summary   write the Markdown job summary; fail on regressions")
		fmt.Fprintln(w, "  ledger    pull or push a ledger kept as an artifact in the target repository")
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "swebuild ci: a command is required (matrix, ids, merge or summary)\nSee 'swebuild ci --help'.\n")
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return nil
	case "matrix":
		return runCIMatrix(ctx, args[1:], stdout, stderr)
	case "ids":
		return runCIIDs(args[1:], stdout, stderr)
	case "envs":
		return runCIEnvs(ctx, args[1:], stdout, stderr)
	case "contexts":
		return runCIContexts(args[1:], stdout, stderr)
	case "repair":
		return runCIRepair(ctx, args[1:], stdout, stderr)
	case "merge":
		return runCIMerge(args[1:], stdout, stderr)
	case "summary":
		return runCISummary(args[1:], stdout, stderr)
	case "ledger":
		return runCILedger(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "swebuild ci: unknown command %q\nSee 'swebuild ci --help'.\n", args[0])
	return errUsage
}

func newCIFlags(name, synopsis, what string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("ci "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild ci %s %s\n\n%s\n\nOptions:\n", name, synopsis, what)
		fs.PrintDefaults()
	}
	return fs
}

// parseCIFlags is parseFlags for the ci subcommands (no positional
// arguments).
func parseCIFlags(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (done bool, err error) {
	return parseFlags(fs, args, false, stdout, stderr)
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

func runCIMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("matrix", "(--dataset FILE | --task-repo DIR | --ids FILE) [OPTIONS]",
		"Shard the instances per platform into a GitHub Actions matrix ({\"include\":[...]}) on stdout.\n"+
			"Never more than 256 jobs; shard sizes per platform differ by at most one; x86-only\n"+
			"instances (USE_X86) get no arm64 job.", stderr)
	var g genInputs
	g.register(fs)
	idsPath := fs.String("ids", "", "file of instance ids, one per line, instead of --dataset or --task-repo (platforms decided from the id alone)")
	contextDirs := fs.StringArray("context-dir", nil, "directory holding profile context files, as for build (default $SWEBUILD_CACHE/rootfs)")
	var platforms []core.Platform
	platformsVar(fs, &platforms, "platform", core.AllPlatforms(), "platforms to build")
	shards := fs.Int("shards", 32, "shards per platform (lowered to fit 256 jobs and the instance count)")
	maxJobs := fs.Int("max-jobs", ci.MaxMatrixJobs, "most matrix jobs in total")
	runnerFlags := fs.StringArray("runner", nil, "runner for a platform: PLATFORM=LABEL[@RUNNER_PLATFORM] (QEMU when they differ); default linux/amd64=ubuntu-24.04, linux/arm64=ubuntu-24.04-arm")
	skipRepo := fs.String("skip-existing", "", "skip images the ledger records as verified and that this registry repository prefix still holds by digest")
	ledgerPath := fs.String("ledger", "", "publish ledger (JSON lines) to read with --skip-existing; a missing file means nothing exists yet")
	force := fs.Bool("force", false, "build everything: ignore --skip-existing")
	planOut := fs.String("plan-out", "", "write the plan (per instance: build in which shard, or reuse which digest) for `ci merge`")
	idsDir := fs.String("ids-dir", "", "directory for per-shard id files, used when the matrix would exceed the 1 MiB job output limit")
	envStage := fs.Bool("env-stage", true, "plan the env stage: the env images the shards need are built once per platform by `ci envs` jobs (envs_matrix=...), or reused from --env-ledger")
	envLedger := fs.String("env-ledger", "", "env stage records of earlier nights (JSON lines); an env built from the same inputs that --skip-existing's registry still holds is reused")
	envShards := fs.Int("env-shards", 1, "env jobs per platform at most (a base's envs stay in one job)")
	githubOutput := fs.String("github-output", os.Getenv("GITHUB_OUTPUT"), "append matrix=..., jobs=N, envs_matrix=... and envs_jobs=N to this file (default $GITHUB_OUTPUT)")
	parallel := fs.Int("registry-parallel", 8, "registry lookups at once for --skip-existing")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (or REGISTRY=USER:PASSWORD,...); the Docker config and credential helpers are used otherwise")
	insecure := fs.Bool("insecure-registry", false, "allow plain HTTP to a non-loopback registry")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	if g.given() == (*idsPath != "") {
		return usageErr(fs, stderr, "exactly one of --dataset, --task-repo and --ids is required")
	}
	runners, err := parseRunners(*runnerFlags)
	if err != nil {
		return err
	}
	if *envShards < 1 {
		return usageErr(fs, stderr, "--env-shards %d: want at least 1", *envShards)
	}
	var in pipeline.Inputs
	if g.given() {
		if in, err = g.inputs(stderr); err != nil {
			return usageErr(fs, stderr, "%v", err)
		}
	} else {
		in = pipeline.Inputs{Specs: g.specs, Pins: g.pins, SpecsVersion: g.specsVer}
	}
	o := pipeline.MatrixOptions{
		Inputs:   in,
		IDsFile:  *idsPath,
		Matrix:   ci.MatrixOptions{Platforms: platforms, Shards: *shards, MaxJobs: *maxJobs, Runners: runners},
		Ledger:   *ledgerPath,
		SkipRepo: *skipRepo,
		Force:    *force,
		Parallel: *parallel,
		PlanOut:  *planOut,
		IDsDir:   *idsDir,
		Log:      stderr,

		EnvStage:  *envStage,
		EnvLedger: *envLedger,
		EnvShards: *envShards,
	}
	o.ContextDirs = *contextDirs
	if len(o.ContextDirs) == 0 {
		o.ContextDirs = []string{filepath.Join(g.env.cacheRoot, "rootfs")}
	}
	if *skipRepo != "" && !*force {
		dest, err := registry.RegistryOf(*skipRepo)
		if err != nil {
			return fmt.Errorf("--skip-existing: %w", err)
		}
		kc, err := registryCredentials(*authEnv, dest)
		if err != nil {
			return fmt.Errorf("--registry-auth-env: %w", err)
		}
		if o.Registry, err = registry.New(registry.Options{Keychain: kc, Insecure: *insecure, Concurrency: *parallel}); err != nil {
			return err
		}
	}
	m, out, err := pipeline.Matrix(ctx, o)
	if err != nil {
		return err
	}
	envs, err := m.Envs.Encode()
	if err != nil {
		return err
	}
	if err := appendGitHubOutput(*githubOutput, fmt.Sprintf("matrix=%s\njobs=%d\nenvs_matrix=%s\nenvs_jobs=%d\n", out, len(m.Include), envs, len(m.Envs.Include))); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// appendGitHubOutput appends name=value lines to the $GITHUB_OUTPUT file;
// an empty path writes nothing.
func appendGitHubOutput(path, lines string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening GitHub output file: %w", err)
	}
	_, werr := io.WriteString(f, lines)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing GitHub output file: %w", werr)
	}
	return nil
}

func parseRunners(flags []string) (map[core.Platform]ci.Runner, error) {
	runners := ci.DefaultRunners()
	for _, f := range flags {
		plat, rest, ok := strings.Cut(f, "=")
		if !ok || plat == "" || rest == "" {
			return nil, fmt.Errorf("--runner %q: want PLATFORM=LABEL[@RUNNER_PLATFORM]", f)
		}
		platform, err := core.ParsePlatform(plat)
		if err != nil {
			return nil, fmt.Errorf("--runner %q: %w", f, err)
		}
		label, archName, hasArch := strings.Cut(rest, "@")
		var arch core.Platform
		if hasArch {
			if arch, err = core.ParsePlatform(archName); err != nil {
				return nil, fmt.Errorf("--runner %q: runner platform: %w", f, err)
			}
		} else {
			var known bool
			if arch, known = ci.KnownRunnerArch(label); !known {
				return nil, fmt.Errorf("--runner %q: unknown runner label %q; say its platform: %s=%s@linux/amd64", f, label, plat, label)
			}
		}
		runners[platform] = ci.Runner{Label: label, Arch: arch}
	}
	return runners, nil
}

func runCIEnvs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("envs", "--dataset FILE --plan FILE --job NAME --push REPO [OPTIONS]",
		"Build one env-stage job of the plan (`ci matrix --plan-out`): its env images and the base images\n"+
			"they build FROM, pushed by digest to --push, one record per image in --metadata-file (what\n"+
			"`ci contexts` binds and the env ledger keeps).", stderr)
	// No --node-down-after here: the default a build gets (the options
	// refuse zero).
	f := buildFlags{downAfter: builder.DefaultDownAfter}
	f.g.register(fs)
	planPath := planFlag(fs)
	job := fs.String("job", "", "env job name (the envs matrix's name, e.g. envs-amd64-0)")
	fs.StringArrayVar(&f.builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR (repeatable; default $BUILDKIT_HOST)")
	fs.IntVarP(&f.workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&f.push, "push", "", "push every image by digest to this repository (required)")
	fs.StringArrayVar(&f.cacheFrom, "cache-from", nil, "cache import, e.g. type=registry,ref=HOST/REPO:cache (repeatable)")
	fs.StringArrayVar(&f.cacheTo, "cache-to", nil, "cache export, e.g. type=registry,ref=HOST/REPO:cache,mode=max (repeatable)")
	fs.StringVar(&f.progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringVar(&f.metadataFile, "metadata-file", "", "write one record per image (digest, pushed ref, spec key) to this file (required)")
	fs.StringVar(&f.runDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding context files a profile names (repeatable; default $SWEBUILD_CACHE/rootfs)")
	f.registerBuilderID(fs)
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
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

func runCIContexts(args []string, stdout, stderr io.Writer) error {
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
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
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
		rec := core.Image{Kind: core.KindInstance, InstanceID: *instance, Platform: pl, Status: core.StatusFailed,
			Error: "not built: its env image is not available: " + err.Error()}
		if werr := core.WriteFile(*failureRecord, []core.Image{rec}); werr != nil {
			return errors.Join(err, werr)
		}
	}
	if err != nil || key == "" {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s=docker-image://%s\n", key, ref)
	return err
}

func runCIIDs(args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("ids", "(--ids A,B,C | --ids-file FILE)",
		"Print one matrix job's instance ids, one per line (the job's ids, or its ids_file).", stderr)
	inline := fs.String("ids", "", "comma-separated ids (the job's ids)")
	file := fs.String("ids-file", "", "file of ids, one per line (the job's ids_file)")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	var ids []string
	switch {
	case *inline != "" && *file != "":
		return usageErr(fs, stderr, "only one of --ids and --ids-file")
	case *file != "":
		var err error
		if ids, err = ci.ReadIDList(*file); err != nil {
			return err
		}
	default:
		ids = ci.SplitIDs(*inline)
	}
	if len(ids) == 0 {
		return errors.New("no instance ids given")
	}
	_, err := fmt.Fprintln(stdout, strings.Join(ids, "\n"))
	return err
}

func runCIMerge(args []string, stdout, stderr io.Writer) error {
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
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
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
		recs, readErr = ci.ReadRecords(*results, stderr)
		if readErr != nil {
			fmt.Fprintln(stderr, readErr)
		}
	}
	rep := ci.Merge(plan, recs)
	if err := ci.WriteReport(*out, rep); err != nil {
		return err
	}
	if *publishOut != "" {
		pub, err := rep.PublishRecords()
		if werr := core.WriteFile(*publishOut, pub); werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
	}
	c := rep.Counts
	if err := appendGitHubOutput(*githubOutput, fmt.Sprintf("indexed=%d\nregressed=%d\nfailed=%d\n", c.Indexed, c.Regressed, c.Failed)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d instances: %d to index, %d unchanged, %d regressed, %d failed\n", c.Instances, c.Indexed, c.Unchanged, c.Regressed, c.Failed)
	fmt.Fprintf(stdout, "%d base/env images built inside instance shards (0 when every shard started from the env stage)\n", len(rep.BuiltInShards))
	for _, b := range rep.BuiltInShards {
		fmt.Fprintf(stdout, "  built in a shard: %s\n", b)
	}
	for _, o := range rep.Outcomes {
		if o.Status != ci.StatusRegressed && o.Status != ci.StatusFailed {
			continue
		}
		for _, img := range o.Images {
			if img.Error != "" {
				fmt.Fprintf(stdout, "%s %s %s: %s\n", strings.ToUpper(o.Status), o.InstanceID, img.Platform, img.Error)
			}
		}
	}
	if readErr != nil {
		return errors.New("some shard results could not be read (see above)")
	}
	if *failOn && rep.Failed() {
		return fmt.Errorf("%d regressed, %d failed", c.Regressed, c.Failed)
	}
	return nil
}

func runCISummary(args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("summary", "--merge FILE [OPTIONS]",
		"Write the Markdown job summary (regressions first) for $GITHUB_STEP_SUMMARY, then exit 1\n"+
			"if anything regressed or failed, sizes grew or environments drifted over the limit.", stderr)
	mergePath := fs.String("merge", "merge.json", "merge report written by `ci merge`")
	sizesPath := fs.String("sizes", "", "Markdown report from `swebuild sizes --format md` to include")
	sizesFailed := fs.Bool("sizes-failed", false, "the sizes step failed (growth over --max-growth): a regression")
	driftPath := fs.String("drift", "", "Markdown report from `swebuild drift --format md` to include")
	driftFailed := fs.Bool("drift-failed", false, "the drift step failed (more package changes than --max-drift, or a document unreadable)")
	repairPath := fs.String("repair", "", "Markdown report from `swebuild ci repair` (its report.md) to include")
	title := fs.String("title", "", "heading (default \"swebuild nightly\")")
	outPath := fs.StringP("output", "o", "", "write here instead of stdout (appends, like $GITHUB_STEP_SUMMARY)")
	failOn := fs.Bool("fail-on-regression", true, "exit 1 when the run has regressions")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	rep, err := ci.ReadReport(*mergePath)
	if err != nil {
		return err
	}
	opts := ci.SummaryOptions{Title: *title, SizesFailed: *sizesFailed, DriftFailed: *driftFailed}
	if *driftPath != "" {
		b, err := os.ReadFile(*driftPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			opts.DriftFailed = true
			opts.Drift = fmt.Sprintf("(no drift report: %s is missing)", *driftPath)
		case err != nil:
			return fmt.Errorf("reading drift report: %w", err)
		default:
			opts.Drift = string(b)
		}
	}
	if *repairPath != "" {
		b, err := os.ReadFile(*repairPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			opts.Repair = fmt.Sprintf("(no repair report: %s is missing)", *repairPath)
		case err != nil:
			return fmt.Errorf("reading repair report: %w", err)
		default:
			opts.Repair = string(b)
		}
	}
	if *sizesPath != "" {
		b, err := os.ReadFile(*sizesPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			opts.SizesFailed = true
			opts.Sizes = fmt.Sprintf("(no sizes report: %s is missing)", *sizesPath)
		case err != nil:
			return fmt.Errorf("reading sizes report: %w", err)
		default:
			opts.Sizes = string(b)
		}
	}
	var buf bytes.Buffer
	if err := ci.WriteSummary(&buf, rep, opts); err != nil {
		return err
	}
	w := stdout
	if *outPath != "" {
		f, err := os.OpenFile(*outPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("opening summary output: %w", err)
		}
		defer f.Close()
		w = f
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	if *failOn && opts.RunFailed(rep) {
		return fmt.Errorf("run failed: %d regressed, %d failed, sizes failed: %v, drift failed: %v", rep.Counts.Regressed, rep.Counts.Failed, opts.SizesFailed, opts.DriftFailed)
	}
	return nil
}
