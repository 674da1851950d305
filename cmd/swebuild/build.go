package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
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
	fs.StringVar(&metadataFile, "metadata-file", "", "write the digest of every image per platform to this JSON file")
	fs.StringVar(&runDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	fs.StringArrayVar(&contextDirs, "context-dir", nil, "directory holding context files a profile names (e.g. rootfs-amd64.tar); repeatable (default $SWEBUILD_CACHE/rootfs)")
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
		Workers:      workers,
		Push:         push,
		Progress:     progress,
		ProgressOut:  stderr,
		RunDir:       runDir,
		MetadataFile: metadataFile,
	}
	if workers < 1 {
		return usageErr("--workers %d: want at least 1", workers)
	}
	plats, err := core.ParsePlatforms(platforms)
	if err != nil {
		return usageErr("--platform: %v", err)
	}
	platforms = make([]string, len(plats))
	for i, p := range plats {
		platforms[i] = p.String()
	}
	if pub.repo != "" && push == "" {
		return usageErr("--publish needs --push: the images are published from the registry they were pushed to")
	}
	for _, b := range builders {
		sp, err := builder.ParseBuilder(b)
		if err != nil {
			return usageErr("%v", err)
		}
		opts.Builders = append(opts.Builders, sp)
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
		cache := os.Getenv("SWEBUILD_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "swebuild")
		}
		contextDirs = []string{filepath.Join(cache, "rootfs")}
	}

	r, insts, loadErr := g.load(ctx, stderr)
	if errors.Is(loadErr, errUsage) {
		return usageErr("%v", loadErr)
	}
	if r == nil {
		return loadErr
	}
	p, err := plan.Build(ctx, r, insts, plats)
	if err != nil {
		return err
	}
	var problems []error
	if loadErr != nil {
		problems = append(problems, loadErr)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(stderr, "plan: %s (%s): %s\n", e.InstanceID, e.Platform, e.Error)
	}
	if len(p.Errors) > 0 {
		problems = append(problems, fmt.Errorf("%d instance(s) could not be planned", len(p.Errors)))
	}
	nodes, err := buildNodes(p, insts, contextDirs)
	if err != nil {
		return err
	}
	var verified *verifyBuild
	if verifyGold {
		if verified, err = verifyOpts.hook(ctx, r, insts, platforms, opts.RunDir, stderr); err != nil {
			return usageErr("%v", err)
		}
		opts.Verify = verified.hook
		problems = append(problems, verified.problems...)
	}
	fmt.Fprintf(stderr, "swebuild build: %d nodes; logs in %s\n", len(nodes), opts.RunDir)
	report, err := builder.Build(ctx, nodes, opts)
	if report != nil {
		if werr := report.WriteSummary(stdout); werr != nil {
			problems = append(problems, werr)
		}
	}
	if verified != nil {
		problems = append(problems, verified.finish(stdout)...)
	}
	if err != nil {
		problems = append(problems, err)
	}
	if pub.repo != "" && report != nil && ctx.Err() == nil {
		// What was built and pushed is published even when other
		// instances failed; with --verify, only verified images go.
		pub.requireVerified = pub.requireVerified || verifyGold
		recs := report.Records()
		mdPath := opts.MetadataFile
		if mdPath == "" {
			mdPath = filepath.Join(opts.RunDir, "metadata.jsonl")
		}
		fmt.Fprintf(stdout, "\npublishing %d record(s) under %s\n", len(recs), pub.repo)
		if perr := pub.publish(ctx, recs, mdPath, stdout, stderr); perr != nil {
			problems = append(problems, fmt.Errorf("publishing: %w", perr))
		}
	}
	return errors.Join(problems...)
}

// buildNodes turns the plan into builder nodes: parents by key, rendered
// files in memory, profile context files (e.g. rootfs-<arch>.tar) looked up
// in contextDirs. Nodes used only by x86-only instances are marked X86Only,
// so the builder refuses an arm64 image of them whatever the flags say.
func buildNodes(p *plan.Plan, insts []dataset.Instance, contextDirs []string) ([]*builder.Node, error) {
	x86 := map[string]bool{}
	for _, id := range p.X86Only {
		x86[id] = true
	}
	commits := map[string]string{}
	for _, inst := range insts {
		commits[inst.InstanceID] = inst.BaseCommit
	}
	var nodes []*builder.Node
	for _, pp := range p.Platforms {
		for _, pn := range pp.Nodes {
			b := pn.Build
			n := &builder.Node{
				Key:        pn.Key,
				Kind:       string(pn.Kind),
				Platform:   pn.Platform.String(),
				Dockerfile: b.Dockerfile,
				Context:    b.Files,
				X86Only:    len(pn.Instances) > 0,
			}
			for _, id := range pn.Instances {
				if !x86[id] {
					n.X86Only = false
				}
			}
			if pn.Parent != "" {
				n.Parents = []string{pn.Parent}
			}
			if pn.Kind == render.KindInstance && len(pn.Instances) == 1 {
				n.InstanceID = pn.Instances[0]
				n.BaseCommit = commits[n.InstanceID]
			}
			for _, name := range b.External {
				path, err := findContextFile(name, contextDirs)
				if err != nil {
					return nil, fmt.Errorf("node %s (%s): %w", pn.Key, pn.Platform, err)
				}
				if n.ContextFiles == nil {
					n.ContextFiles = map[string]string{}
				}
				n.ContextFiles[name] = path
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

func findContextFile(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p, err := filepath.Abs(filepath.Join(d, filepath.FromSlash(name)))
		if err != nil {
			return "", fmt.Errorf("context file %s: %w", name, err)
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("context file %s not found in %s (see --context-dir; scripts/fixture.sh rootfs makes the rootfs tarballs)", name, strings.Join(dirs, ", "))
}
