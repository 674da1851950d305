package main

import (
	"context"
	"errors"
	"io"
)

// runBuild is a placeholder until the build stage lands.
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
