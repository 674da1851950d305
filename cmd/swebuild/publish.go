package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// publishFlags are the options of a publish run, shared by `swebuild
// publish` and `swebuild build --publish`.
type publishFlags struct {
	repo            string
	ledgerPath      string
	jobs            int
	maxRPS          float64
	concurrency     int
	authEnv         string
	insecure        []string
	keepUU          bool
	trustLedger     bool
	requireVerified bool
	debug           bool
	verification    string // publish only: verify --summary file to attach
	signing         signingFlags
	fs              *pflag.FlagSet
}

// register adds the flags; repoFlag names the repository flag ("repo" for
// publish, "publish" for build).
func (f *publishFlags) register(fs *pflag.FlagSet, repoFlag, repoUsage string) {
	fs.StringVar(&f.repo, repoFlag, "", repoUsage)
	fs.StringVar(&f.ledgerPath, "ledger", "", "publish ledger file (JSON lines); default: publish-ledger.jsonl next to the metadata file")
	fs.Float64Var(&f.maxRPS, "max-rps", -1, "request-rate limit per registry (requests/s); default 50, unlimited for a loopback registry; 0 = unlimited")
	fs.IntVar(&f.concurrency, "max-concurrent-requests", registry.DefaultConcurrency, "requests awaiting an answer per registry")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (for the --"+repoFlag+" registry only) or REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	fs.StringArrayVar(&f.insecure, "insecure-registry", nil, "allow plain HTTP to this registry (HOST[:PORT], repeatable); loopback registries are always allowed")
	fs.BoolVar(&f.keepUU, "keep-double-underscore", false, "keep \"__\" in image names instead of upstream's \"_1776_\"")
	fs.BoolVar(&f.trustLedger, "trust-ledger", false, "skip what the ledger records as published without asking the registry (default: one HEAD per ref)")
	fs.BoolVar(&f.requireVerified, "require-verified", false, "refuse images whose verified field is not true")
	fs.BoolVar(&f.debug, "debug", false, "log every registry request (method, path, status; never credentials)")
	f.signing.register(fs)
	f.fs = fs
}

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("publish", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: swebuild publish --metadata-file FILE|--images oci:DIR --repo REPO [OPTIONS]\n\nPush built images by digest and write one multi-arch index per instance.\n\nOptions:\n")
		fs.PrintDefaults()
	}
	var f publishFlags
	metadataFile := fs.String("metadata-file", "", "build metadata file (JSON lines of image records, as `swebuild build --metadata-file` writes)")
	images := fs.String("images", "", "oci:DIR: publish the instance images of an OCI layout swebuild build --output type=oci,dest=DIR wrote, instead of a metadata file (default ledger: publish-ledger.jsonl beside DIR)")
	f.register(fs, "repo", "repository prefix to publish under, e.g. 127.0.0.1:5000/swebench")
	fs.IntVarP(&f.jobs, "jobs", "j", 8, "instances published at once")
	fs.StringVar(&f.verification, "verification", "", "verify summary (verify --summary FILE): attach each per-arch image's gold result as an in-toto test-result statement (a referrer of the image)")
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	layoutDir, fromLayout := strings.CutPrefix(*images, "oci:")
	switch {
	case f.repo == "":
		return usageErr(fs, stderr, "--repo is required")
	case *metadataFile == "" && *images == "":
		return usageErr(fs, stderr, "--metadata-file is required (or --images oci:DIR)")
	case *metadataFile != "" && *images != "":
		return usageErr(fs, stderr, "give one of --metadata-file and --images")
	case *images != "" && (!fromLayout || layoutDir == ""):
		return usageErr(fs, stderr, "--images %q: want oci:DIR (an OCI layout from swebuild build --output type=oci,dest=DIR)", *images)
	}
	src := publish.Source{MetadataFile: *metadataFile, Layout: layoutDir}
	recs, ledger, problems, err := src.Read(ctx, stderr)
	if err != nil {
		return err
	}
	if problems != nil {
		// Publish the valid records, report the bad ones, fail at the end.
		fmt.Fprintln(stderr, problems)
	}
	if err := f.publish(ctx, recs, ledger, stdout, stderr); err != nil {
		return err
	}
	return src.ProblemsErr(problems)
}

// options turns the flags into a publish run's options; ledgerPath is used
// when --ledger is not given (empty: the pipeline's default). The
// credentials variable is read here, once.
func (f *publishFlags) options(ledgerPath string, stdout, stderr io.Writer) (publish.RunOptions, error) {
	// Publish's workers write here at once (--debug's request lines, the
	// progress), also when a caller gave a plain buffer.
	stdout, stderr = core.SyncWriter(stdout), core.SyncWriter(stderr)
	if f.ledgerPath != "" {
		ledgerPath = f.ledgerPath
	}
	rps := f.maxRPS
	switch {
	case rps < 0:
		rps = 0 // the client's default
	case rps == 0:
		rps = -1 // unlimited
	}
	dest, err := registry.RegistryOf(f.repo)
	if err != nil {
		return publish.RunOptions{}, fmt.Errorf("repository prefix: %w", err)
	}
	kc, err := registryCredentials(f.authEnv, dest)
	if err != nil {
		return publish.RunOptions{}, fmt.Errorf("--registry-auth-env: %w", err)
	}
	var logf func(string, ...any)
	if f.debug {
		logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, "debug: "+format+"\n", a...)
		}
	}
	var vsrc *publish.VerificationSource
	if f.verification != "" {
		if vsrc, err = pipeline.PublishVerification(f.verification, "swebuild "+version); err != nil {
			return publish.RunOptions{}, fmt.Errorf("--verification: %w", err)
		}
	}
	signer, err := f.signing.signer(f.fs, stderr, "publish signs every statement it attaches")
	if err != nil {
		return publish.RunOptions{}, err
	}
	return publish.RunOptions{
		Options: publish.Options{
			Signer:               signer,
			Verification:         vsrc,
			Repo:                 f.repo,
			KeepDoubleUnderscore: f.keepUU,
			Jobs:                 f.jobs,
			Version:              version,
			RequireVerified:      f.requireVerified,
			TrustLedger:          f.trustLedger,
			Progress:             stdout,
		},
		LedgerPath: ledgerPath,
		Registry:   registry.Options{MaxRPS: rps, Concurrency: f.concurrency, Keychain: kc, InsecureRegistries: f.insecure, Logf: logf},
		Warnings:   stderr,
	}, nil
}

// publish pushes the instance images of recs and writes their indexes;
// ledger is the ledger when --ledger is not given.
func (f *publishFlags) publish(ctx context.Context, recs []core.Image, ledger string, stdout, stderr io.Writer) error {
	opts, err := f.options(ledger, stdout, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	sum, err := publish.Run(ctx, recs, opts)
	if sum != nil {
		fmt.Fprintf(stdout, "\n%sledger:    %s\nelapsed:   %s\n", sum.String(), opts.LedgerPath, time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		return err
	}
	return sum.Err()
}
