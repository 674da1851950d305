package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// runBuild implements `swebuild build`: flags -> pipeline.BuildOptions ->
// pipeline.Build (plan, BuildKit, gold check, metadata file, publish).
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var f buildFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild build --dataset FILE|--task-repo DIR [--instance ID]... [--platform linux/amd64,linux/arm64] [--builder ADDR | --builder PLATFORM=ADDR ...] [--pool FILE] [--node-down-after D] [--workers N] [--push REPO] [--output type=oci,dest=DIR] [--cache-from ...] [--cache-to ...] [--progress auto|tty|plain|rawjson] [--metadata-file F] [--run-dir DIR] [--reproducible [--source-date-epoch N]] [--verify [--reverify]] [--publish REPO [--ledger F]]\n\nBuild the base, env and instance images of a dataset with BuildKit.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	bo, err := f.options(stdout, stderr)
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	if f.pub.repo != "" {
		po, err := f.pub.options("", stdout, stderr)
		if err != nil {
			return err
		}
		bo.Publish = &po
	}
	_, err = pipeline.Build(ctx, bo)
	return err
}

// buildFlags are the flags of `swebuild build`.
type buildFlags struct {
	g            genInputs
	platforms    []core.Platform
	builders     []string
	poolFile     string
	downAfter    time.Duration
	workers      int
	push         string
	outputs      []string
	cacheFrom    []string
	cacheTo      []string
	progress     string
	metadataFile string
	runDir       string
	contextDirs  []string
	buildCtxs    []string
	until        string
	verifyGold   bool
	reproducible bool
	sourceDate   string
	verifyOpts   verifyBuildFlags
	pub          publishFlags
	builderID    string
}

// registerBuilderID adds --builder-id: the provenance's runDetails.builder.id.
func (f *buildFlags) registerBuilderID(fs *pflag.FlagSet) {
	fs.StringVar(&f.builderID, "builder-id", "pkg:golang/github.com/swebuild/swebuild@"+version,
		"URI written as the SLSA provenance's runDetails.builder.id (the nightly gives its workflow run's URL); empty: none")
}

func (f *buildFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	platformsVar(fs, &f.platforms, "platform", core.AllPlatforms(), "platforms to build (x86-only instances never get linux/arm64)")
	fs.StringArrayVar(&f.builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR for one platform; repeat for a pool of several per platform; tcp:// takes ?tlscacert=F&tlscert=F&tlskey=F&tlsservername=N; ssh://, docker-container://, kube-pod:// work (default $BUILDKIT_HOST)")
	fs.StringVar(&f.poolFile, "pool", "", "file of builders, one [PLATFORM=]ADDR per line (# comments), added to --builder")
	fs.DurationVar(&f.downAfter, "node-down-after", builder.DefaultDownAfter, "a BuildKit node that does not answer for this long is marked down; its solves move to the other nodes of its platform")
	fs.IntVarP(&f.workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&f.push, "push", "", "push every image by digest to this repository, e.g. 127.0.0.1:5000/swebuild/build")
	fs.StringArrayVarP(&f.outputs, "output", "o", nil, "export every image without a registry, as buildx --output: type=oci,dest=DIR writes one OCI image layout directory (index.json names each image by its key); with --push, both")
	fs.StringArrayVar(&f.cacheFrom, "cache-from", nil, "cache import, e.g. type=registry,ref=HOST/REPO:cache (repeatable)")
	fs.StringArrayVar(&f.cacheTo, "cache-to", nil, "cache export, e.g. type=registry,ref=HOST/REPO:cache,mode=max (repeatable)")
	fs.StringVar(&f.progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringVar(&f.metadataFile, "metadata-file", "", "write one record per image and platform (digest, pushed ref, verified; JSON lines) to this file")
	fs.StringVar(&f.runDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding context files a profile names (e.g. rootfs-amd64.tar); repeatable (default $SWEBUILD_CACHE/rootfs)")
	fs.StringArrayVar(&f.buildCtxs, "build-context", nil, "KEY=docker-image://REF: use an existing image for the base or env image KEY (e.g. sweb.base.py.x86_64=docker-image://HOST/REPO@sha256:...) instead of building it; with --task-repo, NAME=docker-image://REF binds a name the flat Dockerfiles start FROM; repeatable")
	fs.BoolVar(&f.reproducible, "reproducible", false, "reproducible images (docs/reproducible.md): SOURCE_DATE_EPOCH for the image configs and every RUN step, layer file times rewritten to it, deterministic git and pip steps; nothing rendered changes")
	fs.StringVar(&f.sourceDate, "source-date-epoch", strconv.FormatInt(builder.DefaultSourceDateEpoch, 10), "with --reproducible: the epoch (seconds since 1970) files and configs are dated with (default 2000-01-01T00:00:00Z)")
	fs.StringVar(&f.until, "until", "", "build only up to this kind of image: base (the base images) or env (the base and env images), e.g. the bases a task repo's Dockerfiles start FROM, pushed before it builds; not with --verify, --publish or --task-repo")
	fs.BoolVar(&f.verifyGold, "verify", false, "run each instance's gold patch on its image before exporting it; an instance that fails is not pushed and is reported")
	f.verifyOpts.register(fs)
	f.registerBuilderID(fs)
	f.pub.register(fs, "publish", "after the build, publish the instance images under this repository prefix as swebuild publish --repo does (per-arch names, one multi-arch index per instance, ledger); needs --push or --output (published from the registry or the layout), and with --verify only verified images go")
	fs.IntVar(&f.pub.jobs, "publish-jobs", 8, "with --publish: instances published at once")
}

// options are the pipeline's options from the flags (all but Publish).
func (f *buildFlags) options(stdout, stderr io.Writer) (pipeline.BuildOptions, error) {
	var bo pipeline.BuildOptions
	if f.workers < 1 {
		return bo, fmt.Errorf("--workers %d: want at least 1", f.workers)
	}
	plats, err := core.PlatformSet(f.platforms)
	if err != nil {
		return bo, fmt.Errorf("--platform: %w", err)
	}
	switch {
	case f.until != "" && graph.Kind(f.until) != graph.KindBase && graph.Kind(f.until) != graph.KindEnv:
		return bo, fmt.Errorf("--until %q: want base or env", f.until)
	case f.until != "" && (f.verifyGold || f.pub.repo != "" || f.g.taskRepo != ""):
		return bo, fmt.Errorf("--until %s builds no instance images: not with --verify, --publish or --task-repo", f.until)
	}
	if f.pub.repo != "" && f.push == "" && len(f.outputs) == 0 {
		return bo, errors.New("--publish needs --push REPO or --output type=oci,dest=DIR: the images are published from the registry they were pushed to, or from the OCI layout")
	}
	opts, err := f.builderOptions(stderr)
	if err != nil {
		return bo, err
	}
	// One login for every solve: pushes, bound images, registry caches.
	// An unscoped USER:PASSWORD is for the --publish registry, else the
	// --push one.
	dest := ""
	for _, repo := range []string{f.push, f.pub.repo} {
		if repo != "" {
			if dest, err = registry.RegistryOf(repo); err != nil {
				return bo, fmt.Errorf("--push/--publish: %w", err)
			}
		}
	}
	creds, err := registryCredentials(f.pub.authEnv, dest)
	if err != nil {
		return bo, fmt.Errorf("--registry-auth-env: %w", err)
	}
	opts.Auth = builderAuth(creds, f.pub.insecure)
	opts.Keychain = creds
	if len(f.contextDirs) == 0 {
		f.contextDirs = []string{filepath.Join(f.g.env.cacheRoot, "rootfs")}
	}
	in, err := f.g.inputs(stderr)
	if err != nil {
		return bo, err
	}
	if len(opts.Builders) == 0 {
		if f.g.env.buildkitHost == "" {
			return bo, errors.New("no builder: pass --builder ADDR or set BUILDKIT_HOST")
		}
		opts.Builders = []builder.BuilderSpec{{Addr: f.g.env.buildkitHost}}
	}
	bo = pipeline.BuildOptions{
		Inputs:       in,
		Platforms:    plats,
		Builder:      opts,
		ContextDirs:  f.contextDirs,
		MetadataFile: f.metadataFile,
		Until:        f.until,
		Out:          stdout,
		Log:          stderr,
	}
	if f.verifyGold {
		v, err := f.verifyOpts.options(f.g.env, stderr)
		if err != nil {
			return bo, err
		}
		bo.Verify = &v
		bo.Verifier = "swebuild " + version
	}
	return bo, nil
}

// builderOptions are the BuildKit side's options: daemons, workers, push,
// caches, progress, run directory and bound images.
func (f *buildFlags) builderOptions(stderr io.Writer) (builder.Options, error) {
	opts := builder.Options{
		Workers:     f.workers,
		Push:        f.push,
		Progress:    f.progress,
		ProgressOut: stderr,
		RunDir:      f.runDir,
		BuilderID:   f.builderID,
	}
	switch f.progress {
	case "auto", "tty", "plain", "rawjson", "quiet":
	default:
		return opts, fmt.Errorf("--progress %q: want auto, tty, plain, rawjson or quiet", f.progress)
	}
	for _, b := range f.builders {
		sp, err := builder.ParseBuilder(b)
		if err != nil {
			return opts, fmt.Errorf("--builder: %w", err)
		}
		opts.Builders = append(opts.Builders, sp)
	}
	if f.poolFile != "" {
		specs, err := builder.ReadPoolFile(f.poolFile)
		if err != nil {
			return opts, fmt.Errorf("--pool: %w", err)
		}
		opts.Builders = append(opts.Builders, specs...)
	}
	if f.downAfter <= 0 {
		return opts, fmt.Errorf("--node-down-after %s: want a positive duration", f.downAfter)
	}
	opts.Pool.DownAfter = f.downAfter
	switch len(f.outputs) {
	case 0:
	case 1:
		o, err := builder.ParseOutput(f.outputs[0])
		if err != nil {
			return opts, fmt.Errorf("--output: %w", err)
		}
		opts.Output = &o
	default:
		return opts, fmt.Errorf("--output given %d times: one OCI layout directory holds every image", len(f.outputs))
	}
	for _, v := range f.buildCtxs {
		key, src, ok := strings.Cut(v, "=")
		ref, isImage := strings.CutPrefix(src, "docker-image://")
		if !ok || key == "" || !isImage || ref == "" {
			return opts, fmt.Errorf("--build-context %q: want KEY=docker-image://REF", v)
		}
		if opts.Images == nil {
			opts.Images = map[string]string{}
		}
		opts.Images[key] = ref
	}
	for _, v := range f.cacheFrom {
		e, err := builder.ParseCacheOption(v)
		if err != nil {
			return opts, fmt.Errorf("--cache-from: %w", err)
		}
		opts.CacheFrom = append(opts.CacheFrom, e)
	}
	for _, v := range f.cacheTo {
		e, err := builder.ParseCacheOption(v)
		if err != nil {
			return opts, fmt.Errorf("--cache-to: %w", err)
		}
		opts.CacheTo = append(opts.CacheTo, e)
	}
	if f.reproducible {
		sde, err := builder.ParseSourceDateEpoch(f.sourceDate)
		if err != nil {
			return opts, fmt.Errorf("--source-date-epoch: %w", err)
		}
		opts.Reproducible = &builder.Reproducible{SourceDateEpoch: sde}
	} else if f.sourceDate != "" && f.sourceDate != strconv.FormatInt(builder.DefaultSourceDateEpoch, 10) {
		// "" is a command that has no --source-date-epoch (ci envs, ci
		// repair): nothing was asked for.
		return opts, errors.New("--source-date-epoch is only used with --reproducible")
	}
	if opts.RunDir == "" {
		opts.RunDir = filepath.Join("runs", "build-"+time.Now().UTC().Format("20060102-150405"))
	}
	return opts, nil
}
