package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/ctxdigest"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/verification"
)

// Run modes (Result.Mode).
const (
	// ModeGold runs the dataset record's gold patch.
	ModeGold = "gold"
	// ModeControl runs no patch at all: the tests must fail.
	ModeControl = "control"
	// ModePredictions runs a predictions file's patch; Result.Model is
	// the file's model_name_or_path.
	ModePredictions = "predictions"
)

// Target is one instance image to verify on one platform.
type Target struct {
	Instance core.Instance
	// Platform is linux/amd64 or linux/arm64.
	Platform core.Platform
	// Image is a pullable reference of the instance image for Platform.
	Image string
	// EvalScript is the script run as /eval.sh: the record's eval_script
	// as upstream v5 runs it (EvalScriptV5), or the generated eval.sh.
	EvalScript string
	// Script says which script EvalScript is (source, sha256, fallback).
	Script ScriptInfo
	// RecordsExit: EvalScript keeps the test command's exit status in
	// SWEBENCH_TEST_EXIT_CODE; the wrapper then takes it as eval.sh's own
	// exit status and grading gets it as GradeOptions.ExitCode.
	RecordsExit bool
	// Parser is the log parser: the record's log_parser (dataset script),
	// else the one the instance's spec profile names ("": upstream's map);
	// Runner.Grade.Parser, when set, wins.
	Parser string
	// Rules are the grading rules for the script's output: v5 for the
	// record's script, v4.1 for the generated one; Runner.Grade.Rules, when
	// set, wins.
	Rules grading.Rules
	// Absent, when set, says why the instance has no image for Platform
	// (an error wrapping ErrImageAbsent): nothing runs, and each asked mode
	// gets a FailureImageAbsent result.
	Absent string
}

// Prediction is one line of an upstream predictions file.
type Prediction struct {
	InstanceID string  `json:"instance_id"`
	Model      string  `json:"model_name_or_path"`
	Patch      *string `json:"model_patch"`
}

// Runner runs verification jobs and grades them.
type Runner struct {
	// Engine runs the containers (BuildKitEngine).
	Engine Engine
	// Host, when set, is the platform of the machine the engine runs on:
	// results of another platform are marked Emulated (run through QEMU).
	Host core.Platform
	// Workers is the number of runs at once (default 2).
	Workers int
	// Timeout limits each eval.sh (default DefaultTimeout, upstream's).
	Timeout time.Duration
	// Repeat runs each (instance, platform, mode) this many times (default 1)
	// and flags tests whose results differ.
	Repeat int
	// RunDir receives gold/, control/ and predictions/<model>/, each
	// holding <instance>/<arch>[/run-<k>]/ with patch.diff, eval.sh,
	// run_instance.log, test_output.txt and report.json. Model names and
	// instance ids are data, not paths: each becomes one path element
	// inside RunDir (PathName).
	RunDir string
	// Grade are the grading options (e.g. Parser for a profile's repos).
	Grade grading.GradeOptions
	// Progress receives one line per finished run; nil: none.
	Progress io.Writer
	// Cache, when set, makes BuilderHook skip an image whose build
	// definition was already verified with the same inputs and record each
	// new success (Verify never uses it).
	Cache *Cache
	// Reverify makes BuilderHook run every image even when the cache holds
	// its result; successes are still recorded.
	Reverify bool
	// Control makes BuilderHook run the no-patch control once after the
	// gold runs (Repeat of them): it must come out unresolved, or the
	// image fails as not discriminating.
	Control bool

	// AllowHarnessChanges runs predictions whose patch changes the test
	// harness (HarnessChanges). Otherwise such a prediction is not run: its
	// result is FailureHarness, naming the files. Gold patches (and
	// predictions equal to the gold patch) are never refused: the files are
	// only reported.
	AllowHarnessChanges bool

	// MaxOutput bounds each run's test output (Job.MaxOutput; default
	// DefaultMaxOutput): a longer one is kept as its first and last halves
	// and graded from them (Attempt.Truncated says so).
	MaxOutput int64

	// hookEngine, when set (unit tests), replaces the gateway engine
	// BuilderHook runs the gold patch with.
	hookEngine func(gc gateway.Client, image llb.State) Engine

	mu         sync.Mutex
	inputsOnce sync.Once
	inputs     *InputFS
}

// InputMounts are the local mounts the build session BuilderHook's function
// runs in must have (builder.Options.VerifyMounts): InputsMount, through
// which each run's input files go.
func (r *Runner) InputMounts() map[string]fsutil.FS {
	return map[string]fsutil.FS{InputsMount: r.inputFS()}
}

func (r *Runner) inputFS() *InputFS {
	r.inputsOnce.Do(func() { r.inputs = NewInputFS() })
	return r.inputs
}

// runSpec is one (target, mode, model) to run Repeat times.
type runSpec struct {
	t         Target
	mode      string
	model     string
	patch     *string
	skipApply bool
}

// Verify runs every target in the modes asked for: gold (each record's
// patch), control (no patch applied: the tests must fail) and the given
// predictions (by instance id; targets without one are skipped), Repeat
// times each, Workers at a time, and returns the summary. The error is
// non-nil only when nothing could be run (e.g. the run directory cannot be
// made); per-run failures are in the summary.
func (r *Runner) Verify(ctx context.Context, targets []Target, gold, control bool, preds map[string]Prediction) (*Summary, error) {
	if r.Engine == nil {
		return nil, errors.New("verify: no engine")
	}
	if err := os.MkdirAll(r.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	var specs []runSpec
	var empties []Result
	for _, t := range targets {
		if t.Absent != "" {
			empties = append(empties, r.imageAbsent(t, gold, control, preds)...)
			continue
		}
		if gold {
			p := t.Instance.Patch
			specs = append(specs, runSpec{t: t, mode: ModeGold, patch: &p})
		}
		if pr, ok := preds[t.Instance.InstanceID]; ok {
			if pr.EmptyPatch() {
				empties = append(empties, r.describe(aggregate(t, ModePredictions, pr.Model, []Attempt{r.emptyPatch(t, pr)}), t))
			} else if h := t.harnessChanges(*pr.Patch); len(h) > 0 && !r.AllowHarnessChanges && *pr.Patch != t.Instance.Patch {
				empties = append(empties, r.describe(aggregate(t, ModePredictions, pr.Model, []Attempt{r.harnessRefusal(t, pr, h)}), t))
			} else {
				specs = append(specs, runSpec{t: t, mode: ModePredictions, model: pr.Model, patch: pr.Patch})
			}
		}
		if control {
			empty := ""
			specs = append(specs, runSpec{t: t, mode: ModeControl, patch: &empty, skipApply: true})
		}
	}
	repeat := max(r.Repeat, 1)
	type job struct{ s, k int }
	attempts := make([][]Attempt, len(specs))
	for i := range attempts {
		attempts[i] = make([]Attempt, repeat)
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < max(r.Workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				attempts[j.s][j.k] = r.runOne(ctx, specs[j.s], j.k+1, repeat, nil)
			}
		}()
	}
	// Repeats go round by round so that a flaky pair is not run back to
	// back.
	for k := 0; k < repeat; k++ {
		for i := range specs {
			jobs <- job{i, k}
		}
	}
	close(jobs)
	wg.Wait()
	sum := &Summary{Settings: r.RunSettings(repeat)}
	for i, s := range specs {
		sum.Results = append(sum.Results, r.describe(aggregate(s.t, s.mode, s.model, attempts[i]), s.t))
	}
	sum.Results = append(sum.Results, empties...)
	sum.link()
	return sum, nil
}

// RunSettings are the summary's record of what every run shared, repeated
// repeat times.
func (r *Runner) RunSettings(repeat int) *verification.Settings {
	g := string(r.Grade.Rules)
	if g == "" {
		g = "auto"
	}
	return &verification.Settings{Grading: g, TimeoutSeconds: int64(r.timeout() / time.Second), MaxOutput: Job{MaxOutput: r.MaxOutput}.maxOutput(), Network: "none", Repeat: repeat}
}

// BuilderHook returns the function the builder calls for every instance
// image it has solved, inside the node's build session (which must have
// InputMounts) and before the image is exported or pushed: it runs the gold
// patch on image (which must carry the image config) Repeat times, then with
// Control the no-patch control once, and returns an error when the
// instance is not resolved on that platform or its tests do not
// discriminate (so the builder does not push it). A flaky gold (resolved in
// some of the runs, Result.Flaky) is no error: the image is exported and
// its verdict says flaky. targets are looked up by instance id and
// platform; an instance image without a target fails. Each call's results
// (gold, and control) are added to sum (safe for concurrent calls).
func (r *Runner) BuilderHook(targets []Target, sum *Summary) func(ctx context.Context, gc gateway.Client, instanceID string, platform core.Platform, image llb.State) error {
	byKey := map[imageKey]Target{}
	for _, t := range targets {
		byKey[imageKey{t.Instance.InstanceID, t.Platform}] = t
	}
	return func(ctx context.Context, gc gateway.Client, instanceID string, platform core.Platform, image llb.State) error {
		t, ok := byKey[imageKey{instanceID, platform}]
		if !ok {
			return fmt.Errorf("verify: no dataset record or eval.sh for %s on %s", instanceID, platform)
		}
		var key string
		if r.Cache != nil {
			var why string
			key, why = r.cacheKey(ctx, t, image)
			if key == "" {
				r.progress("%s %s %s: not looked up in the verification cache: %s", instanceID, platform, ModeGold, why)
			} else if r.Reverify {
				r.progress("%s %s %s: reverifying: not looked up in the verification cache", instanceID, platform, ModeGold)
			} else if res, ok := r.cached(t, key); ok {
				r.mu.Lock()
				sum.Results = append(sum.Results, res)
				if r.Control {
					// The control of the cached verification came out
					// unresolved (only such verifications are cached).
					sum.Results = append(sum.Results, Result{InstanceID: res.InstanceID, Platform: res.Platform, Mode: ModeControl, Image: res.Image,
						Failure: FailureTests, Dir: res.Dir, Cached: true, CacheKey: key, Runs: []Attempt{}})
				}
				r.mu.Unlock()
				return nil
			}
		}
		p := t.Instance.Patch
		var engine Engine = gatewayEngine{gc: gc, image: image, inputs: r.inputFS()}
		if r.hookEngine != nil {
			engine = r.hookEngine(gc, image)
		}
		repeat := max(r.Repeat, 1)
		runs := make([]Attempt, repeat)
		for k := range runs {
			runs[k] = r.runOne(ctx, runSpec{t: t, mode: ModeGold, patch: &p}, k+1, repeat, engine)
		}
		one := &Summary{Results: []Result{r.describe(aggregate(t, ModeGold, "", runs), t)}}
		if r.Control && one.Results[0].ResolvedRuns() > 0 {
			empty := ""
			a := r.runOne(ctx, runSpec{t: t, mode: ModeControl, patch: &empty, skipApply: true}, 1, 1, engine)
			one.Results = append(one.Results, r.describe(aggregate(t, ModeControl, "", []Attempt{a}), t))
			one.link()
		}
		res := one.Results[0]
		r.mu.Lock()
		sum.Results = append(sum.Results, one.Results...)
		r.mu.Unlock()
		for _, c := range one.Results[1:] {
			if !c.OK() && c.Failure == FailureInfra {
				return fmt.Errorf("control run of %s on %s failed: %s (logs: %s)", instanceID, platform, c.Why(), c.Dir)
			}
		}
		if !res.OK() && !res.Flaky() {
			return fmt.Errorf("gold patch verification of %s on %s failed: %s (logs: %s)", instanceID, platform, res.Why(), res.Dir)
		}
		if key != "" && res.OK() {
			r.remember(t, key, res)
		}
		return nil
	}
}

// cacheKey is the verification cache key of the gold run of t on image, or
// "" and why the image cannot be cached: its definition reads local files
// the builder did not fingerprint, or it cannot be marshaled.
func (r *Runner) cacheKey(ctx context.Context, t Target, image llb.State) (key, why string) {
	def, locals, err := definitionDigest(ctx, image, t.Platform)
	if err != nil {
		return "", err.Error()
	}
	files, ok := ctxdigest.Of(ctx, image)
	if locals && !ok {
		return "", "the image reads local files the builder did not fingerprint"
	}
	return CacheKeyInputs{
		Definition:   def,
		ContextFiles: files,
		InstanceID:   t.Instance.InstanceID,
		Platform:     t.Platform,
		Patch:        t.Instance.Patch,
		EvalScript:   t.runScript(),
		Parser:       r.parser(t),
		Rules:        string(r.gradeOptions(t).Rules),
		Timeout:      r.timeout(),
		Mode:         r.hookMode(),
	}.Key(), ""
}

// hookMode is what BuilderHook's cache keys name as the mode: gold for one
// gold run (the key of a verification before repeats and controls), else
// the number of gold runs and the control, so a cached verification stands
// only for the same checks.
func (r *Runner) hookMode() string {
	if max(r.Repeat, 1) == 1 && !r.Control {
		return ModeGold
	}
	m := fmt.Sprintf("%s x%d", ModeGold, max(r.Repeat, 1))
	if r.Control {
		m += " + " + ModeControl
	}
	return m
}

// cached looks key up and, on a hit, makes the result that stands for the
// cached run and writes the cache record (and its report.json) in the run
// directory, so the logs of this build say where the verdict came from.
func (r *Runner) cached(t Target, key string) (Result, bool) {
	rec, err := r.Cache.Load(key)
	if err != nil {
		r.progress("%s %s %s: %v", t.Instance.InstanceID, t.Platform, ModeGold, err)
	}
	if rec == nil || rec.InstanceID != t.Instance.InstanceID || rec.Platform != t.Platform || rec.Mode != ModeGold {
		return Result{}, false
	}
	res := Result{
		InstanceID: t.Instance.InstanceID, Platform: t.Platform, Mode: ModeGold, Image: t.Image,
		Resolved: true, F2P: rec.F2P, P2P: rec.P2P, TestSeconds: rec.TestSeconds,
		Dir: rec.Dir, Cached: true, CacheKey: key, Runs: []Attempt{},
	}
	res = r.describe(res, t)
	dir, derr := r.runDir(t, ModeGold, "", 1, 1)
	if b, err := json.MarshalIndent(rec, "", "  "); err == nil && derr == nil && os.MkdirAll(dir, 0o755) == nil {
		if os.WriteFile(filepath.Join(dir, "cached.json"), append(b, '\n'), 0o644) == nil {
			res.Dir = dir
		}
		if len(rec.Report) > 0 {
			_ = os.WriteFile(filepath.Join(dir, "report.json"), rec.Report, 0o644)
		}
	}
	r.progress("%s %s %s: resolved (cached: verified %s, logs %s)", t.Instance.InstanceID, t.Platform, ModeGold, rec.Verified.UTC().Format(time.RFC3339), rec.Dir)
	return res, true
}

// remember records a successful run under key; a failure to write is a
// warning (the next build verifies again).
func (r *Runner) remember(t Target, key string, res Result) {
	rec := &CacheRecord{
		Key: key, InstanceID: t.Instance.InstanceID, Platform: t.Platform, Mode: ModeGold,
		Resolved: res.Resolved, F2P: res.F2P, P2P: res.P2P,
		Seconds: res.Seconds, TestSeconds: res.TestSeconds, Dir: res.Dir, Verified: time.Now().UTC(),
	}
	if abs, err := filepath.Abs(res.Dir); err == nil {
		rec.Dir = abs
	}
	if b, err := os.ReadFile(filepath.Join(res.Dir, "report.json")); err == nil && json.Valid(b) {
		rec.Report = b
	}
	if err := r.Cache.Store(rec); err != nil {
		r.progress("%s %s %s: %v", t.Instance.InstanceID, t.Platform, ModeGold, err)
	}
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// parser is the log parser grading t uses.
func (r *Runner) parser(t Target) string {
	if r.Grade.Parser != "" {
		return r.Grade.Parser
	}
	return t.Parser
}

// gatewayEngine runs a job on an image inside a running gateway session
// whose InputsMount is inputs.
type gatewayEngine struct {
	gc     gateway.Client
	image  llb.State
	inputs *InputFS
}

func (g gatewayEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	return RunInGateway(ctx, g.gc, g.image, job, g.inputs)
}

// runDir is where one attempt's files go: always inside RunDir, whatever the
// instance id and model name hold.
func (r *Runner) runDir(t Target, mode, model string, k, repeat int) (string, error) {
	if t.Platform.IsZero() {
		return "", errors.New("no platform (want linux/amd64 or linux/arm64)")
	}
	arch := t.Platform.Arch()
	var parts []string
	switch mode {
	case ModeGold, ModeControl:
		parts = []string{mode}
	case ModePredictions:
		parts = []string{ModePredictions, PathName(model)}
	default:
		return "", fmt.Errorf("unknown run mode %q", mode)
	}
	parts = append(parts, PathName(t.Instance.InstanceID), arch)
	if repeat > 1 {
		parts = append(parts, "run-"+strconv.Itoa(k))
	}
	rel := filepath.Join(parts...)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("run directory %q would not be inside the run directory", rel)
	}
	return filepath.Join(r.RunDir, rel), nil
}

// NewRunDir makes a new, empty run directory under parent named after the
// time now (verify-YYYYMMDD-HHMMSS-<random>) and returns its path: two runs
// started in the same second still get two directories (os.MkdirTemp picks
// the suffix and creates the directory atomically).
func NewRunDir(parent string, now time.Time) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	d, err := os.MkdirTemp(parent, "verify-"+now.UTC().Format("20060102-150405")+"-*")
	if err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	// MkdirTemp makes it 0700; logs are for whoever may read the parent.
	if err := os.Chmod(d, 0o755); err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	return d, nil
}

// PathName maps s (a model name, an instance id: data) to one path element
// that stays where it is joined: s itself when it is a plain name (letters,
// digits, '.', '_', '-'; not starting with '.'; at most 100 bytes), else a
// readable slug of it followed by '+' and 12 hex digits of its SHA-256.
// Plain names never contain '+', so a slug never equals a plain name, and
// two different strings get two different elements.
func PathName(s string) string {
	if plainName(s) {
		return s
	}
	slug := []byte(s)
	for i, c := range slug {
		if !plainByte(c) || (i == 0 && c == '.') {
			slug[i] = '_'
		}
	}
	if len(slug) > 64 {
		slug = slug[:64]
	}
	sum := sha256.Sum256([]byte(s))
	return string(slug) + "+" + hex.EncodeToString(sum[:6])
}

func plainName(s string) bool {
	if s == "" || len(s) > 100 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// runOne runs one attempt with engine (r.Engine when nil), writes its files
// and grades it. Seconds is the wall time of all of it: container run,
// files, grading.
func (r *Runner) runOne(ctx context.Context, s runSpec, k, repeat int, engine Engine) Attempt {
	t, mode := s.t, s.label()
	begin := time.Now()
	a := r.attempt(ctx, s, k, repeat, engine)
	r.writeRecord(s, &a)
	a.Seconds = time.Since(begin).Seconds()
	verdict := "resolved"
	if !a.Resolved {
		verdict = "unresolved (" + a.Failure + ")"
	}
	if a.Leak.Leaked() {
		verdict += "; " + a.Leak.String()
	}
	if a.Error != "" {
		verdict += ": " + a.Error
	}
	if a.Exit != nil && a.Exit.Disagree {
		verdict += "; the log's exit-code line disagrees with the runtime's exit status: " + a.Exit.String()
	}
	if len(a.Harness) > 0 {
		verdict += "; the patch changes the test harness: " + strings.Join(HarnessPaths(a.Harness), ", ")
	}
	r.progress("%s %s %s: %s in %.1fs (tests %.1fs)", t.Instance.InstanceID, t.Platform, mode, verdict, a.Seconds, a.TestSeconds)
	return a
}

// label names the run in progress lines: gold, control, or the model.
func (s runSpec) label() string {
	if s.mode == ModePredictions {
		return fmt.Sprintf("model %q", s.model)
	}
	return s.mode
}

func (r *Runner) attempt(ctx context.Context, s runSpec, k, repeat int, engine Engine) Attempt {
	if engine == nil {
		engine = r.Engine
	}
	t, mode, patch := s.t, s.mode, s.patch
	inst := t.Instance
	a := Attempt{Run: k}
	if patch != nil && !s.skipApply {
		a.Harness = t.harnessChanges(*patch)
	}
	fail := func(class, format string, args ...any) Attempt {
		a.Failure = class
		a.Error = fmt.Sprintf(format, args...)
		return a
	}
	dir, err := r.runDir(t, s.mode, s.model, k, repeat)
	if err != nil {
		return fail(FailureInfra, "%v", err)
	}
	a.Dir = dir
	patchText := ""
	if patch != nil {
		patchText = *patch
	}
	script := t.runScript()
	if err := writeInputs(a.Dir, patchText, script); err != nil {
		return fail(FailureInfra, "%v", err)
	}
	if mode == ModeGold && strings.TrimSpace(patchText) == "" {
		return fail(FailureInfra, "the dataset record has no gold patch")
	}
	timeout := r.timeout()
	job := Job{
		Image: t.Image, Platform: t.Platform, Patch: patchText, SkipApply: s.skipApply,
		EvalScript: script, BaseCommit: inst.BaseCommit, Timeout: timeout, MaxOutput: r.MaxOutput,
		Nonce: fmt.Sprintf("%s/%s/%s/%s/%d/%d", inst.InstanceID, t.Platform, mode, PathName(s.model), k, time.Now().UnixNano()),
	}
	out, err := engine.Run(ctx, job)
	if err != nil {
		return fail(FailureInfra, "%v", err)
	}
	a.TestSeconds = out.TestSeconds
	a.InContainerSeconds = out.InContainerSeconds
	log := instanceLog(inst.InstanceID, t, job, out)
	if err := os.WriteFile(filepath.Join(a.Dir, "run_instance.log"), []byte(log), 0o644); err != nil {
		return fail(FailureInfra, "writing run_instance.log: %v", err)
	}
	if out.InfraError != "" {
		return fail(FailureInfra, "%s", out.InfraError)
	}
	leak, lerr := CheckLeak(out.Leak)
	if lerr != nil {
		return fail(FailureInfra, "%v", lerr)
	}
	a.Leak = leak
	graded := log
	if out.TestRan {
		a.Output = &OutputDigest{Size: out.TestOutputSize, SHA256: out.TestOutputSHA256}
		graded = testOutput(out, timeout)
		if err := os.WriteFile(filepath.Join(a.Dir, "test_output.txt"), []byte(graded), 0o644); err != nil {
			return fail(FailureInfra, "writing test_output.txt: %v", err)
		}
		a.Exit = exitStatus(t, out, graded)
	}
	gopts := r.gradeOptions(t)
	if a.Exit != nil {
		gopts.ExitCode = a.Exit.Wrapper
	}
	rep, err := grading.Grade(inst, graded, patch, gopts)
	if err != nil {
		return fail(FailureInfra, "%v", err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, "report.json"), rep.JSON(), 0o644); err != nil {
		return fail(FailureInfra, "writing report.json: %v", err)
	}
	a.count(inst, rep)
	a.Decision = rep.Decision
	var missing []string
	if out.TestOutputOmitted > 0 {
		a.Truncated = &Truncation{Size: out.TestOutputSize, Omitted: out.TestOutputOmitted}
		if missing, err = unlabelled(inst, graded, gopts); err != nil {
			return fail(FailureInfra, "%v", err)
		}
	}
	a.classify(out, rep, missing, job.maxOutput())
	return a
}

// emptyPatch is the attempt of a prediction whose patch is null or "":
// nothing runs (upstream skips it), the run directory gets the report.json
// grading makes of the prediction with no test output (patch_is_None for
// null) and verify.json.
func (r *Runner) emptyPatch(t Target, pr Prediction) Attempt {
	a := Attempt{Run: 1, Failure: FailureEmptyPatch, Labels: map[string]string{}}
	what := "null"
	if pr.Patch != nil {
		what = "empty"
	}
	a.Error = "model_patch is " + what + ": not run (upstream counts it in empty_patch_ids)"
	dir, err := r.runDir(t, ModePredictions, pr.Model, 1, 1)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	var rep grading.Report
	if err == nil {
		rep, err = grading.Grade(t.Instance, "", pr.Patch, r.gradeOptions(t))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "report.json"), rep.JSON(), 0o644)
	}
	if err != nil {
		a.Failure, a.Error = FailureInfra, fmt.Sprintf("%s; writing its report.json: %v", a.Error, err)
		return a
	}
	a.Dir = dir
	a.count(t.Instance, rep)
	r.writeRecord(runSpec{t: t, mode: ModePredictions, model: pr.Model, patch: pr.Patch}, &a)
	r.progress("%s %s model %q: %s", t.Instance.InstanceID, t.Platform, pr.Model, a.Error)
	return a
}

// harnessChanges lists the files of patch that change t's test harness.
func (t Target) harnessChanges(patch string) []HarnessFile {
	return HarnessChanges(patch, t.Instance.TestPatch, t.runScript())
}

// harnessRefusal is the attempt of a prediction whose patch changes the test
// harness (files): nothing runs, the run directory gets the patch, eval.sh
// and verify.json naming the files, and no report.json (upstream has no such
// verdict; the run report counts it with the errors).
func (r *Runner) harnessRefusal(t Target, pr Prediction, files []HarnessFile) Attempt {
	a := Attempt{Run: 1, Failure: FailureHarness, Labels: map[string]string{}, Harness: files,
		F2P: Counts{Total: len(t.Instance.FailToPass)}, P2P: Counts{Total: len(t.Instance.PassToPass)}}
	a.Error = fmt.Sprintf("the patch changes the test harness (%s): not run, since harness changes are not allowed", strings.Join(HarnessPaths(files), ", "))
	dir, err := r.runDir(t, ModePredictions, pr.Model, 1, 1)
	if err == nil {
		err = writeInputs(dir, *pr.Patch, t.runScript())
	}
	if err != nil {
		a.Failure, a.Error = FailureInfra, fmt.Sprintf("%s; writing its run directory: %v", a.Error, err)
		return a
	}
	a.Dir = dir
	r.writeRecord(runSpec{t: t, mode: ModePredictions, model: pr.Model, patch: pr.Patch}, &a)
	r.progress("%s %s model %q: %s", t.Instance.InstanceID, t.Platform, pr.Model, a.Error)
	return a
}

// imageAbsent are the results of a target without an image: one per mode
// asked (a prediction only when the instance has one), FailureImageAbsent,
// nothing run.
func (r *Runner) imageAbsent(t Target, gold, control bool, preds map[string]Prediction) []Result {
	var specs []runSpec
	if gold {
		specs = append(specs, runSpec{t: t, mode: ModeGold})
	}
	if pr, ok := preds[t.Instance.InstanceID]; ok {
		specs = append(specs, runSpec{t: t, mode: ModePredictions, model: pr.Model})
	}
	if control {
		specs = append(specs, runSpec{t: t, mode: ModeControl})
	}
	var out []Result
	for _, s := range specs {
		res := aggregate(t, s.mode, s.model, nil)
		res.Failure, res.Error = FailureImageAbsent, t.Absent+": not run"
		res.F2P, res.P2P = Counts{Total: len(t.Instance.FailToPass)}, Counts{Total: len(t.Instance.PassToPass)}
		r.progress("%s %s %s: %s", t.Instance.InstanceID, t.Platform, s.label(), res.Error)
		out = append(out, r.describe(res, t))
	}
	return out
}

// runScript is the script run as /eval.sh: EvalScript, ended with
// exitTrailer when it records the test command's exit status.
func (t Target) runScript() string {
	if t.RecordsExit {
		return t.EvalScript + exitTrailer
	}
	return t.EvalScript
}

// exitStatus is the test command's exit status as the wrapper took it (the
// exit status of eval.sh, which exits with it when the script records it,
// unless the run timed out) and as the log's first exit-code line says.
func exitStatus(t Target, out *RunOutput, log string) *ExitStatus {
	e := &ExitStatus{Log: LogExitCode(log)}
	if t.RecordsExit && !out.TimedOut {
		rc := out.TestExit
		e.Wrapper = &rc
	}
	e.Disagree = e.Wrapper != nil && e.Log != nil && *e.Wrapper != *e.Log
	if e.Wrapper == nil && e.Log == nil {
		return nil
	}
	return e
}

// describe sets what res's runs used: t's eval script, the parser and the
// grading rules.
func (r *Runner) describe(res Result, t Target) Result {
	res.Emulated = !r.Host.IsZero() && t.Platform != r.Host
	sc := t.Script
	res.Script = &sc
	res.Parser = r.parserName(t)
	res.Rules = r.gradeOptions(t).Rules
	return res
}

// gradeOptions are the grading options for t: the runner's, with t's parser
// and rules where the runner sets none.
func (r *Runner) gradeOptions(t Target) grading.GradeOptions {
	o := r.Grade
	o.Parser = r.parser(t)
	if o.Rules == "" {
		o.Rules = t.Rules
	}
	return o
}

// RunRecord is verify.json, written beside each run's report.json: what the
// run used (eval script, parser, grading rules) and the test command's exit
// status as the wrapper and the log have it.
type RunRecord struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	Mode       string        `json:"mode"`
	Model      string        `json:"model,omitempty"`
	Script     ScriptInfo    `json:"eval_script"`
	Parser     string        `json:"log_parser"`
	Rules      grading.Rules `json:"grading_rules"`
	Exit       *ExitStatus   `json:"exit_status,omitempty"`
	Decision   string        `json:"decision,omitempty"`
	Resolved   bool          `json:"resolved"`
	Failure    string        `json:"failure,omitempty"`
	Error      string        `json:"error,omitempty"`
	// Harness are the files of the patch that change the test harness
	// (reported for gold patches, refused for predictions unless allowed).
	Harness []HarnessFile `json:"harness_files,omitempty"`
	// TestOutput is the size and sha256 of the test output as the runtime
	// streamed it (all of it, also when test_output.txt keeps only its head
	// and tail).
	TestOutput *OutputDigest `json:"test_output,omitempty"`
}

// parserName names the parser grading t uses: the one set, else upstream's
// map's for the repository.
func (r *Runner) parserName(t Target) string {
	if p := r.parser(t); p != "" {
		return p
	}
	if name, ok := grading.ParserName(t.Instance.Repo); ok {
		return name
	}
	return ""
}

// writeRecord writes a's verify.json; a failure to write is an
// infrastructure error of the attempt.
func (r *Runner) writeRecord(s runSpec, a *Attempt) {
	if a.Dir == "" {
		return
	}
	rec := RunRecord{
		InstanceID: s.t.Instance.InstanceID, Platform: s.t.Platform, Mode: s.mode, Model: s.model,
		Script: s.t.Script, Parser: r.parserName(s.t), Rules: r.gradeOptions(s.t).Rules, Exit: a.Exit, Decision: a.Decision,
		Resolved: a.Resolved, Failure: a.Failure, Error: a.Error, Harness: a.Harness, TestOutput: a.Output,
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(a.Dir, "verify.json"), append(b, '\n'), 0o644)
	}
	if err != nil && a.Failure == "" {
		a.Resolved, a.Failure, a.Error = false, FailureInfra, fmt.Sprintf("writing verify.json: %v", err)
	}
}

// writeInputs creates the run directory with the patch and eval script the
// run was given.
func writeInputs(dir, patch, evalScript string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "patch.diff"), []byte(patch), 0o644); err != nil {
		return fmt.Errorf("writing patch.diff: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eval.sh"), []byte(evalScript), 0o644); err != nil {
		return fmt.Errorf("writing eval.sh: %w", err)
	}
	return nil
}

// testOutput is the test output as upstream grades it: with its timeout
// line appended when the run timed out.
func testOutput(out *RunOutput, timeout time.Duration) string {
	if !out.TimedOut {
		return out.TestOutput
	}
	return out.TestOutput + fmt.Sprintf("\n\nTimeout error: %d seconds exceeded.", int64(timeout/time.Second))
}

// count records the report's verdict, the FAIL_TO_PASS and PASS_TO_PASS
// counts and each labelled test's result.
func (a *Attempt) count(inst core.Instance, rep grading.Report) {
	a.Resolved = rep.Resolved
	a.Labels = map[string]string{}
	a.F2P = Counts{Total: len(inst.FailToPass)}
	a.P2P = Counts{Total: len(inst.PassToPass)}
	ts := rep.TestsStatus
	if ts == nil {
		return
	}
	a.F2P.Passed = len(ts.FailToPass.Success)
	a.P2P.Passed = len(ts.PassToPass.Success)
	for _, b := range []grading.Bucket{ts.FailToPass, ts.PassToPass} {
		for _, s := range b.Success {
			a.Labels[s] = "pass"
		}
		for _, s := range b.Failure {
			a.Labels[s] = "fail"
		}
	}
}

// classify names why a graded run failed, if it did: the patch did not
// apply, the tests timed out, the output kept lacks labelled tests, or the
// tests did not resolve the instance.
func (a *Attempt) classify(out *RunOutput, rep grading.Report, missing []string, maxOutput int64) {
	switch {
	case !out.Applied:
		a.Failure = FailurePatch
	case out.TimedOut:
		a.Failure = FailureTimeout
	case len(missing) > 0:
		// Upstream grades the whole output; what it would say about
		// tests whose lines were in the part left out is unknown.
		a.Resolved = false
		a.Failure = FailureTruncated
		a.Error = fmt.Sprintf("the test output was %d bytes, more than the %d-byte limit: %d were left out, and %d labelled test(s) have no result in the part kept (%s), so the run cannot be graded as upstream would grade the whole output",
			out.TestOutputSize, maxOutput, out.TestOutputOmitted, len(missing), listSome(missing, 3))
	case !rep.Resolved:
		a.Failure = FailureTests
	}
}

// unlabelled lists the FAIL_TO_PASS and PASS_TO_PASS tests of inst that
// grading log finds no result for.
func unlabelled(inst core.Instance, log string, opts grading.GradeOptions) ([]string, error) {
	lr, err := grading.EvalLog(inst, log, opts)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, list := range [][]string{inst.FailToPass, inst.PassToPass} {
		for _, name := range list {
			if _, ok := lr.StatusMap.Get(name); !ok {
				missing = append(missing, name)
			}
		}
	}
	return missing, nil
}

func (r *Runner) progress(format string, args ...any) {
	if r.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.Progress, "verify: "+format+"\n", args...)
}

// instanceLog is run_instance.log: upstream's log lines (the ones grading
// and people read) plus the exit codes.
func instanceLog(id string, t Target, job Job, out *RunOutput) string {
	var b strings.Builder
	image := t.Image
	if image == "" {
		image = "the image just built, before export"
	}
	fmt.Fprintf(&b, "Container for %s started: %s (%s), network none\n", id, image, t.Platform)
	if out.InfraError != "" {
		fmt.Fprintf(&b, "Infrastructure error: %s\n", out.InfraError)
		return b.String()
	}
	if job.SkipApply {
		b.WriteString("Control run: no patch applied\n")
	}
	for i, at := range out.Attempts {
		fmt.Fprintf(&b, "%s %s exited %d\n", at.Cmd, DockerPatch, at.ExitCode)
		if at.ExitCode == 0 {
			fmt.Fprintf(&b, "%s:\n%s\n", ApplyPatchPass, at.Output)
			break
		}
		fmt.Fprintf(&b, "Failed to apply patch to container: %s\n", at.Cmd)
		if i == len(out.Attempts)-1 {
			fmt.Fprintf(&b, "%s:\n%s\n", grading.ApplyPatchFail, at.Output)
		}
	}
	if !out.Applied {
		return b.String()
	}
	fmt.Fprintf(&b, "Git diff before:\n%s\n", strings.TrimSpace(out.DiffBefore))
	if out.TestRan {
		fmt.Fprintf(&b, "Test runtime: %.2f seconds (prepare and tests in the containers %.2f seconds)\n", out.TestSeconds, out.InContainerSeconds)
		fmt.Fprintf(&b, "eval.sh exit code: %d (the runtime's exit status of the test process)\n", out.TestExit)
		if out.TestOutputOmitted > 0 {
			fmt.Fprintf(&b, "Test output: %d bytes, more than the %d-byte limit: kept its head and tail, left %d bytes out (test_output.txt says where)\n", out.TestOutputSize, job.maxOutput(), out.TestOutputOmitted)
		}
		if out.TimedOut {
			fmt.Fprintf(&b, "%s after %d seconds\n", grading.TestsTimeout, int64(job.Timeout/time.Second))
		}
		fmt.Fprintf(&b, "Test output: %d bytes, sha256 %s (as the runtime streamed it)\n", out.TestOutputSize, out.TestOutputSHA256)
		// Upstream runs git diff again in the container after the tests;
		// nothing runs there after the tests here (docs/verify.md).
		b.WriteString("Git diff after: not taken (nothing runs in the tested container after the tests)\n")
	}
	return b.String()
}
