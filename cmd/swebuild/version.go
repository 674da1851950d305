package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is the swebuild version, stamped with -ldflags "-X main.version=..."
// by the Makefile; a plain go build reports the module version if known.
var version = "dev"

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	v := version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	fmt.Fprintf(stdout, "swebuild %s\n", v)
	return nil
}
