package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/check"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// driftFlags are the flags of `swebuild drift`.
type driftFlags struct {
	o                       pipeline.DriftOptions
	g                       genInputs
	format, out, ledger     string
	maxDrift, maxUnrecorded int
	authEnv                 string
	insecure                []string
}

func (f *driftFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.o.Images, "images", "", "publication A: a records file (build metadata file or publish ledger) or a repository prefix (with --dataset)")
	fs.StringVar(&f.o.Against, "against", "", "publication B, compared with A (same syntax as --images); changes read A -> B")
	f.g.register(fs)
	fs.StringVar(&f.format, "format", "md", "output format: "+strings.Join(drift.Formats, ", "))
	fs.StringVarP(&f.out, "out", "o", "", "write the report to this file instead of stdout")
	fs.IntVar(&f.maxDrift, "max-drift", -1, "exit non-zero when more than N distinct package changes (package, from, to; counted once whatever the number of images) are found; -1: no limit")
	fs.IntVar(&f.maxUnrecorded, "max-unrecorded", -1, "exit non-zero when more than N images changed digest with nothing recorded (same spec key and pin rules, other packages); -1: no limit")
	fs.StringVar(&f.ledger, "ledger", "", "publish ledger of a repository-prefix side: its records give the images' spec keys and pin rules, so each changed digest gets its cause (spec, pin, repair)")
	fs.StringVar(&f.o.Save, "save", "", "write A's environment documents to this directory (the input of --freeze DIR on render/plan/build)")
	fs.StringVar(&f.o.Prefix.Tag, "tag", check.DefaultTag, "tag read on every name of a repository prefix")
	fs.BoolVar(&f.o.Prefix.KeepDoubleUnderscore, "keep-double-underscore", false, "names keep \"__\" instead of upstream's \"_1776_\" (as publish --keep-double-underscore)")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	fs.StringArrayVar(&f.insecure, "insecure-registry", nil, "allow plain HTTP to this registry (HOST[:PORT], repeatable); loopback registries are always allowed")
	fs.IntVarP(&f.o.Jobs, "jobs", "j", 8, "images read at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild drift --images A --against B [OPTIONS]\n\n"+
			"Compare the resolved environments (the CycloneDX documents attached to each env and\n"+
			"instance image) of two publications: per image, matched by kind, name and platform,\n"+
			"the packages added, removed or changed from A to B, grouped by change. An image with\n"+
			"no document is reported as such. An image whose digest changed gets its cause from\n"+
			"the records (a repair's rule, other pin rules, another spec key; else a rebuild of the\n"+
			"same inputs, or an unrecorded change: same inputs, other packages); --ledger gives a\n"+
			"repository prefix its records. Exits non-zero when a document cannot be read, with\n"+
			"--max-drift N when more than N distinct package changes are found, or with\n"+
			"--max-unrecorded N when more than N digests changed with nothing recorded.\n\nOptions:\n%s", fs.FlagUsages())
	}
}

// check reports the first usage problem of the flags.
func (f *driftFlags) check() error {
	switch {
	case f.o.Images == "":
		return errors.New("--images is required")
	case f.o.Against == "":
		return errors.New("--against is required")
	case !slices.Contains(drift.Formats, f.format):
		return fmt.Errorf("--format: unknown format %q (want one of %s)", f.format, strings.Join(drift.Formats, ", "))
	case f.maxDrift < -1:
		return fmt.Errorf("--max-drift: %d (want N >= 0, or -1 for no limit)", f.maxDrift)
	case f.maxUnrecorded < -1:
		return fmt.Errorf("--max-unrecorded: %d (want N >= 0, or -1 for no limit)", f.maxUnrecorded)
	}
	return nil
}

// runDrift implements `swebuild drift`: the packages that changed between
// the environment documents of two publications (pipeline.Drift).
func runDrift(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("drift", stderr)
	var f driftFlags
	f.register(fs)
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if err := f.check(); err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	o := f.o
	if f.ledger != "" {
		recs, err := core.ReadRecords(f.ledger, stderr)
		if err != nil {
			return fmt.Errorf("--ledger: %w", err)
		}
		o.Records = recs
	}
	if f.g.given() {
		in, err := f.g.inputs(stderr)
		if err != nil {
			return usageErr(fs, stderr, "%v", err)
		}
		o.Inputs = in
	}
	reader, err := publicationReader(f.authEnv, "", registry.Options{InsecureRegistries: f.insecure})
	if err != nil {
		return err
	}
	o.Reader, o.Log = reader, stderr
	rep, err := pipeline.Drift(ctx, o)
	if err != nil {
		return driftErr(fs, stderr, err)
	}
	if err := writeReport(stdout, f.out, func(w io.Writer) error { return drift.Write(w, rep, f.format) }); err != nil {
		return err
	}
	return rep.CheckLimits(f.maxDrift, f.maxUnrecorded)
}

// driftErr names a failing side by its flag; a prefix with no dataset to
// enumerate it is a usage error.
func driftErr(fs *pflag.FlagSet, stderr io.Writer, err error) error {
	var se *pipeline.DriftSideError
	if !errors.As(err, &se) {
		return err
	}
	flag := map[string]string{"A": "--images", "B": "--against"}[se.Side]
	if errors.Is(err, pipeline.ErrNoInstances) {
		return usageErr(fs, stderr, "%s %s: not a file, so a repository prefix: --dataset is required to enumerate its images", flag, se.Set)
	}
	return fmt.Errorf("%s %s: %w", flag, se.Set, se.Err)
}

// writeReport writes a report (write's output, whole) to stdout, or to
// the file named by out.
func writeReport(stdout io.Writer, out string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if out == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}
