package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verification"
)

// VerdictOf is the gold result res as a verification statement needs it:
// its outcome, with its run's report.json and eval.sh read from res.Dir (a
// result from the verification cache has no eval.sh of its own: the
// verdict then names none). control is the control result of the same
// instance and platform (nil when none ran); settings the run's shared
// settings (nil: not recorded).
func VerdictOf(res Result, control *Result, settings *verification.Settings) (verification.Verdict, error) {
	if res.Mode != ModeGold {
		return verification.Verdict{}, fmt.Errorf("verdict of %s %s: a %s result, not a gold one", res.InstanceID, res.Platform, res.Mode)
	}
	report, err := os.ReadFile(filepath.Join(res.Dir, "report.json"))
	if err != nil {
		return verification.Verdict{}, fmt.Errorf("verdict of %s %s: %w", res.InstanceID, res.Platform, err)
	}
	eval, err := os.ReadFile(filepath.Join(res.Dir, "eval.sh"))
	if err != nil && !res.Cached {
		return verification.Verdict{}, fmt.Errorf("verdict of %s %s: %w", res.InstanceID, res.Platform, err)
	}
	v := verification.Verdict{
		InstanceID: res.InstanceID, Platform: res.Platform, Image: res.Image,
		GoldResolved: res.Resolved, Failure: res.Failure, FlakyTests: res.FlakyTests,
		Rules: string(res.Rules), Runs: len(res.Runs), Cached: res.Cached,
		Report: report, EvalScript: eval, Settings: settings,
	}
	if control != nil {
		u := !control.Resolved
		v.ControlUnresolved = &u
	}
	return v, nil
}

// Verdicts are the summary's gold results as verdicts (VerdictOf), each
// with the control result of its instance and platform. A result whose
// files cannot be read is left out and named in the error.
func (s *Summary) Verdicts() ([]verification.Verdict, error) {
	type key struct {
		id string
		p  core.Platform
	}
	control := map[key]*Result{}
	for i, r := range s.Results {
		if r.Mode == ModeControl {
			control[key{r.InstanceID, r.Platform}] = &s.Results[i]
		}
	}
	var out []verification.Verdict
	var errs []error
	for _, r := range s.Results {
		if r.Mode != ModeGold {
			continue
		}
		v, err := VerdictOf(r, control[key{r.InstanceID, r.Platform}], s.Settings)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}
