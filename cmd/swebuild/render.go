package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/pipeline"
)

// genInputs are the flags shared by render, plan, build and verify.
type genInputs struct {
	datasetFlags
	taskRepo  string
	instances []string
	pins      string
	specs     string
}

func (g *genInputs) register(fs *pflag.FlagSet) {
	g.datasetFlags.register(fs)
	fs.StringVar(&g.taskRepo, "task-repo", "", "upstream v5 task repo directory (sweb.yaml + tasks/<id>/), instead of --dataset: its published splits, or --instance ids from any split")
	fs.StringArrayVar(&g.instances, "instance", nil, "instance id to use (repeatable; default: all, or a task repo's published splits)")
	fs.StringVar(&g.pins, "pins", "default", "pin rules applied on top of upstream specs: none or default")
	fs.StringVar(&g.specs, "specs", "", "extra specs file with a data-defined profile (e.g. testdata/fixture/specs.json)")
}

// inputs are the pipeline's inputs from the flags.
func (g *genInputs) inputs(log io.Writer) (pipeline.Inputs, error) {
	switch {
	case g.dataset == "" && g.taskRepo == "":
		return pipeline.Inputs{}, errors.New("--dataset is required (or --task-repo DIR)")
	case g.dataset != "" && g.taskRepo != "":
		return pipeline.Inputs{}, errors.New("--dataset and --task-repo: give one")
	}
	if g.cacheDir == "" {
		return pipeline.Inputs{}, errors.New("no cache directory: set --cache-dir or $SWEBUILD_CACHE")
	}
	return pipeline.Inputs{
		Dataset:   g.dataset,
		TaskRepo:  g.taskRepo,
		Instances: g.instances,
		Specs:     g.specs,
		Pins:      g.pins,
		CacheDir:  g.cacheDir,
		Offline:   g.offline,
		Hub:       pipeline.HubOptions{Endpoint: g.env.hfEndpoint, Token: g.env.hfToken},
		Log:       log,
	}, nil
}

// load reads the tables, the extra specs, the pins and the dataset
// (pipeline.Load). A dataset with invalid records returns the valid ones
// plus the problems; a missing --dataset is a usage error.
func (g *genInputs) load(ctx context.Context, stderr io.Writer) (*pipeline.Loaded, error) {
	in, err := g.inputs(stderr)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errUsage)
	}
	return pipeline.Load(ctx, in)
}

// parseArches accepts x86_64, arm64 (also amd64, aarch64, linux/...), all,
// repeated or comma-separated, and returns the platforms in index order.
func parseArches(vals []string) ([]core.Platform, error) {
	var list []string
	for _, v := range vals {
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if a == "all" {
				list = append(list, core.AMD64.String(), core.ARM64.String())
				continue
			}
			if _, err := core.ParsePlatform(a); err != nil {
				return nil, fmt.Errorf("--arch %q: want x86_64, arm64 or all", a)
			}
			list = append(list, a)
		}
	}
	if len(list) == 0 {
		return nil, errors.New("--arch is required (x86_64, arm64 or all)")
	}
	return core.ParsePlatforms(list)
}

// writeAllLowGC runs r.WriteAll with the GC target lowered from the default
// 100% to 25% (unless GOGC was set). The live heap here is the dataset
// buffer (pointer-free, so a GC cycle costs well under a millisecond) while
// rendering makes ~20 MB of short-lived garbage: letting the heap grow to
// twice the dataset touches ~3,000 fresh pages, and each page fault costs
// more than the extra GC cycles. Measured 2026-12-01 (2 vCPUs, load average
// 1.5-1.8, 21 interleaved rounds, `go run ./internal/benchtools/plainbench`),
// `swebuild render --arch all --pins none` over Verified: median wall
// 0.206 s with the default GOGC -> 0.199 s (x1.07; CPU 0.333 -> 0.301 s,
// peak RSS 47.5 -> 39.4 MiB); over Multilingual+Multimodal 0.182 -> 0.180 s
// (x1.03; CPU x1.06, RSS 43.2 -> 38.5 MiB).
func writeAllLowGC(ctx context.Context, r *render.Renderer, insts []dataset.Instance, platforms []core.Platform, out string, jobs int) (int, []*render.InstanceError) {
	if prev := debug.SetGCPercent(25); prev != 100 {
		debug.SetGCPercent(prev) // GOGC set by the user: keep it
	} else {
		defer debug.SetGCPercent(prev)
	}
	return r.WriteAll(ctx, insts, platforms, out, jobs)
}

// runRender implements `swebuild render`.
func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		g      genInputs
		arches []string
		out    string
		jobs   int
	)
	g.register(fs)
	fs.StringArrayVar(&arches, "arch", nil, "architecture: x86_64, arm64 or all (repeatable)")
	fs.StringVarP(&out, "out", "o", "", "output directory: writes DIR/<instance_id>/<arch>/{Dockerfile.base,Dockerfile.env,Dockerfile.instance,setup_env.sh,setup_repo.sh,eval.sh,meta.json}")
	fs.IntVarP(&jobs, "jobs", "j", 0, "concurrent renders/writes (default: 4 per CPU)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild render --dataset FILE|--task-repo DIR [--instance ID]... --arch x86_64|arm64|all [--pins none|default] --out DIR\n\nWrite the Dockerfiles and scripts of each instance and arch (a task repo: DIR/<id>/<arch>/{Dockerfile,eval.sh}, the Dockerfile rewritten for arm64, for the arches a task gets).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "swebuild render: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	archList, err := parseArches(arches)
	if err != nil {
		fmt.Fprintf(stderr, "swebuild render: %v\n", err)
		fs.Usage()
		return errUsage
	}
	if out == "" {
		fmt.Fprintln(stderr, "swebuild render: --out is required")
		fs.Usage()
		return errUsage
	}
	loaded, loadErr := g.load(ctx, stderr)
	if errors.Is(loadErr, errUsage) {
		fmt.Fprintf(stderr, "swebuild render: %v\n", loadErr)
		fs.Usage()
		return errUsage
	}
	if loaded == nil {
		return loadErr
	}
	if loaded.Tasks != nil {
		n, err := loaded.TaskPlan(archList).Write(out)
		fmt.Fprintf(stdout, "wrote %d (task, arch) pairs of %d tasks into %s\n", n, len(loaded.Tasks), out)
		return errors.Join(loadErr, err)
	}
	r, insts := loaded.Renderer, loaded.Instances
	n, failed := writeAllLowGC(ctx, r, insts, archList, out, jobs)
	for _, e := range failed {
		fmt.Fprintf(stderr, "render: %v\n", e)
	}
	fmt.Fprintf(stdout, "rendered %d of %d (instance, arch) pairs into %s\n", n, len(insts)*len(archList), out)
	switch {
	case len(failed) > 0 && loadErr != nil:
		return fmt.Errorf("%w; %d render(s) failed", loadErr, len(failed))
	case len(failed) > 0:
		return fmt.Errorf("%d render(s) failed", len(failed))
	}
	return loadErr
}
