package ci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestAppendGitHubOutput: lines are appended to $GITHUB_OUTPUT (what is
// there stays), no path writes nothing, and a file that cannot be opened
// is an error saying so.
func TestAppendGitHubOutput(t *testing.T) {
	if err := AppendGitHubOutput("", "x=1\n"); err != nil {
		t.Fatalf("no path: %v", err)
	}
	path := filepath.Join(t.TempDir(), "github_output")
	if err := os.WriteFile(path, []byte("earlier=step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lines := range []string{"jobs=2\n", "envs_jobs=0\n"} {
		if err := AppendGitHubOutput(path, lines); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "earlier=step\njobs=2\nenvs_jobs=0\n"; string(b) != want {
		t.Errorf("output file = %q, want %q", b, want)
	}
	err = AppendGitHubOutput(filepath.Join(t.TempDir(), "no-such-dir", "out"), "x=1\n")
	if err == nil || !strings.Contains(err.Error(), "opening GitHub output file") {
		t.Errorf("missing directory: err = %v", err)
	}
}

// TestMatrixOutput: the four outputs the workflow's matrix job sets, the
// env matrix as JSON ({"include":[]} when there is no env stage).
func TestMatrixOutput(t *testing.T) {
	m := Matrix{Include: []Job{{Slot: Slot{Name: "amd64-1"}}, {Slot: Slot{Name: "arm64-1"}}},
		Envs: EnvMatrix{Include: []EnvJob{{Slot: Slot{Name: "env-amd64-1", Platform: core.AMD64, Runner: "ubuntu-24.04", Shard: 1, Count: 2}, Keys: "a,b"}}}}
	got, err := MatrixOutput(m, `{"include":"as encoded"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `matrix={"include":"as encoded"}` + "\njobs=2\n" +
		`envs_matrix={"include":[{"name":"env-amd64-1","platform":"linux/amd64","runner":"ubuntu-24.04","qemu":false,"shard":1,"count":2,"keys":"a,b"}]}` +
		"\nenvs_jobs=1\n"
	if got != want {
		t.Errorf("MatrixOutput =\n%s\nwant\n%s", got, want)
	}
	got, err = MatrixOutput(Matrix{}, `{"include":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "matrix={\"include\":[]}\njobs=0\nenvs_matrix={\"include\":[]}\nenvs_jobs=0\n"; got != want {
		t.Errorf("empty MatrixOutput = %q, want %q", got, want)
	}
	if !(Matrix{}).Empty() || m.Empty() {
		t.Errorf("Empty: empty matrix %v, two jobs %v", (Matrix{}).Empty(), m.Empty())
	}
}

// TestEnvMatrixEncodeOverLimit: an env matrix too large for half a job's
// outputs is refused, saying the size and the limit.
func TestEnvMatrixEncodeOverLimit(t *testing.T) {
	keys := strings.Repeat("k", MaxJobOutputBytes/2)
	_, err := EnvMatrix{Include: []EnvJob{{Slot: Slot{Name: "env-amd64-1"}, Keys: keys}}}.Encode()
	if err == nil || !strings.Contains(err.Error(), "over half the 1048576-byte job output limit") {
		t.Errorf("err = %v, want the job output limit named", err)
	}
}

func TestParseRunners(t *testing.T) {
	defaults := DefaultRunners()
	for _, tc := range []struct {
		name  string
		flags []string
		want  map[core.Platform]Runner
		err   string
	}{
		{name: "none: GitHub's hosted runners", want: defaults},
		{name: "arm64 on an x86-64 label (QEMU)", flags: []string{"linux/arm64=ubuntu-22.04"},
			want: map[core.Platform]Runner{core.AMD64: defaults[core.AMD64], core.ARM64: {Label: "ubuntu-22.04", Arch: core.AMD64}}},
		{name: "known arm label", flags: []string{"linux/arm64=ubuntu-22.04-arm"},
			want: map[core.Platform]Runner{core.AMD64: defaults[core.AMD64], core.ARM64: {Label: "ubuntu-22.04-arm", Arch: core.ARM64}}},
		{name: "self-hosted with its platform", flags: []string{"linux/amd64=ubuntu-latest", "linux/arm64=big-box@linux/arm64"},
			want: map[core.Platform]Runner{core.AMD64: {Label: "ubuntu-latest", Arch: core.AMD64}, core.ARM64: {Label: "big-box", Arch: core.ARM64}}},
		{name: "later flag wins", flags: []string{"linux/arm64=a@linux/arm64", "linux/arm64=b@linux/amd64"},
			want: map[core.Platform]Runner{core.AMD64: defaults[core.AMD64], core.ARM64: {Label: "b", Arch: core.AMD64}}},
		{name: "no =", flags: []string{"linux/arm64"}, err: `--runner "linux/arm64": want PLATFORM=LABEL[@RUNNER_PLATFORM]`},
		{name: "no label", flags: []string{"linux/arm64="}, err: `--runner "linux/arm64=": want PLATFORM=LABEL[@RUNNER_PLATFORM]`},
		{name: "no platform", flags: []string{"=ubuntu-24.04"}, err: `--runner "=ubuntu-24.04": want PLATFORM=LABEL[@RUNNER_PLATFORM]`},
		{name: "bad platform", flags: []string{"linux/s390x=ubuntu-24.04"}, err: `--runner "linux/s390x=ubuntu-24.04": `},
		{name: "unknown label", flags: []string{"linux/arm64=big-box"},
			err: `--runner "linux/arm64=big-box": unknown runner label "big-box"; say its platform: linux/arm64=big-box@linux/amd64`},
		{name: "bad runner platform", flags: []string{"linux/arm64=big-box@linux/mips"}, err: `--runner "linux/arm64=big-box@linux/mips": runner platform: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRunners(tc.flags)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("runners = %v, want %v", got, tc.want)
			}
			for p, r := range tc.want {
				if got[p] != r {
					t.Errorf("%s: runner %+v, want %+v", p, got[p], r)
				}
			}
		})
	}
}

func TestKnownRunnerArch(t *testing.T) {
	for label, want := range map[string]core.Platform{
		"ubuntu-24.04": core.AMD64, "ubuntu-22.04": core.AMD64, "ubuntu-latest": core.AMD64,
		"ubuntu-24.04-arm": core.ARM64, "ubuntu-22.04-arm": core.ARM64,
	} {
		if got, ok := KnownRunnerArch(label); !ok || got != want {
			t.Errorf("KnownRunnerArch(%q) = %v, %v; want %v", label, got, ok, want)
		}
	}
	for _, label := range []string{"", "windows-latest", "macos-14", "ubuntu-24.04-ARM"} {
		if got, ok := KnownRunnerArch(label); ok {
			t.Errorf("KnownRunnerArch(%q) = %v, known; want unknown", label, got)
		}
	}
}

// TestWriteEnvUnavailable: the shard writes a failed record saying why,
// which the records reader reads back, and the job fails with why.
func TestWriteEnvUnavailable(t *testing.T) {
	why := errors.New("env sweb.env.py.x86_64.abc: not in the plan")
	path := filepath.Join(t.TempDir(), "metadata.jsonl")
	err := WriteEnvUnavailable(path, "fixture__calc-1", core.ARM64, why)
	if !errors.Is(err, why) || err.Error() != why.Error() {
		t.Fatalf("err = %v, want why itself", err)
	}
	recs, err := core.ReadRecords(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("records = %+v", recs)
	}
	r := recs[0]
	if r.Kind != core.KindInstance || r.InstanceID != "fixture__calc-1" || r.Platform != core.ARM64 || r.Status != core.StatusFailed ||
		r.Error != "not built: its env image is not available: env sweb.env.py.x86_64.abc: not in the plan" {
		t.Errorf("record = %+v", r)
	}

	err = WriteEnvUnavailable(filepath.Join(t.TempDir(), "no-such-dir", "m.jsonl"), "fixture__calc-1", core.ARM64, why)
	if !errors.Is(err, why) || err.Error() == why.Error() {
		t.Errorf("unwritable file: err = %v, want why joined with the writing error", err)
	}
}

func TestJobIDs(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "ids.txt")
	if err := os.WriteFile(list, []byte("# shard amd64-3\nfixture__calc-1\n\nfixture__textutil-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(dir, "dup.txt")
	if err := os.WriteFile(dup, []byte("a__a-1\nb__b-1\na__a-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, inline, file string
		want               []string
		err                string
	}{
		{name: "inline", inline: " a__a-1, b__b-2,,c__c-3 ", want: []string{"a__a-1", "b__b-2", "c__c-3"}},
		{name: "file", file: list, want: []string{"fixture__calc-1", "fixture__textutil-1"}},
		{name: "file over inline", inline: "a__a-1", file: list, want: []string{"fixture__calc-1", "fixture__textutil-1"}},
		{name: "none", inline: " , ", err: "no instance ids given"},
		{name: "empty file", file: empty, err: "no instance ids given"},
		{name: "repeated id", file: dup, err: dup + `:3: instance id "a__a-1" repeats line 1`},
		{name: "missing file", file: filepath.Join(dir, "absent.txt"), err: "reading id list: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JobIDs(tc.inline, tc.file)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("ids = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetEnvs(t *testing.T) {
	p := Plan{Instances: []PlanInstance{
		{InstanceID: "a__a-1", Targets: []Target{{Platform: core.AMD64, Action: ActionBuild, Shard: "amd64-1"}, {Platform: core.ARM64, Action: ActionExisting}}},
		{InstanceID: "b__b-1", Targets: []Target{{Platform: core.ARM64, Action: ActionBuild, Shard: "arm64-1"}}},
	}}
	envs := []EnvTarget{{Key: "sweb.env.py.x86_64.e1:latest", Platform: core.AMD64, Action: ActionBuild, Shard: "env-amd64-1"}}
	p.SetEnvs(envs, map[Key]string{
		{"a__a-1", core.AMD64}: "sweb.env.py.x86_64.e1:latest",
		{"a__a-1", core.ARM64}: "sweb.env.py.arm64.e1:latest", // reused: no env
	})
	if len(p.Envs) != 1 || p.Envs[0].Key != "sweb.env.py.x86_64.e1:latest" {
		t.Errorf("envs = %+v", p.Envs)
	}
	for _, c := range []struct {
		in, tg int
		want   string
	}{{0, 0, "sweb.env.py.x86_64.e1:latest"}, {0, 1, ""}, {1, 0, ""}} {
		if got := p.Instances[c.in].Targets[c.tg].Env; got != c.want {
			t.Errorf("%s target %d: env %q, want %q", p.Instances[c.in].InstanceID, c.tg, got, c.want)
		}
	}
}
