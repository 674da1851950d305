package main

import (
	"context"
	"errors"
	"io"
)

// runSizes is a placeholder until the sizes stage lands.
func runSizes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
