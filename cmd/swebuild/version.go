package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is the swebuild version, stamped with -ldflags "-X main.version=..."
// by the Makefile; a plain go build reports the module version if known.
var version = "dev"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("version", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild version (or swebuild --version)\n\nPrint the swebuild version.\n")
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	v := version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	fmt.Fprintf(stdout, "swebuild %s\n", v)
	return nil
}
