package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verify"
)

// TestInputsCheck: each bad input is refused naming its flag.
func TestInputsCheck(t *testing.T) {
	ok := Inputs{Dataset: "d.jsonl", CacheDir: "/c", SpecsVersion: "4.1.0", Pins: "default"}
	with := func(f func(*Inputs)) Inputs { in := ok; f(&in); return in }
	for _, tc := range []struct {
		name string
		in   Inputs
		want string // "" valid
	}{
		{"dataset", ok, ""},
		{"task repo, final tables", with(func(in *Inputs) { in.Dataset, in.TaskRepo, in.SpecsVersion = "", "tr", "final" }), ""},
		{"pins none and a lifted x86 rule", with(func(in *Inputs) { in.Pins = "default,-puppeteer-bundled-chromium" }), ""},
		{"no input", with(func(in *Inputs) { in.Dataset = "" }), "--dataset is required (or --task-repo DIR)"},
		{"both inputs", with(func(in *Inputs) { in.TaskRepo = "tr" }), "--dataset and --task-repo: give one"},
		{"no cache", with(func(in *Inputs) { in.CacheDir = "" }), "no cache directory: set --cache-dir or $SWEBUILD_CACHE"},
		{"specs version", with(func(in *Inputs) { in.SpecsVersion = "5.0" }), `--specs-version "5.0": want 4.1.0 or final`},
		{"unknown pin rule", with(func(in *Inputs) { in.Pins = "default,-no-such-rule" }), "--pins: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Check()
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want one saying %q", err, tc.want)
			}
		})
	}
}

// TestParseArches: --arch takes upstream's arch names and Go's, repeated
// or comma-separated, and gives each platform once, amd64 first.
func TestParseArches(t *testing.T) {
	both := []core.Platform{core.AMD64, core.ARM64}
	for _, tc := range []struct {
		vals []string
		want []core.Platform
		err  string
	}{
		{[]string{"x86_64"}, []core.Platform{core.AMD64}, ""},
		{[]string{"arm64"}, []core.Platform{core.ARM64}, ""},
		{[]string{"aarch64"}, []core.Platform{core.ARM64}, ""},
		{[]string{"linux/amd64"}, []core.Platform{core.AMD64}, ""},
		{[]string{"arm64,x86_64"}, both, ""},
		{[]string{"arm64", " amd64 "}, both, ""},
		{[]string{"all"}, both, ""},
		{[]string{"all", "arm64"}, both, ""},
		{[]string{"x86_64", "s390x"}, nil, `--arch "s390x": want x86_64, arm64 or all`},
		{[]string{"arm64,"}, nil, `--arch "": want x86_64, arm64 or all`},
		{nil, nil, "--arch is required (x86_64, arm64 or all)"},
	} {
		got, err := ParseArches(tc.vals)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: %v, err %v; want the error %q", tc.vals, got, err, tc.err)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("%q: %v, err %v; want %v", tc.vals, got, err, tc.want)
		}
	}
}

// TestVerifyOptionsCheck: verify's command line, each refusal naming its
// flag; --images dataset[=REGISTRY] becomes DatasetImages, and the
// registry returned is the host the images are pulled from.
func TestVerifyOptionsCheck(t *testing.T) {
	ok := VerifyOptions{Gold: true, Images: "127.0.0.1:5000/swebuild", Workers: 1, Repeat: 1, Timeout: time.Minute,
		EvalScript: verify.ScriptDataset, Engine: EngineBuildKit}
	with := func(f func(*VerifyOptions)) VerifyOptions { o := ok; f(&o); return o }
	for _, tc := range []struct {
		name     string
		o        VerifyOptions
		registry string
		err      string
		check    func(VerifyOptions) bool // what Check set
	}{
		{"registry images", ok, "127.0.0.1:5000", "", nil},
		{"docker hub images", with(func(o *VerifyOptions) { o.Images = "swebench" }), "index.docker.io", "", nil},
		{"oci layout", with(func(o *VerifyOptions) { o.Images = "oci:/tmp/layout" }), "", "", nil},
		{"metadata file, control, docker", with(func(o *VerifyOptions) {
			o.Images, o.MetadataFile, o.Gold, o.Control, o.Engine = "", "m.jsonl", false, true, EngineDocker
		}), "", "", nil},
		{"predictions, generated script, a parser", with(func(o *VerifyOptions) {
			o.Gold, o.PredictionsFile, o.EvalScript, o.Parser, o.RunID = false, "p.jsonl", verify.ScriptGenerated, "parse_log_pytest", "run-1.a"
		}), "127.0.0.1:5000", "", nil},
		{"dataset images", with(func(o *VerifyOptions) { o.Images = "dataset" }), "", "",
			func(o VerifyOptions) bool { return o.DatasetImages && o.Images == "" && o.DatasetRegistry == "" }},
		{"dataset images re-rooted", with(func(o *VerifyOptions) { o.Images = "dataset=ghcr.io/me/mirror" }), "ghcr.io", "",
			func(o VerifyOptions) bool {
				return o.DatasetImages && o.Images == "" && o.DatasetRegistry == "ghcr.io/me/mirror"
			}},
		{"a repository named dataset-like", with(func(o *VerifyOptions) { o.Images = "datasets.example.com/x" }), "datasets.example.com", "",
			func(o VerifyOptions) bool { return !o.DatasetImages }},
		{"nothing to run", with(func(o *VerifyOptions) { o.Gold = false }), "", "give --gold, --control or --predictions FILE", nil},
		{"no images", with(func(o *VerifyOptions) { o.Images = "" }), "", "give exactly one of --images REPO|dataset[=REGISTRY] and --metadata-file F", nil},
		{"two image sources", with(func(o *VerifyOptions) { o.MetadataFile = "m.jsonl" }), "", "give exactly one of --images", nil},
		{"workers", with(func(o *VerifyOptions) { o.Workers = 0 }), "", "--workers 0: want at least 1", nil},
		{"repeat", with(func(o *VerifyOptions) { o.Repeat = -1 }), "", "--repeat -1: want at least 1", nil},
		{"timeout", with(func(o *VerifyOptions) { o.Timeout = 0 }), "", "--timeout 0s: want a positive duration", nil},
		{"parser", with(func(o *VerifyOptions) { o.Parser = "parse_log_nothing" }), "", `--log-parser "parse_log_nothing": want one of `, nil},
		{"eval script", with(func(o *VerifyOptions) { o.EvalScript = "mine" }), "", `--eval-script "mine": want dataset or generated`, nil},
		{"run id", with(func(o *VerifyOptions) { o.RunID = "a/b" }), "", `--run-id "a/b": want a plain name`, nil},
		{"run id dot", with(func(o *VerifyOptions) { o.RunID = ".hidden" }), "", `--run-id ".hidden": want a plain name`, nil},
		{"engine", with(func(o *VerifyOptions) { o.Engine = "podman" }), "", `--engine "podman": want buildkit or docker`, nil},
		{"builder with docker", with(func(o *VerifyOptions) { o.Engine, o.BuildKit = EngineDocker, "unix:///b.sock" }), "", "--builder is for --engine buildkit", nil},
		{"dataset= without a registry", with(func(o *VerifyOptions) { o.Images = "dataset=" }), "", "--images dataset=: want a registry (and path) after '='", nil},
		{"bad repository", with(func(o *VerifyOptions) { o.Images = "Bad Repo" }), "", "--images: ", nil},
		{"bad dataset registry", with(func(o *VerifyOptions) { o.Images = "dataset=Bad Repo" }), "", "--images dataset=: ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			reg, err := o.Check()
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v; want one saying %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("refused: %v", err)
			case reg != tc.registry:
				t.Errorf("registry %q, want %q", reg, tc.registry)
			case tc.check != nil && !tc.check(o):
				t.Errorf("options after Check: images %q, dataset images %v, registry %q", o.Images, o.DatasetImages, o.DatasetRegistry)
			}
		})
	}
}

// TestGoldCheckOptionsCheck: build --verify's flags.
func TestGoldCheckOptionsCheck(t *testing.T) {
	ok := GoldCheckOptions{Timeout: time.Minute, Repeat: 1, EvalScript: verify.ScriptDataset}
	with := func(f func(*GoldCheckOptions)) GoldCheckOptions { o := ok; f(&o); return o }
	for _, tc := range []struct {
		o    GoldCheckOptions
		want string
	}{
		{ok, ""},
		{with(func(o *GoldCheckOptions) {
			o.Repeat, o.EvalScript, o.Parser = 100, verify.ScriptGenerated, "parse_log_django"
		}), ""},
		{with(func(o *GoldCheckOptions) { o.Timeout = -time.Second }), "--verify-timeout -1s: want a positive duration"},
		{with(func(o *GoldCheckOptions) { o.Repeat = 0 }), "--verify-repeat 0: want 1 to 100 runs"},
		{with(func(o *GoldCheckOptions) { o.Repeat = 101 }), "--verify-repeat 101: want 1 to 100 runs"},
		{with(func(o *GoldCheckOptions) { o.EvalScript = "" }), `--verify-eval-script "": want dataset or generated`},
		{with(func(o *GoldCheckOptions) { o.Parser = "pytest" }), `--log-parser "pytest": want one of `},
	} {
		err := tc.o.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err %v, want %q", tc.o, err, tc.want)
		}
	}
}

// TestVerifyPlatforms: the platforms given, else the host's; no host
// platform needs --platform.
func TestVerifyPlatforms(t *testing.T) {
	hostErr := errors.New("host architecture s390x is neither amd64 nor arm64")
	for _, tc := range []struct {
		given   []core.Platform
		host    core.Platform
		hostErr error
		want    []core.Platform
		err     string
	}{
		{nil, core.ARM64, nil, []core.Platform{core.ARM64}, ""},
		{[]core.Platform{core.ARM64, core.AMD64, core.ARM64}, core.AMD64, nil, []core.Platform{core.AMD64, core.ARM64}, ""},
		{[]core.Platform{core.ARM64}, core.Platform{}, hostErr, []core.Platform{core.ARM64}, ""},
		{nil, core.Platform{}, hostErr, nil, "no --platform given and no default: host architecture s390x is neither amd64 nor arm64; give --platform linux/amd64 and/or linux/arm64"},
		{[]core.Platform{{}}, core.AMD64, nil, nil, "--platform: no platform given"},
	} {
		got, err := VerifyPlatforms(tc.given, tc.host, tc.hostErr)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v; want %q", tc.given, err, tc.err)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("%v (host %v): %v, err %v; want %v", tc.given, tc.host, got, err, tc.want)
		}
	}
}

// TestBuilderFlagsOptions: every builder flag read into the builder's
// options, and each bad value refused naming its flag (and, for the pool
// file, its line).
func TestBuilderFlagsOptions(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.txt")
	if err := os.WriteFile(pool, []byte("# the arm64 hosts\nlinux/arm64=tcp://arm-1:1234\n\nlinux/arm64=tcp://arm-2:1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPool := filepath.Join(dir, "bad-pool.txt")
	if err := os.WriteFile(badPool, []byte("unix:///a.sock\nlinux/s390x=tcp://z:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := BuilderFlags{
		Builders: []string{"linux/amd64=unix:///run/buildkitd.sock"}, PoolFile: pool,
		DownAfter: 10 * time.Second, Workers: 3, Push: "127.0.0.1:5000/x", Progress: "plain",
		Outputs:   []string{"type=oci,dest=" + filepath.Join(dir, "layout")},
		CacheFrom: []string{"127.0.0.1:5000/cache:main"}, CacheTo: []string{"type=registry,ref=127.0.0.1:5000/cache:main,mode=max"},
		BuildContexts: []string{"base-py-amd64=docker-image://127.0.0.1:5000/base@sha256:" + strings.Repeat("a", 64)},
		Reproducible:  true, SourceDateEpoch: "1700000000", RunDir: filepath.Join(dir, "run"), BuilderID: "ci",
	}
	opts, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	wantBuilders := []builder.BuilderSpec{
		{Platform: core.AMD64, Addr: "unix:///run/buildkitd.sock"},
		{Platform: core.ARM64, Addr: "tcp://arm-1:1234"},
		{Platform: core.ARM64, Addr: "tcp://arm-2:1234"},
	}
	switch {
	case !slices.Equal(opts.Builders, wantBuilders):
		t.Errorf("builders %+v, want %+v", opts.Builders, wantBuilders)
	case opts.Pool.DownAfter != 10*time.Second || opts.Workers != 3 || opts.Push != f.Push || opts.RunDir != f.RunDir || opts.BuilderID != "ci":
		t.Errorf("options %+v", opts)
	case opts.Output == nil || opts.Output.Type != "oci" || opts.Output.Dest != filepath.Join(dir, "layout"):
		t.Errorf("output %+v", opts.Output)
	case len(opts.Images) != 1 || opts.Images["base-py-amd64"] != "127.0.0.1:5000/base@sha256:"+strings.Repeat("a", 64):
		t.Errorf("build-context images %v", opts.Images)
	case len(opts.CacheFrom) != 1 || opts.CacheFrom[0].Type != "registry" || opts.CacheFrom[0].Attrs["ref"] != "127.0.0.1:5000/cache:main":
		t.Errorf("cache from %+v", opts.CacheFrom)
	case len(opts.CacheTo) != 1 || opts.CacheTo[0].Type != "registry" || opts.CacheTo[0].Attrs["mode"] != "max":
		t.Errorf("cache to %+v", opts.CacheTo)
	case opts.Reproducible == nil || opts.Reproducible.SourceDateEpoch != 1700000000:
		t.Errorf("reproducible %+v", opts.Reproducible)
	}

	// No run directory: runs/build-<UTC time>.
	g := BuilderFlags{Builders: []string{"unix:///b.sock"}, DownAfter: time.Second, Progress: "quiet"}
	if opts, err := g.Options(); err != nil || !strings.HasPrefix(opts.RunDir, filepath.Join("runs", "build-")) || opts.Output != nil || opts.Images != nil || opts.Reproducible != nil {
		t.Errorf("defaults: %+v, %v", opts, err)
	}

	with := func(m func(*BuilderFlags)) BuilderFlags { c := g; m(&c); return c }
	for _, tc := range []struct {
		f    BuilderFlags
		want string
	}{
		{with(func(f *BuilderFlags) { f.Progress = "fancy" }), `--progress "fancy": want auto, tty, plain, rawjson or quiet`},
		{with(func(f *BuilderFlags) { f.Builders = []string{"linux/s390x=tcp://z:1"} }), "--builder: "},
		{with(func(f *BuilderFlags) { f.PoolFile = filepath.Join(dir, "absent") }), "--pool: reading pool file"},
		{with(func(f *BuilderFlags) { f.PoolFile = badPool }), "--pool: " + badPool + ":2: "},
		{with(func(f *BuilderFlags) { f.DownAfter = 0 }), "--node-down-after 0s: want a positive duration"},
		{with(func(f *BuilderFlags) { f.Outputs = []string{"type=tar,dest=x"} }), "--output: "},
		{with(func(f *BuilderFlags) { f.Outputs = []string{"type=oci,dest=a", "type=oci,dest=b"} }), "--output given 2 times: one OCI layout directory holds every image"},
		{with(func(f *BuilderFlags) { f.BuildContexts = []string{"base=docker.io/x"} }), `--build-context "base=docker.io/x": want KEY=docker-image://REF`},
		{with(func(f *BuilderFlags) { f.BuildContexts = []string{"=docker-image://x"} }), `--build-context "=docker-image://x": want KEY=docker-image://REF`},
		{with(func(f *BuilderFlags) { f.BuildContexts = []string{"base=docker-image://"} }), `--build-context "base=docker-image://": want KEY=docker-image://REF`},
		{with(func(f *BuilderFlags) { f.CacheFrom = []string{"mode=max"} }), "--cache-from: "},
		{with(func(f *BuilderFlags) { f.CacheTo = []string{""} }), "--cache-to: empty cache option"},
		{with(func(f *BuilderFlags) { f.Reproducible, f.SourceDateEpoch = true, "yesterday" }), "--source-date-epoch: "},
		{with(func(f *BuilderFlags) { f.Reproducible, f.SourceDateEpoch = true, "-1" }), "--source-date-epoch: "},
	} {
		if _, err := tc.f.Options(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v; want %q", tc.f, err, tc.want)
		}
	}
}
