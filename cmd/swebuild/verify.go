package main

import (
	"context"
	"errors"
	"io"
)

// runVerify is a placeholder until the verify stage lands.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
