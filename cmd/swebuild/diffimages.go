package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/imagediff"
	"github.com/swebuild/swebuild/registry"
)

// runDiffImages implements `swebuild diff-images A B`: are two images the
// same, and if not, which files differ and why?
func runDiffImages(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("diff-images", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	platform := fs.String("platform", "", "the image of an index to compare (default: the index's only image; attestation manifests do not count)")
	format := fs.String("format", "text", "report format: text or json")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	insecure := fs.Bool("insecure-registry", false, "allow plain HTTP (always allowed for 127.0.0.1 and localhost)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild diff-images A B [OPTIONS]\n\nCompare two images file by file. A and B are registry references (HOST/REPO@sha256:...,\nHOST/REPO:TAG) or OCI layouts (oci:DIR:NAME, the name build --output gives an image, or\noci:DIR@sha256:...). Prints the manifests, the config fields and layers that differ, and\nevery file that differs (layer, path, what: content, size, type, mode, owner, mtime, link,\nxattrs) with its known cause (.pyc source mtimes, git index stat data, git packs, commit\ndates). Exits 0 when the image manifests are identical, 1 when they differ.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
	if fs.NArg() != 2 {
		return usageErr(fs, stderr, "want two images, A and B; got %d argument(s)", fs.NArg())
	}
	if *format != "text" && *format != "json" {
		return usageErr(fs, stderr, "--format: unknown format %q (want text or json)", *format)
	}
	var plat core.Platform
	if *platform != "" {
		p, err := core.ParsePlatform(*platform)
		if err != nil {
			return usageErr(fs, stderr, "--platform: %v", err)
		}
		plat = p
	}
	reader, err := publicationReader(*authEnv, "", registry.Options{Insecure: *insecure})
	if err != nil {
		return err
	}
	a := imagediff.Source{Ref: fs.Arg(0), Platform: plat, Reader: reader}
	b := imagediff.Source{Ref: fs.Arg(1), Platform: plat, Reader: reader}
	rep, err := imagediff.Diff(ctx, a, b)
	if err != nil {
		return err
	}
	if err := rep.Write(stdout, *format == "json"); err != nil {
		return err
	}
	return rep.Err()
}
