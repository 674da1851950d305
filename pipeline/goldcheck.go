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

	mu   sync.Mutex
	sum  *verify.Summary
	last map[goldKey]verify.Result // the latest gold result of each image
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
	gc := &GoldCheck{sum: &verify.Summary{}, dir: dir, last: map[goldKey]verify.Result{}}
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
	}
	if o.CacheDir != "" {
		runner.Cache = &verify.Cache{Dir: o.CacheDir}
	}
	gc.sum.Settings = runner.RunSettings(1)
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
			gc.last[goldKey{r.InstanceID, r.Platform}] = r
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
		settings := gc.sum.Settings
		gc.mu.Unlock()
		if !ok || res.Mode != verify.ModeGold {
			return "", nil, fmt.Errorf("no gold check result of %s on %s to attest", instanceID, p)
		}
		v, err := verify.VerdictOf(res, nil, settings)
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
	if n := len(gc.sum.Failed()); n > 0 {
		problems = append(problems, fmt.Errorf("%d instance image(s) failed gold patch verification and were not exported", n))
	}
	return problems
}
