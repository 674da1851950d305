package main

import (
	"context"
	"errors"
	"io"
)

// runPublish is a placeholder until the publish stage lands.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
