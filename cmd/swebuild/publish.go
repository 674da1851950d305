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

	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("publish", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: swebuild publish --metadata-file FILE --repo REPO [OPTIONS]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Push built images by digest and write one multi-arch index per instance.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Options:")
		fs.PrintDefaults()
	}
	metadataFile := fs.String("metadata-file", "", "build metadata file (JSON) listing the built images")
	repo := fs.String("repo", "", "repository prefix to publish under, e.g. 127.0.0.1:5000/swebench")
	ledgerPath := fs.String("ledger", "", "ledger file (JSON lines); default: publish-ledger.jsonl next to the metadata file")
	jobs := fs.IntP("jobs", "j", 8, "instances published at once")
	maxRPS := fs.Float64("max-rps", -1, "request-rate limit (requests/s); default 50, unlimited for a loopback registry; 0 = unlimited")
	concurrency := fs.Int("max-concurrent-requests", registry.DefaultConcurrency, "requests in flight at once")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (or REGISTRY=USER:PASSWORD,...); the Docker config and credential helpers are used otherwise")
	insecure := fs.Bool("insecure-registry", false, "allow plain HTTP to a non-loopback registry")
	keepUU := fs.Bool("keep-double-underscore", false, "keep \"__\" in image names instead of upstream's \"_1776_\"")
	trustLedger := fs.Bool("trust-ledger", false, "skip what the ledger records as pushed without asking the registry (default: one HEAD per ref)")
	requireVerified := fs.Bool("require-verified", false, "refuse images whose verified field is not true")
	debug := fs.Bool("debug", false, "log every registry request (method, path, status; never credentials)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *metadataFile == "" || *repo == "" || fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if *ledgerPath == "" {
		*ledgerPath = filepath.Join(filepath.Dir(*metadataFile), "publish-ledger.jsonl")
	}
	host, _, _ := strings.Cut(*repo, "/")
	rps := *maxRPS
	switch {
	case rps < 0 && registry.IsLoopback(host):
		rps = -1 // unlimited
	case rps < 0:
		rps = registry.DefaultMaxRPS
	case rps == 0:
		rps = -1
	}

	md, mdErr := publish.ReadMetadata(*metadataFile)
	if md == nil {
		return mdErr
	}
	if mdErr != nil {
		// Publish the valid entries, report the bad ones, fail at the end.
		fmt.Fprintln(stderr, mdErr)
	}
	kc, err := registry.Keychain(*authEnv)
	if err != nil {
		return err
	}
	var logf func(string, ...any)
	if *debug {
		logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, "debug: "+format+"\n", a...)
		}
	}
	client, err := registry.New(registry.Options{MaxRPS: rps, Concurrency: *concurrency, Keychain: kc, Insecure: *insecure, Logf: logf})
	if err != nil {
		return err
	}
	ledger, err := publish.OpenLedger(*ledgerPath)
	if err != nil {
		return err
	}
	start := time.Now()
	sum, err := publish.Publish(ctx, md, publish.Options{
		Repo:                 *repo,
		KeepDoubleUnderscore: *keepUU,
		Client:               client,
		Ledger:               ledger,
		Jobs:                 *jobs,
		Version:              version,
		RequireVerified:      *requireVerified,
		TrustLedger:          *trustLedger,
		Progress:             stdout,
	})
	cerr := ledger.Close()
	if sum != nil {
		fmt.Fprintf(stdout, "\n%sledger:    %s\nelapsed:   %s\n", sum.String(), *ledgerPath, time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		return err
	}
	if err := sum.Err(); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if mdErr != nil {
		return errors.New("metadata file has invalid entries (see above)")
	}
	return nil
}
