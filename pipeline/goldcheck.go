package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/verify"
)

// GoldCheckOptions configure the gold check of `swebuild build --verify`.
type GoldCheckOptions struct {
	// Timeout limits each eval.sh run (default verify.DefaultTimeout).
	Timeout time.Duration
	// EvalScript chooses the script: verify.ScriptDataset ("" too) or
	// verify.ScriptGenerated (see VerifyOptions.EvalScript).
	EvalScript string
	// Parser, when set, grades every repository with this upstream parser
	// (default: the record's log_parser with its own script, else the
	// profile's, else upstream's repo map).
	Parser string
	// CacheDir is the verification cache: an image definition verified
	// with the same inputs before is not run again. Empty: no cache.
	CacheDir string
	// Reverify runs every check even when the cache holds a success.
	Reverify bool
	// Repeat runs each gold patch this many times (default 1); a gold
	// that resolves in some runs only is flaky: exported and published
	// labelled (core.Image.Flaky), never verified.
	Repeat int
	// Control runs the no-patch control once after the gold runs: it must
	// come out unresolved (the tests discriminate), else the image fails.
	Control bool
	// Progress receives one line per finished check.
	Progress io.Writer
}

// GoldCheck runs each instance's gold patch inside the build, on the solved
// image, before the builder exports or pushes it (builder.Options.Verify):
// an image that fails is neither exported nor pushed.
type GoldCheck struct {
	hook     builder.VerifyFunc
	mounts   map[string]fsutil.FS
	dir      string
	problems []error

	mu      sync.Mutex
	sum     *verify.Summary
	last    map[goldKey]verify.Result // the latest gold result of each image
	control map[goldKey]verify.Result // the latest control result of each image
}

// goldKey names one instance image: instance id and platform.
type goldKey struct {
	id string
	p  core.Platform
}

// NewGoldCheck renders eval.sh for every loaded instance and platform and
// makes the builder hook; runs are written under dir.
func NewGoldCheck(ctx context.Context, l *Loaded, platforms []core.Platform, dir string, o GoldCheckOptions) (*GoldCheck, error) {
	if o.Timeout <= 0 {
		o.Timeout = verify.DefaultTimeout
	}
	if o.Parser != "" && !slices.Contains(grading.ParserNames(), o.Parser) {
		return nil, fmt.Errorf("log parser %q: want one of %s", o.Parser, strings.Join(grading.ParserNames(), ", "))
	}
	gc := &GoldCheck{sum: &verify.Summary{}, dir: dir, last: map[goldKey]verify.Result{}, control: map[goldKey]verify.Result{}}
	targets, errs := l.Targets(ctx, platforms, nil, o.EvalScript)
	for _, e := range errs {
		fmt.Fprintf(writerOr(o.Progress), "verify: %v\n", e)
	}
	if len(errs) > 0 {
		gc.problems = append(gc.problems, fmt.Errorf("%d instance(s) cannot be verified", len(errs)))
	}
	runner := &verify.Runner{
		Timeout:  o.Timeout,
		RunDir:   dir,
		Grade:    grading.GradeOptions{Parser: o.Parser},
		Progress: o.Progress,
		Reverify: o.Reverify,
		Repeat:   max(o.Repeat, 1),
		Control:  o.Control,
	}
	if o.CacheDir != "" {
		runner.Cache = &verify.Cache{Dir: o.CacheDir}
	}
	gc.sum.Settings = runner.RunSettings(max(o.Repeat, 1))
	// Each check writes into a summary of its own, then into the check's
	// under gc.mu, so Attest can read a node's result while other nodes
	// are being checked.
	gc.hook = func(ctx context.Context, c gateway.Client, instanceID string, platform core.Platform, image llb.State) error {
		one := &verify.Summary{}
		err := runner.BuilderHook(targets, one)(ctx, c, instanceID, platform, image)
		gc.mu.Lock()
		defer gc.mu.Unlock()
		gc.sum.Results = append(gc.sum.Results, one.Results...)
		for _, r := range one.Results {
			switch r.Mode {
			case verify.ModeGold:
				gc.last[goldKey{r.InstanceID, r.Platform}] = r
			case verify.ModeControl:
				gc.control[goldKey{r.InstanceID, r.Platform}] = r
			}
		}
		return err
	}
	gc.mounts = runner.InputMounts()
	return gc, nil
}

// Attest is the builder's attest hook: the verification statement of the
// gold check that passed on a solved instance image, bound to the digest
// the builder exported from that solve (the check ran before export, so
// its result names no digest of its own). verifier names the tool and
// version in the statement.
func (gc *GoldCheck) Attest(verifier string) builder.AttestFunc {
	return func(instanceID string, p core.Platform, name string, subject v1.Descriptor) (string, []byte, error) {
		gc.mu.Lock()
		res, ok := gc.last[goldKey{instanceID, p}]
		ctl, hasControl := gc.control[goldKey{instanceID, p}]
		settings := gc.sum.Settings
		gc.mu.Unlock()
		if !ok || res.Mode != verify.ModeGold {
			return "", nil, fmt.Errorf("no gold check result of %s on %s to attest", instanceID, p)
		}
		var control *verify.Result
		if hasControl {
			control = &ctl
		}
		v, err := verify.VerdictOf(res, control, settings)
		if err != nil {
			return "", nil, err
		}
		stmt, err := attest.VerificationStatement(attest.VerificationOf(v, name, subject.Digest.String(), verifier))
		if err != nil {
			return "", nil, err
		}
		return attest.TestResultPredicate, stmt, nil
	}
}

// Label marks the records of images whose gold check was flaky (resolved
// in some of the runs only): not verified, and Flaky naming the tests and
// their rates, so publish labels them and the nightly's summary names
// them. The builder exported them (the hook passed them) with the
// statement saying WARNED.
func (gc *GoldCheck) Label(recs []core.Image) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if r.Kind != core.KindInstance || !r.OK() {
			continue
		}
		res, ok := gc.last[goldKey{r.InstanceID, r.Platform}]
		if !ok || !res.Flaky() {
			continue
		}
		r.Verified = core.Bool(false)
		r.Flaky = append([]core.Flake(nil), res.Flakes...)
		if len(r.Flaky) == 0 {
			// Runs that disagree on the verdict with no labelled test to
			// blame (e.g. one run timed out): the instance as a whole.
			r.Flaky = []core.Flake{{Test: "(instance: " + res.Why() + ")", Failed: len(res.Runs) - res.ResolvedRuns(), Runs: len(res.Runs)}}
		}
	}
}

// Hook is the builder's verify hook.
func (gc *GoldCheck) Hook() builder.VerifyFunc { return gc.hook }

// Mounts are the local mounts the hook's runs read their inputs through
// (builder.Options.VerifyMounts).
func (gc *GoldCheck) Mounts() map[string]fsutil.FS { return gc.mounts }

// Problems are what stops some instances from being verified at all.
func (gc *GoldCheck) Problems() []error { return gc.problems }

// Summary is every check's result (read it once the build is over).
func (gc *GoldCheck) Summary() *verify.Summary { return gc.sum }

// Finish writes the verification summary table to out and summary.json to
// the check's directory; it returns one error per failed image and for
// anything it could not write.
func (gc *GoldCheck) Finish(out io.Writer) []error {
	var problems []error
	sort.SliceStable(gc.sum.Results, func(i, j int) bool {
		a, b := gc.sum.Results[i], gc.sum.Results[j]
		if a.InstanceID != b.InstanceID {
			return a.InstanceID < b.InstanceID
		}
		return a.Platform.Compare(b.Platform) < 0
	})
	cached := 0
	for _, r := range gc.sum.Results {
		if r.Cached {
			cached++
		}
	}
	fmt.Fprintln(out, "\ngold patch verification:")
	if cached > 0 {
		fmt.Fprintf(out, "%d of %d result(s) from the verification cache (same image definition and inputs verified before; --reverify runs them)\n", cached, len(gc.sum.Results))
	}
	if err := gc.sum.WriteTable(out, nil); err != nil {
		problems = append(problems, err)
	}
	if err := os.MkdirAll(gc.dir, 0o755); err != nil {
		problems = append(problems, fmt.Errorf("writing verification summary: %w", err))
	} else if err := gc.sum.WriteFile(filepath.Join(gc.dir, "summary.json")); err != nil {
		problems = append(problems, err)
	}
	failed := 0
	for _, r := range gc.sum.Failed() {
		switch {
		case r.Flaky():
			fmt.Fprintf(out, "FLAKY %s %s: resolved in %d of %d runs; exported labelled, not verified: %s\n", r.InstanceID, r.Platform, r.ResolvedRuns(), len(r.Runs), r.Why())
		case r.Mode == verify.ModeControl:
			// Its gold result says so (not discriminating), or it failed
			// for the infrastructure (the hook failed the image).
			if r.Failure == verify.FailureInfra {
				failed++
			}
		default:
			failed++
		}
	}
	if failed > 0 {
		problems = append(problems, fmt.Errorf("%d instance image(s) failed gold patch verification and were not exported", failed))
	}
	return problems
}
