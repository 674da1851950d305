package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

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
	fs := newFlagSet("build", stderr)
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
	bk           pipeline.BuilderFlags
	platforms    []core.Platform
	metadataFile string
	contextDirs  []string
	until        string
	verifyGold   bool
	verifyOpts   verifyBuildFlags
	pub          publishFlags
}

// registerBuilderID adds --builder-id: the provenance's runDetails.builder.id.
func (f *buildFlags) registerBuilderID(fs *pflag.FlagSet) {
	fs.StringVar(&f.bk.BuilderID, "builder-id", "pkg:golang/github.com/swebuild/swebuild@"+version,
		"URI written as the SLSA provenance's runDetails.builder.id (the nightly gives its workflow run's URL); empty: none")
}

func (f *buildFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	platformsVar(fs, &f.platforms, "platform", core.AllPlatforms(), "platforms to build (x86-only instances never get linux/arm64)")
	fs.StringArrayVar(&f.bk.Builders, "builder", nil, "BuildKit address, or PLATFORM=ADDR for one platform; repeat for a pool of several per platform; tcp:// takes ?tlscacert=F&tlscert=F&tlskey=F&tlsservername=N; ssh://, docker-container://, kube-pod:// work (default $BUILDKIT_HOST)")
	fs.StringVar(&f.bk.PoolFile, "pool", "", "file of builders, one [PLATFORM=]ADDR per line (# comments), added to --builder")
	fs.DurationVar(&f.bk.DownAfter, "node-down-after", builder.DefaultDownAfter, "a BuildKit node that does not answer for this long is marked down; its solves move to the other nodes of its platform")
	fs.IntVarP(&f.bk.Workers, "workers", "j", 2, "solves running at once")
	fs.StringVar(&f.bk.Push, "push", "", "push every image by digest to this repository, e.g. 127.0.0.1:5000/swebuild/build")
	fs.StringArrayVarP(&f.bk.Outputs, "output", "o", nil, "export every image without a registry, as buildx --output: type=oci,dest=DIR writes one OCI image layout directory (index.json names each image by its key); with --push, both")
	fs.StringArrayVar(&f.bk.CacheFrom, "cache-from", nil, "cache import, e.g. type=registry,ref=HOST/REPO:cache (repeatable)")
	fs.StringArrayVar(&f.bk.CacheTo, "cache-to", nil, "cache export, e.g. type=registry,ref=HOST/REPO:cache,mode=max (repeatable)")
	fs.StringVar(&f.bk.Progress, "progress", "auto", "progress output: auto, tty, plain, rawjson or quiet")
	fs.StringVar(&f.metadataFile, "metadata-file", "", "write one record per image and platform (digest, pushed ref, verified; JSON lines) to this file")
	fs.StringVar(&f.bk.RunDir, "run-dir", "", "directory for per-node logs (default runs/build-<UTC time>)")
	fs.StringArrayVar(&f.contextDirs, "context-dir", nil, "directory holding context files a profile names (e.g. rootfs-amd64.tar); repeatable (default $SWEBUILD_CACHE/rootfs)")
	fs.StringArrayVar(&f.bk.BuildContexts, "build-context", nil, "KEY=docker-image://REF: use an existing image for the base or env image KEY (e.g. sweb.base.py.x86_64=docker-image://HOST/REPO@sha256:...) instead of building it; with --task-repo, NAME=docker-image://REF binds a name the flat Dockerfiles start FROM; repeatable")
	fs.BoolVar(&f.bk.Reproducible, "reproducible", false, "reproducible images (docs/reproducible.md): SOURCE_DATE_EPOCH for the image configs and every RUN step, layer file times rewritten to it, deterministic git and pip steps; nothing rendered changes")
	fs.StringVar(&f.bk.SourceDateEpoch, "source-date-epoch", strconv.FormatInt(builder.DefaultSourceDateEpoch, 10), "with --reproducible: the epoch (seconds since 1970) files and configs are dated with (default 2000-01-01T00:00:00Z)")
	fs.StringVar(&f.until, "until", "", "build only up to this kind of image: base (the base images) or env (the base and env images), e.g. the bases a task repo's Dockerfiles start FROM, pushed before it builds; not with --verify, --publish or --task-repo")
	fs.BoolVar(&f.verifyGold, "verify", false, "run each instance's gold patch on its image before exporting it; an instance that fails is not pushed and is reported")
	f.verifyOpts.register(fs)
	f.registerBuilderID(fs)
	f.pub.register(fs, "publish", "after the build, publish the instance images under this repository prefix as swebuild publish --repo does (per-arch names, one multi-arch index per instance, ledger); needs --push or --output (published from the registry or the layout), and with --verify only verified images go")
	fs.IntVar(&f.pub.jobs, "publish-jobs", 8, "with --publish: instances published at once")
}

// options are the pipeline's options from the flags (all but Publish).
func (f *buildFlags) options(stdout, stderr io.Writer) (pipeline.BuildOptions, error) {
	stdout, stderr = core.SyncWriter(stdout), core.SyncWriter(stderr) // its workers write at once
	bo := pipeline.BuildOptions{ContextDirs: f.contextDirs, MetadataFile: f.metadataFile, Until: f.until, Out: stdout, Log: stderr}
	if f.bk.Workers < 1 {
		return bo, fmt.Errorf("--workers %d: want at least 1", f.bk.Workers)
	}
	var err error
	if bo.Platforms, err = core.PlatformSet(f.platforms); err != nil {
		return bo, fmt.Errorf("--platform: %w", err)
	}
	if err := f.checkWhat(); err != nil {
		return bo, err
	}
	if bo.Builder, err = f.builderOptions(stderr); err != nil {
		return bo, err
	}
	if len(bo.ContextDirs) == 0 {
		bo.ContextDirs = []string{filepath.Join(f.g.env.cacheRoot, "rootfs")}
	}
	if bo.Inputs, err = f.g.inputs(stderr); err != nil {
		return bo, err
	}
	if len(bo.Builder.Builders) == 0 {
		if f.g.env.buildkitHost == "" {
			return bo, errors.New("no builder: pass --builder ADDR or set BUILDKIT_HOST")
		}
		bo.Builder.Builders = []builder.BuilderSpec{{Addr: f.g.env.buildkitHost}}
	}
	if f.verifyGold {
		v, err := f.verifyOpts.options(f.g.env, stderr)
		if err != nil {
			return bo, err
		}
		bo.Verify, bo.Verifier = &v, "swebuild "+version
	}
	return bo, nil
}

// checkWhat checks what the flags ask to build and export: --until builds
// no instance images; --publish needs them pushed or in a layout.
func (f *buildFlags) checkWhat() error {
	switch {
	case f.until != "" && graph.Kind(f.until) != graph.KindBase && graph.Kind(f.until) != graph.KindEnv:
		return fmt.Errorf("--until %q: want base or env", f.until)
	case f.until != "" && (f.verifyGold || f.pub.repo != "" || f.g.taskRepo != ""):
		return fmt.Errorf("--until %s builds no instance images: not with --verify, --publish or --task-repo", f.until)
	case f.pub.repo != "" && f.bk.Push == "" && len(f.bk.Outputs) == 0:
		return errors.New("--publish needs --push REPO or --output type=oci,dest=DIR: the images are published from the registry they were pushed to, or from the OCI layout")
	}
	return nil
}

// builderOptions are the BuildKit side's options (pipeline.BuilderFlags)
// with one login for every solve: pushes, bound images, registry caches.
// An unscoped USER:PASSWORD is for the --publish registry, else the --push
// one.
func (f *buildFlags) builderOptions(stderr io.Writer) (builder.Options, error) {
	bk := f.bk
	bk.ProgressOut = stderr
	opts, err := bk.Options()
	if err != nil {
		return opts, err
	}
	dest := ""
	for _, repo := range []string{f.bk.Push, f.pub.repo} {
		if repo != "" {
			if dest, err = registry.RegistryOf(repo); err != nil {
				return opts, fmt.Errorf("--push/--publish: %w", err)
			}
		}
	}
	creds, err := registryCredentials(f.pub.authEnv, dest)
	if err != nil {
		return opts, fmt.Errorf("--registry-auth-env: %w", err)
	}
	opts.Auth, opts.Keychain = builderAuth(creds, f.pub.insecure), creds
	return opts, nil
}
