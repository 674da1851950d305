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
	"time"

	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/publish"
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
	sum      *verify.Summary
	dir      string
	problems []error
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
	gc := &GoldCheck{sum: &verify.Summary{}, dir: dir}
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
	gc.hook = runner.BuilderHook(targets, gc.sum)
	gc.mounts = runner.InputMounts()
	return gc, nil
}

// Hook is the builder's verify hook.
func (gc *GoldCheck) Hook() builder.VerifyFunc { return gc.hook }

// Mounts are the local mounts the hook's runs read their inputs through
// (builder.Options.VerifyMounts).
func (gc *GoldCheck) Mounts() map[string]fsutil.FS { return gc.mounts }

// Problems are what stops some instances from being verified at all.
func (gc *GoldCheck) Problems() []error { return gc.problems }

// Summary is every check's result.
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

// Attestable is the check's summary as publish attaches it: each gold
// result bound to the image the builder exported after it (the check runs
// on the solved image, before export, so its result names no digest: the
// record of the same instance and platform, built and verified, gives it).
func (gc *GoldCheck) Attestable(records []core.Image, verifier string) *publish.VerificationSource {
	type key struct {
		id       string
		platform core.Platform
	}
	refs := map[key]string{}
	for _, r := range records {
		if r.Kind == core.KindInstance && r.Status == core.StatusBuilt && r.IsVerified() && r.Ref != "" {
			refs[key{r.InstanceID, r.Platform}] = r.Ref
		}
	}
	sum := &verify.Summary{Settings: gc.sum.Settings}
	for _, res := range gc.sum.Results {
		if ref, ok := refs[key{res.InstanceID, res.Platform}]; ok && res.Mode == verify.ModeGold {
			res.Image = ref
			sum.Results = append(sum.Results, res)
		}
	}
	return &publish.VerificationSource{Summary: sum, Verifier: verifier}
}
