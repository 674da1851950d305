package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
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
	// Checked: the caller has checked the target registry already
	// (CheckTargets); Run does not again.
	Checked bool
}

// Targets are the repositories a publish of the instances ids is checked
// on: the per-arch repository it writes first. Every repository a publish
// writes is REPO/sweb.eval.*, on one registry, under one credential.
func Targets(o Options, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	n := manifests.Namer{Repo: o.Repo, KeepDoubleUnderscore: o.KeepDoubleUnderscore}
	return []string{n.ArchRepo(core.AMD64.Arch(), slices.Min(ids))}
}

// CheckTargets checks, before anything is written, that the registry a
// publish of ids writes to answers and accepts the credential for a push
// (registry.CheckPush on Targets): a registry that is down or refuses the
// login fails the run at once, naming the host and where the credential
// was looked for.
func CheckTargets(ctx context.Context, o RunOptions, ids []string) error {
	return registry.CheckPush(ctx, o.Registry, Targets(o.Options, ids)...)
}

// Run opens the ledger, publishes images and closes the ledger. Damaged
// ledger lines are reported to Warnings and skipped: what they recorded is
// checked against the registry again. A ledger that cannot be written to
// fails the run.
func Run(ctx context.Context, images []core.Image, o RunOptions) (*Summary, error) {
	if !o.Checked {
		var ids []string
		for _, im := range images {
			if im.Kind == core.KindInstance && im.OK() {
				ids = append(ids, im.InstanceID)
			}
		}
		if err := CheckTargets(ctx, o, ids); err != nil {
			return nil, err
		}
	}
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
