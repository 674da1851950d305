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
		fmt.Fprintln(w, "  ids       print the instance ids of one matrix job, one per line")
		fmt.Fprintln(w, "  merge     decide per instance what to index and what regressed")
		fmt.Fprintln(w, "  summary   write the Markdown job summary; fail on regressions")
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
	case "merge":
		return runCIMerge(args[1:], stdout, stderr)
	case "summary":
		return runCISummary(args[1:], stdout, stderr)
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

func runCIMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("matrix", "(--dataset FILE | --ids FILE) [OPTIONS]",
		"Shard the instances per platform into a GitHub Actions matrix ({\"include\":[...]}) on stdout.\n"+
			"Never more than 256 jobs; shard sizes per platform differ by at most one; x86-only\n"+
			"instances (USE_X86) get no arm64 job.", stderr)
	var ds datasetFlags
	ds.register(fs)
	specsPath := fs.String("specs", "", "extra specs file with a data-defined profile (e.g. testdata/fixture/specs.json); its platform overrides apply")
	idsPath := fs.String("ids", "", "file of instance ids, one per line")
	pinsSel := fs.String("pins", "default", "pin rules the build uses (as for build): the spec keys compared with the ledger's depend on them")
	contextDirs := fs.StringArray("context-dir", nil, "directory holding profile context files, as for build (default $SWEBUILD_CACHE/rootfs)")
	platforms := fs.StringSlice("platform", []string{ci.PlatformAMD64, ci.PlatformARM64}, "platforms to build")
	shards := fs.Int("shards", 32, "shards per platform (lowered to fit 256 jobs and the instance count)")
	maxJobs := fs.Int("max-jobs", ci.MaxMatrixJobs, "most matrix jobs in total")
	runnerFlags := fs.StringArray("runner", nil, "runner for a platform: PLATFORM=LABEL[@RUNNER_PLATFORM] (QEMU when they differ); default linux/amd64=ubuntu-24.04, linux/arm64=ubuntu-24.04-arm")
	skipRepo := fs.String("skip-existing", "", "skip images the ledger records as verified and that this registry repository prefix still holds by digest")
	ledgerPath := fs.String("ledger", "", "publish ledger (JSON lines) to read with --skip-existing; a missing file means nothing exists yet")
	force := fs.Bool("force", false, "build everything: ignore --skip-existing")
	planOut := fs.String("plan-out", "", "write the plan (per instance: build in which shard, or reuse which digest) for `ci merge`")
	idsDir := fs.String("ids-dir", "", "directory for per-shard id files, used when the matrix would exceed the 1 MiB job output limit")
	githubOutput := fs.String("github-output", os.Getenv("GITHUB_OUTPUT"), "append matrix=... and jobs=N to this file (default $GITHUB_OUTPUT)")
	parallel := fs.Int("registry-parallel", 8, "registry lookups at once for --skip-existing")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (or REGISTRY=USER:PASSWORD,...); the Docker config and credential helpers are used otherwise")
	insecure := fs.Bool("insecure-registry", false, "allow plain HTTP to a non-loopback registry")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	if (ds.dataset == "") == (*idsPath == "") {
		return usageErr(fs, stderr, "exactly one of --dataset and --ids is required")
	}
	runners, err := parseRunners(*runnerFlags)
	if err != nil {
		return err
	}
	o := pipeline.MatrixOptions{
		Inputs: pipeline.Inputs{
			Dataset:  ds.dataset,
			Specs:    *specsPath,
			Pins:     *pinsSel,
			CacheDir: ds.cacheDir,
			Offline:  ds.offline,
			Hub:      pipeline.HubOptions{Endpoint: ds.env.hfEndpoint, Token: ds.env.hfToken},
		},
		IDsFile:  *idsPath,
		Matrix:   ci.MatrixOptions{Platforms: *platforms, Shards: *shards, MaxJobs: *maxJobs, Runners: runners},
		Ledger:   *ledgerPath,
		SkipRepo: *skipRepo,
		Force:    *force,
		Parallel: *parallel,
		PlanOut:  *planOut,
		IDsDir:   *idsDir,
		Log:      stderr,
	}
	o.ContextDirs = *contextDirs
	if len(o.ContextDirs) == 0 {
		o.ContextDirs = []string{filepath.Join(ds.env.cacheRoot, "rootfs")}
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
	if err := appendGitHubOutput(*githubOutput, fmt.Sprintf("matrix=%s\njobs=%d\n", out, len(m.Include))); err != nil {
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

func parseRunners(flags []string) (map[string]ci.Runner, error) {
	runners := ci.DefaultRunners()
	for _, f := range flags {
		platform, rest, ok := strings.Cut(f, "=")
		if !ok || platform == "" || rest == "" {
			return nil, fmt.Errorf("--runner %q: want PLATFORM=LABEL[@RUNNER_PLATFORM]", f)
		}
		label, arch, hasArch := strings.Cut(rest, "@")
		if !hasArch {
			var known bool
			if arch, known = ci.KnownRunnerArch(label); !known {
				return nil, fmt.Errorf("--runner %q: unknown runner label %q; say its platform: %s=%s@linux/amd64", f, label, platform, label)
			}
		}
		runners[platform] = ci.Runner{Label: label, Arch: arch}
	}
	return runners, nil
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
	planPath := fs.String("plan", "", "plan written by `ci matrix --plan-out`")
	results := fs.StringArray("results", nil, "shard build records: a metadata file, or a directory whose *.jsonl files are read (repeatable)")
	out := fs.String("out", "merge.json", "merge report (JSON)")
	publishOut := fs.String("publish-metadata", "", "write the metadata file for `swebuild publish` (instances to index)")
	failOn := fs.Bool("fail-on-regression", true, "exit 1 when an instance regressed or failed")
	githubOutput := fs.String("github-output", os.Getenv("GITHUB_OUTPUT"), "append indexed=N, regressed=N, failed=N to this file (default $GITHUB_OUTPUT)")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	if *planPath == "" {
		return usageErr(fs, stderr, "--plan is required")
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
			"if anything regressed or failed or sizes grew over the limit.", stderr)
	mergePath := fs.String("merge", "merge.json", "merge report written by `ci merge`")
	sizesPath := fs.String("sizes", "", "Markdown report from `swebuild sizes --format md` to include")
	sizesFailed := fs.Bool("sizes-failed", false, "the sizes step failed (growth over --max-growth): a regression")
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
	opts := ci.SummaryOptions{Title: *title, SizesFailed: *sizesFailed}
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
		return fmt.Errorf("run failed: %d regressed, %d failed, sizes failed: %v", rep.Counts.Regressed, rep.Counts.Failed, opts.SizesFailed)
	}
	return nil
}
