package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/repair"
)

// ciBuildFlags are the build flags of the ci commands that build (ci envs,
// ci repair): the inputs, then BuildKit's daemons, workers, --push (what
// it is for: pushUsage), progress and context directories. No
// --node-down-after: the default a build gets (the options refuse zero).
func ciBuildFlags(fs *pflag.FlagSet, pushUsage string) *buildFlags {
	f := &buildFlags{bk: pipeline.BuilderFlags{DownAfter: builder.DefaultDownAfter}}
	f.g.register(fs)
	fs.StringArrayVar(&f.bk.Builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR (repeatable; default $BUILDKIT_HOST)")
	fs.IntVarP(&f.bk.Workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&f.bk.Push, "push", "", pushUsage)
	fs.StringVar(&f.bk.Progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding context files a profile names (repeatable; default $SWEBUILD_CACHE/rootfs)")
	return f
}

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
	f := ciBuildFlags(fs, "push every image of a step by digest to this repository (required)")
	planPath := planFlag(fs)
	results := fs.StringArray("results", nil, "the shards' output directories (their verify/summary.json files: tonight's gold results; repeatable)")
	envs := recordsFlag(fs, "envs", "tonight's env job records")
	envLedger := fs.String("env-ledger", "", "the env ledger as it was before tonight (last night's env images)")
	out := fs.String("out", "repair", "directory the repair writes into")
	night := fs.String("night", "", "name of the night in the evidence (default: UTC time, and $GITHUB_RUN_ID when set)")
	f.verifyOpts.register(fs)
	// The repaired images are published: their provenance names the
	// builder as the shards' does (the nightly gives its run's URL).
	f.registerBuilderID(fs)
	fs.StringVar(&f.pub.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	fs.StringArrayVar(&f.pub.insecure, "insecure-registry", nil, "plain-HTTP registry host (loopback hosts always are; repeatable)")
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "plan"}, requiredFlag{name: "env-ledger", why: "last night's env images come from it"},
		requiredFlag{"push", "the repaired images are published from it"}); err != nil {
		return err
	}
	if len(*results) == 0 || len(*envs) == 0 {
		return usageErr(fs, stderr, "--results and --envs are required: tonight's gold results and env images")
	}
	f.platforms, f.verifyGold, f.bk.RunDir = core.AllPlatforms(), true, *out
	o := pipeline.RepairOptions{Night: *night, Out: *out, Log: stderr}
	if o.Night == "" {
		o.Night = repair.NightName(time.Now(), os.Getenv("GITHUB_RUN_ID"))
	}
	var err error
	if o.Build, err = f.options(stdout, stderr); err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	if err := readRepairInputs(ctx, &o, *planPath, *results, *envs, *envLedger, f.pub); err != nil {
		return err
	}
	rep, err := pipeline.Repair(ctx, o)
	if err != nil {
		return err
	}
	rep.WriteText(stdout)
	return nil
}

// readRepairInputs gives o the plan, tonight's gold results and env
// images, the env ledger before tonight and the reader of their documents.
func readRepairInputs(ctx context.Context, o *pipeline.RepairOptions, plan string, results, envs []string, envLedger string, pub publishFlags) error {
	var err error
	if o.Plan, err = ci.ReadPlan(plan); err != nil {
		return err
	}
	if o.Gold, err = pipeline.ReadGold(results); err != nil {
		return err
	}
	if o.EnvsTonight, err = ci.ReadRecords(envs, o.Log); err != nil {
		return err
	}
	if o.EnvsBefore, err = ci.ReadLedger(ctx, envLedger, o.Log); err != nil {
		return err
	}
	o.Reader, err = publicationReader(pub.authEnv, "", registry.Options{InsecureRegistries: pub.insecure})
	return err
}
