package main

import (
	"context"
	"errors"
	"io"
)

// runGrade is a placeholder until the grade stage lands.
func runGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
