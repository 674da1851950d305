package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/pipeline"
)

// genInputs are the input flags every command that reads records takes the
// same way (render, plan, build, verify, grade, check, drift, sizes, ci
// matrix): a dataset (--dataset, a file or a hub name) or an upstream v5
// task repo (--task-repo), which records (--instance), the spec tables
// (--specs, --specs-version), the pins and frozen environments. The choice
// of dataset or task repo is made once, by pipeline.Load.
type genInputs struct {
	datasetFlags
	taskRepo  string
	instances []string
	pins      string
	specs     string
	specsVer  string
	freeze    string
}

func (g *genInputs) register(fs *pflag.FlagSet) {
	g.datasetFlags.register(fs)
	fs.StringVar(&g.taskRepo, "task-repo", "", "upstream v5 task repo directory (sweb.yaml + tasks/<id>/), instead of --dataset: its published splits, or --instance ids from any split")
	fs.StringArrayVar(&g.instances, "instance", nil, "instance id to use (repeatable; default: all, or a task repo's published splits)")
	fs.StringVar(&g.pins, "pins", "default", "pin rules on top of upstream specs: none, default, ID,ID or default,-ID; -ID of an x86-only rule lifts it (swebuild pins list)")
	fs.StringVar(&g.specs, "specs", "", "extra specs file with a data-defined profile (e.g. testdata/fixture/specs.json); records with their own eval_script, log_parser and image need none")
	fs.StringVar(&g.freeze, "freeze", "", "directory of captured environment documents (swebuild drift --save DIR): envs are rendered to install exactly what those images had (pin rule frozen)")
	fs.StringVar(&g.specsVer, "specs-version", spec.VersionV410, "upstream tables: 4.1.0 (SWE-bench v4.1.0) or final (their state at 2514c86: C libffi, Rust Cargo.lock pins, Java sequential tests, Python eval.sh rm -f of added test files)")
}

// given reports whether an input was named (--dataset or --task-repo).
func (g *genInputs) given() bool { return g.dataset != "" || g.taskRepo != "" }

// inputs are the pipeline's inputs from the flags.
func (g *genInputs) inputs(log io.Writer) (pipeline.Inputs, error) {
	in := pipeline.Inputs{Dataset: g.dataset, TaskRepo: g.taskRepo, Instances: g.instances, Specs: g.specs, Pins: g.pins,
		Freeze: g.freeze, SpecsVersion: g.specsVer, CacheDir: g.cacheDir, Offline: g.offline,
		Hub: pipeline.HubOptions{Endpoint: g.env.hfEndpoint, Token: g.env.hfToken}, Log: log}
	if err := in.Check(); err != nil {
		return pipeline.Inputs{}, err
	}
	return in, nil
}

// load reads the input (pipeline.Load). A dataset with invalid records
// returns the valid ones plus the problems; nothing loaded is a nil
// *pipeline.Loaded and the error, a missing --dataset printed as fs's
// usage error.
func (g *genInputs) load(ctx context.Context, fs *pflag.FlagSet, stderr io.Writer) (*pipeline.Loaded, error) {
	in, err := g.inputs(stderr)
	if err != nil {
		return nil, usageErr(fs, stderr, "%v", err)
	}
	return pipeline.Load(ctx, in)
}
