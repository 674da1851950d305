package main

import (
	"context"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/registry"
)

// runCILedger is `swebuild ci ledger pull|push`: the nightly's ledgers kept
// as artifacts in the target repository (issue 20 row 14).
func runCILedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "pull" && args[0] != "push" && args[0] != "-h" && args[0] != "--help") {
		fmt.Fprintf(stderr, "swebuild ci ledger: pull or push is required\nSee 'swebuild ci ledger --help'.\n")
		return errUsage
	}
	verb := args[0]
	if verb == "-h" || verb == "--help" {
		verb, args = "pull|push", args[:1]
	} else {
		args = args[1:]
	}
	fs := newCIFlags("ledger "+verb, "--repo REPO --file FILE [--tag TAG]",
		"Keep a ledger in the target repository itself, as an OCI artifact under a tag:\n"+
			"push uploads FILE; pull writes it to FILE (replacing it), or, when the repository\n"+
			"has none, says so and leaves FILE alone (the night then skips nothing: every\n"+
			"instance is rebuilt and re-verified).", stderr)
	repo := fs.String("repo", "", "target repository (the one --skip-existing and publish use)")
	file := fs.String("file", "", "the ledger file (JSON lines)")
	tag := fs.String("tag", ci.LedgerTag, "tag the ledger is kept under ("+ci.LedgerTag+"; "+ci.EnvLedgerTag+" for the env ledger)")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (or REGISTRY=USER:PASSWORD,...); the Docker config and credential helpers are used otherwise")
	insecure := fs.Bool("insecure-registry", false, "allow plain HTTP to a non-loopback registry")
	if help, err := parseFlags(fs, args, false, stdout, stderr); help {
		return err
	}
	if *repo == "" || *file == "" {
		return usageErr(fs, stderr, "--repo and --file are required")
	}
	client, err := registryClient(*authEnv, *repo, "--repo", registry.Options{Insecure: *insecure})
	if err != nil {
		return err
	}
	if verb == "push" {
		d, err := ci.PushLedger(ctx, client, *repo, *tag, *file)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s:%s@%s\n", *repo, *tag, d)
		return nil
	}
	found, err := ci.PullLedger(ctx, client, *repo, *tag, *file)
	if err != nil {
		return err
	}
	if !found {
		fmt.Fprintf(stderr, "swebuild ci ledger pull: warning: %s has no %s artifact: nothing is known to be built and verified, so this night rebuilds and re-verifies every instance (expected only on the first night)\n", *repo, *tag)
		return nil
	}
	fmt.Fprintf(stderr, "swebuild ci ledger pull: %s:%s -> %s\n", *repo, *tag, *file)
	return nil
}
