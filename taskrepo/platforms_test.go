package taskrepo

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

func TestPlanTasks(t *testing.T) {
	tasks := []Task{
		{Instance: instance("a__a-1", "x/a"), Dockerfile: []byte("FROM --platform=linux/amd64 ubuntu\n")},
		{Instance: instance("b__b-1", "x/b"), Dockerfile: []byte("FROM ubuntu\nRUN curl chrome-linux64.zip\n")},
		{Instance: instance("c__c-1", "y/c"), Dockerfile: []byte("FROM ubuntu\nRUN curl chrome-linux64.zip\n")},
		{Instance: instance("d__d-1", "y/d"), Dockerfile: []byte("broken")},
	}
	// a stand-in rule set: drops the constant --platform, refuses chrome-linux64
	rules := func(df []byte) (Arm64, error) {
		s := string(df)
		switch {
		case s == "broken":
			return Arm64{}, errors.New("parse error")
		case strings.Contains(s, "chrome-linux64"):
			return Arm64{Dockerfile: df, X86Only: "x86-chrome: chrome-linux64 (line 2)"}, nil
		}
		return Arm64{Dockerfile: []byte(strings.Replace(s, "--platform=linux/amd64 ", "", 1)), Applied: []string{"from-platform"}}, nil
	}
	lang := func(repo string) string {
		if strings.HasPrefix(repo, "x/") {
			return "js"
		}
		return ""
	}
	p := PlanTasks(tasks, PlanOptions{Platforms: core.AllPlatforms(), Language: lang, RewriteArm64: rules})
	want := []struct {
		plats   []core.Platform
		arm64   string
		x86Only string
	}{
		{core.AllPlatforms(), "FROM ubuntu\n", ""},
		{[]core.Platform{core.AMD64}, "", "x86-chrome: chrome-linux64 (line 2)"},
		{[]core.Platform{core.AMD64}, "", "x86-chrome: chrome-linux64 (line 2)"},
		{[]core.Platform{core.AMD64}, "", "arm64 rules: parse error"},
	}
	for i, w := range want {
		got := p.Tasks[i]
		if !slices.Equal(got.Platforms, w.plats) || string(got.Dockerfiles[core.ARM64]) != w.arm64 || got.X86Only != w.x86Only {
			t.Errorf("%s: platforms %v, arm64 %q, x86-only %q; want %v %q %q", got.Task.Instance.InstanceID, got.Platforms, got.Dockerfiles[core.ARM64], got.X86Only, w.plats, w.arm64, w.x86Only)
		}
		if string(got.Dockerfiles[core.AMD64]) != string(tasks[i].Dockerfile) {
			t.Errorf("%s: the amd64 Dockerfile must be the task's own", got.Task.Instance.InstanceID)
		}
	}
	var b strings.Builder
	if err := p.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	wantTable := `LANGUAGE  TASKS  LINUX/AMD64  LINUX/ARM64
js        2      2            1
unknown   2      2            0
total     4      4            1

x86-only (no linux/arm64):
     2  x86-chrome
        e.g. x86-chrome: chrome-linux64 (line 2)
     1  arm64 rules
        e.g. arm64 rules: parse error
`
	if b.String() != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), wantTable)
	}
	// amd64 only asked: amd64 only, and the x86-only reasons are still
	// said (as the dataset's plan says them whatever the platforms).
	p = PlanTasks(tasks, PlanOptions{Platforms: []core.Platform{core.AMD64}, RewriteArm64: rules})
	for i, pt := range p.Tasks {
		if !slices.Equal(pt.Platforms, []core.Platform{core.AMD64}) || pt.X86Only != want[i].x86Only || pt.Dockerfiles[core.ARM64] != nil {
			t.Errorf("%s: %v %q", pt.Task.Instance.InstanceID, pt.Platforms, pt.X86Only)
		}
	}
	// task.yaml's x86_only wins over the rules, with its own reason.
	x86 := tasks[0]
	x86.X86Only = "USE_X86"
	p = PlanTasks([]Task{x86}, PlanOptions{Platforms: core.AllPlatforms(), RewriteArm64: rules})
	if pt := p.Tasks[0]; !slices.Equal(pt.Platforms, []core.Platform{core.AMD64}) || pt.X86Only != "USE_X86" || pt.Applied != nil {
		t.Errorf("x86_only in task.yaml: %v %q %v; want linux/amd64 alone, USE_X86, no rule applied", pt.Platforms, pt.X86Only, pt.Applied)
	}
}

func instance(id, repo string) (in core.Instance) {
	in.InstanceID, in.Repo = id, repo
	return in
}
