package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
)

// writeFilesLowGC runs loaded.WriteFiles with the GC target lowered from
// the default 100% to 25% (unless GOGC was set). The live heap here is the
// dataset buffer (pointer-free, so a GC cycle costs well under a
// millisecond) while rendering makes ~20 MB of short-lived garbage: letting
// the heap grow to twice the dataset touches ~3,000 fresh pages, and each
// page fault costs more than the extra GC cycles. Measured 2026-12-01 (2
// vCPUs, load average 1.5-1.8, 21 interleaved rounds, `go run
// ./internal/benchtools/plainbench`), `swebuild render --arch all --pins
// none` over Verified: median wall 0.206 s with the default GOGC -> 0.199 s
// (x1.07; CPU 0.333 -> 0.301 s, peak RSS 47.5 -> 39.4 MiB); over
// Multilingual+Multimodal 0.182 -> 0.180 s (x1.03; CPU x1.06, RSS 43.2 ->
// 38.5 MiB).
func writeFilesLowGC(ctx context.Context, loaded *pipeline.Loaded, o pipeline.FilesOptions) (int, int, []*render.InstanceError) {
	if prev := debug.SetGCPercent(25); prev != 100 {
		debug.SetGCPercent(prev) // GOGC set by the user: keep it
	} else {
		defer debug.SetGCPercent(prev)
	}
	return loaded.WriteFiles(ctx, o)
}

// renderFlags are render's own flags.
type renderFlags struct {
	arches      []string
	out         string
	jobs        int
	layout      string
	taskRepo    string
	taskDataset string
	taskSplit   string
}

func (f *renderFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.arches, "arch", nil, "architecture: x86_64, arm64 or all (repeatable); with only --task-repo-out, default x86_64")
	fs.StringVarP(&f.out, "out", "o", "", "output directory: writes DIR/<instance_id>/<arch>/{Dockerfile.base,Dockerfile.env,Dockerfile.instance,setup_env.sh,setup_repo.sh,eval.sh,meta.json} (flat: {Dockerfile,eval.sh,meta.json}; a task repo: {Dockerfile,eval.sh} for the arches each task gets)")
	fs.StringVar(&f.layout, "layout", string(render.LayoutLayered), "layered (v4: base, env and instance Dockerfiles with their scripts) or flat (v5: one self-contained Dockerfile per instance and arch)")
	fs.StringVar(&f.taskRepo, "task-repo-out", "", "also write the dataset as an upstream v5 task repo into DIR: sweb.yaml, tasks/<id>/{task.yaml,tests.json,eval.sh,Dockerfile (flat),gold.patch,test.patch,problem_statement.md,hints.md}; task.yaml keeps the record's other columns and says x86_only: RULE for an instance that gets no linux/arm64")
	fs.StringVar(&f.taskDataset, "task-repo-dataset", "", "dataset name sweb.yaml publishes (default: the hub dataset's name)")
	fs.StringVar(&f.taskSplit, "task-repo-split", "", "the tasks' split (default: the hub dataset's split, else test)")
	fs.IntVarP(&f.jobs, "jobs", "j", 0, "concurrent renders/writes (default: 4 per CPU)")
}

// check validates the flags: the platforms, the layout and what to write.
func (f *renderFlags) check() ([]core.Platform, render.Layout, error) {
	if f.out == "" && f.taskRepo == "" {
		return nil, "", errors.New("--out or --task-repo-out is required")
	}
	if len(f.arches) == 0 && f.out == "" {
		f.arches = []string{core.AMD64.Arch()}
	}
	archList, err := pipeline.ParseArches(f.arches)
	if err != nil {
		return nil, "", err
	}
	if f.taskRepo != "" && len(archList) != 1 {
		return nil, "", errors.New("--task-repo-out writes one Dockerfile per task: give one --arch")
	}
	lay, err := render.ParseLayout(f.layout)
	if err != nil {
		return nil, "", fmt.Errorf("--layout: %w", err)
	}
	return archList, lay, nil
}

// runRender implements `swebuild render`.
func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("render", stderr)
	var (
		g genInputs
		f renderFlags
	)
	g.register(fs)
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild render --dataset FILE|--task-repo DIR [--instance ID]... --arch x86_64|arm64|all [--pins none|default|default,-ID|ID,ID] [--specs-version 4.1.0|final] [--layout layered|flat] --out DIR [--task-repo-out DIR]\n\nWrite the Dockerfiles and scripts of each instance and arch, and optionally the dataset as a v5 task repo (a task repo: DIR/<id>/<arch>/{Dockerfile,eval.sh}, the Dockerfile rewritten for arm64, for the arches a task gets).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	archList, lay, err := f.check()
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	loaded, loadErr := g.load(ctx, fs, stderr)
	if loaded == nil {
		return loadErr
	}
	var errs []error
	if f.out != "" {
		n, wanted, failed := writeFilesLowGC(ctx, loaded, pipeline.FilesOptions{Platforms: archList, Out: f.out, Jobs: f.jobs, Layout: lay})
		loaded.WriteNetworkHint(stderr, "render", g.cacheDir)
		for _, e := range failed {
			fmt.Fprintf(stderr, "render: %v\n", e)
		}
		fmt.Fprintf(stdout, "rendered %d of %d (instance, arch) pairs into %s\n", n, wanted, f.out)
		if len(failed) > 0 {
			errs = append(errs, fmt.Errorf("%d render(s) failed", len(failed)))
		}
	}
	if f.taskRepo != "" {
		err := loaded.WriteTaskRepo(ctx, pipeline.TaskRepoOptions{Out: f.taskRepo, Dataset: f.taskDataset, Split: f.taskSplit, Platform: archList[0]}, stdout, stderr)
		if errors.Is(err, pipeline.ErrNoTaskRepoDataset) {
			return usageErr(fs, stderr, "%v", err)
		}
		errs = append(errs, err)
	}
	return errors.Join(append([]error{loadErr}, errs...)...)
}
