package publish

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// RunOptions are a whole publish run: Options (Client and Ledger are made
// here), the ledger file and the registry client's options.
type RunOptions struct {
	Options
	// LedgerPath is the ledger file (created if missing, locked while the
	// run lasts).
	LedgerPath string
	// Registry configures the client.
	Registry registry.Options
	// Warnings receives what the run went on past: damaged ledger lines.
	Warnings io.Writer
}

// Run opens the ledger, publishes images and closes the ledger. Damaged
// ledger lines are reported to Warnings and skipped: what they recorded is
// checked against the registry again. A ledger that cannot be written to
// fails the run.
func Run(ctx context.Context, images []core.Image, o RunOptions) (*Summary, error) {
	client, err := registry.New(o.Registry)
	if err != nil {
		return nil, err
	}
	ledger, err := OpenLedgerContext(ctx, o.LedgerPath)
	if err != nil {
		return nil, err
	}
	if w := o.Warnings; w != nil {
		if ledger.Migrated() {
			fmt.Fprintf(w, "note: %s was in the older ledger format; converted to image records (the original is %s.legacy)\n", ledger.Path(), ledger.Path())
		}
		if t := ledger.Torn(); t != nil {
			fmt.Fprintln(w, core.TornWarning(t))
		}
		for _, d := range ledger.Damaged() {
			fmt.Fprintf(w, "warning: %v: line skipped; what it recorded is checked against the registry again\n", d)
		}
	}
	opts := o.Options
	opts.Client, opts.Ledger = client, ledger
	sum, err := Publish(ctx, images, opts)
	return sum, errors.Join(err, ledger.Close())
}
