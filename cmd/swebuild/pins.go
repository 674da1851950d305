package main

import (
	"context"
	"errors"
	"io"
)

// runPins is a placeholder until the pins stage lands.
func runPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
