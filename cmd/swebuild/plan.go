package main

import (
	"context"
	"errors"
	"io"
)

// runPlan is a placeholder until the plan stage lands.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
