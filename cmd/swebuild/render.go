package main

import (
	"context"
	"errors"
	"io"
)

// runRender is a placeholder until the render stage lands.
func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
