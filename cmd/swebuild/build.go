package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
)

// runBuild implements `swebuild build`: plan the dataset, then build the
// graph with BuildKit (package builder).
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		g            genInputs
		platforms    []string
		builders     []string
		workers      int
		push         string
		cacheFrom    []string
		cacheTo      []string
		progress     string
		metadataFile string
		runDir       string
		contextDirs  []string
		buildCtxs    []string
		verifyGold   bool
		verifyOpts   verifyBuildFlags
		pub          publishFlags
	)
	g.register(fs)
	fs.StringSliceVar(&platforms, "platform", []string{core.AMD64.String(), core.ARM64.String()}, "platforms to build (x86-only instances never get linux/arm64)")
	fs.StringArrayVar(&builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR for one platform (repeatable; default $BUILDKIT_HOST)")
	fs.IntVarP(&workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&push, "push", "", "push every image by digest to this repository, e.g. 127.0.0.1:5000/swebuild/build")
	fs.StringArrayVar(&cacheFrom, "cache-from", nil, "cache import, e.g. type=registry,ref=HOST/REPO:cache (repeatable)")
	fs.StringArrayVar(&cacheTo, "cache-to", nil, "cache export, e.g. type=registry,ref=HOST/REPO:cache,mode=max (repeatable)")
	fs.StringVar(&progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringVar(&metadataFile, "metadata-file", "", "write one record per image and platform (digest, pushed ref, verified; JSON lines) to this file")
	fs.StringVar(&runDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	fs.StringArrayVar(&contextDirs, "context-dir", nil, "directory holding context files a profile names (e.g. rootfs-amd64.tar); repeatable (default $SWEBUILD_CACHE/rootfs)")
	fs.StringArrayVar(&buildCtxs, "build-context", nil, "KEY=docker-image://REF: use an existing image for the base or env image KEY (e.g. sweb.base.py.x86_64=docker-image://HOST/REPO@sha256:...) instead of building it; repeatable")
	fs.BoolVar(&verifyGold, "verify", false, "run each instance's gold patch on its image before exporting it; an instance that fails is not pushed and is reported")
	verifyOpts.register(fs)
	pub.register(fs, "publish", "after the build, publish the instance images under this repository prefix as swebuild publish --repo does (per-arch names, one multi-arch index per instance, ledger); needs --push, and with --verify only verified images go")
	fs.IntVar(&pub.jobs, "publish-jobs", 8, "with --publish: instances published at once")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild build --dataset FILE [--instance ID]... [--platform linux/amd64,linux/arm64] [--builder ADDR | --builder PLATFORM=ADDR ...] [--workers N] [--push REPO] [--cache-from ...] [--cache-to ...] [--progress auto|tty|plain|rawjson] [--metadata-file F] [--run-dir DIR] [--verify [--reverify]] [--publish REPO [--ledger F]]\n\nBuild the base, env and instance images of a dataset with BuildKit.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "swebuild build: "+format+"\n", a...)
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	opts := builder.Options{
		Workers:     workers,
		Push:        push,
		Progress:    progress,
		ProgressOut: stderr,
		RunDir:      runDir,
	}
	if workers < 1 {
		return usageErr("--workers %d: want at least 1", workers)
	}
	plats, err := core.ParsePlatforms(platforms)
	if err != nil {
		return usageErr("--platform: %v", err)
	}
	if pub.repo != "" && push == "" {
		return usageErr("--publish needs --push: the images are published from the registry they were pushed to")
	}
	switch progress {
	case "auto", "tty", "plain", "rawjson", "quiet":
	default:
		return usageErr("--progress %q: want auto, tty, plain, rawjson or quiet", progress)
	}
	for _, b := range builders {
		sp, err := builder.ParseBuilder(b)
		if err != nil {
			return usageErr("--builder: %v", err)
		}
		opts.Builders = append(opts.Builders, sp)
	}
	for _, v := range buildCtxs {
		key, src, ok := strings.Cut(v, "=")
		ref, isImage := strings.CutPrefix(src, "docker-image://")
		if !ok || key == "" || !isImage || ref == "" {
			return usageErr("--build-context %q: want KEY=docker-image://REF", v)
		}
		if opts.Images == nil {
			opts.Images = map[string]string{}
		}
		opts.Images[key] = ref
	}
	for _, v := range cacheFrom {
		e, err := builder.ParseCacheOption(v)
		if err != nil {
			return usageErr("--cache-from: %v", err)
		}
		opts.CacheFrom = append(opts.CacheFrom, e)
	}
	for _, v := range cacheTo {
		e, err := builder.ParseCacheOption(v)
		if err != nil {
			return usageErr("--cache-to: %v", err)
		}
		opts.CacheTo = append(opts.CacheTo, e)
	}
	if opts.RunDir == "" {
		opts.RunDir = filepath.Join("runs", "build-"+time.Now().UTC().Format("20060102-150405"))
	}
	if len(contextDirs) == 0 {
		contextDirs = []string{filepath.Join(g.env.cacheRoot, "rootfs")}
	}
	in, err := g.inputs(stderr)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(opts.Builders) == 0 {
		if g.env.buildkitHost == "" {
			return usageErr("no builder: pass --builder ADDR or set BUILDKIT_HOST")
		}
		opts.Builders = []builder.BuilderSpec{{Addr: g.env.buildkitHost}}
	}
	bo := pipeline.BuildOptions{
		Inputs:       in,
		Platforms:    plats,
		Builder:      opts,
		ContextDirs:  contextDirs,
		MetadataFile: metadataFile,
		Out:          stdout,
		Log:          stderr,
	}
	if verifyGold {
		v, err := verifyOpts.options(g.env, stderr)
		if err != nil {
			return usageErr("%v", err)
		}
		bo.Verify = &v
	}
	if pub.repo != "" {
		po, err := pub.options("", stdout, stderr)
		if err != nil {
			return err
		}
		bo.Publish = &po
	}
	_, err = pipeline.Build(ctx, bo)
	return err
}
