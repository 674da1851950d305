package main

import (
	"context"
	"errors"
	"io"
)

// runCI is a placeholder until the ci stage lands.
func runCI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
