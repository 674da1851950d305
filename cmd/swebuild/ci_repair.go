package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// runCIRepair implements `swebuild ci repair`.
func runCIRepair(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCIFlags("repair", "--dataset FILE --plan FILE --results PATH... --envs PATH... --env-ledger FILE --push REPO --out DIR [OPTIONS]",
		"For every env rebuilt tonight whose gold patches failed on images that passed last night, find the\n"+
			"package that broke them: rebuild the env with last night's captured set (the frozen rule), then with\n"+
			"parts of the changed packages held back at last night's versions, bisecting to the package and\n"+
			"version (each env built once per platform per step and pushed by digest, its instances built FROM it\n"+
			"and their gold patches verified). Writes under --out: proposal.json (the pins file of the rules found,\n"+
			"with their evidence: --pins default,FILE), records.jsonl (the repaired images, verified: give it to\n"+
			"`ci merge --results` after the shards' records), envs.jsonl (their env images, for the env ledger),\n"+
			"report.json and report.md (for `ci summary --repair`). An env no single package explains keeps last\n"+
			"night's images. docs/nightly.md, \"The repair\".", stderr)
	f := buildFlags{downAfter: builder.DefaultDownAfter}
	f.g.register(fs)
	planPath := planFlag(fs)
	results := fs.StringArray("results", nil, "the shards' output directories (their verify/summary.json files: tonight's gold results; repeatable)")
	envs := recordsFlag(fs, "envs", "tonight's env job records")
	envLedger := fs.String("env-ledger", "", "the env ledger as it was before tonight (last night's env images)")
	out := fs.String("out", "repair", "directory the repair writes into")
	night := fs.String("night", "", "name of the night in the evidence (default: UTC time, and $GITHUB_RUN_ID when set)")
	fs.StringArrayVar(&f.builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR (repeatable; default $BUILDKIT_HOST)")
	fs.IntVarP(&f.workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&f.push, "push", "", "push every image of a step by digest to this repository (required)")
	fs.StringVar(&f.progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding context files a profile names (repeatable; default $SWEBUILD_CACHE/rootfs)")
	f.verifyOpts.register(fs)
	// The repaired images are published: their provenance names the
	// builder as the shards' does (the nightly gives its run's URL).
	f.registerBuilderID(fs)
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	insecure := fs.StringArray("insecure-registry", nil, "plain-HTTP registry host (loopback hosts always are; repeatable)")
	if help, err := parseCIFlags(fs, args, stdout, stderr); help {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "plan"}, requiredFlag{name: "env-ledger", why: "last night's env images come from it"},
		requiredFlag{"push", "the repaired images are published from it"}); err != nil {
		return err
	}
	if len(*results) == 0 || len(*envs) == 0 {
		return usageErr(fs, stderr, "--results and --envs are required: tonight's gold results and env images")
	}
	plan, err := ci.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	f.platforms = core.AllPlatforms()
	f.verifyGold = true
	f.runDir = *out
	f.pub.authEnv, f.pub.insecure = *authEnv, *insecure
	bo, err := f.options(stdout, stderr)
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	gold, err := pipeline.ReadGold(*results)
	if err != nil {
		return err
	}
	tonight, err := ci.ReadRecords(*envs, stderr)
	if err != nil {
		return err
	}
	before, err := ci.ReadLedger(ctx, *envLedger, stderr)
	if err != nil {
		return err
	}
	reader, err := publicationReader(*authEnv, "", registry.Options{InsecureRegistries: *insecure})
	if err != nil {
		return err
	}
	if *night == "" {
		*night = time.Now().UTC().Format(time.RFC3339)
		if id := os.Getenv("GITHUB_RUN_ID"); id != "" {
			*night += " (run " + id + ")"
		}
	}
	rep, err := pipeline.Repair(ctx, pipeline.RepairOptions{Build: bo, Plan: plan, Gold: gold, EnvsTonight: tonight, EnvsBefore: before,
		Reader: reader, Night: *night, Out: *out, Log: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "repair: %d env(s) to repair, %.0f s\n", len(rep.Cases), rep.Seconds)
	for _, c := range rep.Cases {
		switch {
		case c.Error != "":
			fmt.Fprintf(stdout, "%s: no result: %s\n", c.Name(), c.Error)
		case c.Result != nil:
			fmt.Fprintf(stdout, "%s: %s: %s (%d env rebuilds, %.0f s)\n", c.Name(), c.Result.Verdict, c.Result.Reason, c.Result.Rebuilds, c.Result.Seconds)
		}
		if c.Rule != "" {
			fmt.Fprintf(stdout, "%s: rule %s, %d image(s) repaired and verified\n", c.Name(), c.Rule, len(c.Repaired))
		}
	}
	if rep.Proposal != "" {
		fmt.Fprintf(stdout, "proposal: %s\n", rep.Proposal)
	}
	return nil
}
