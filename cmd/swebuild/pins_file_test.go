package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/pyindex"
)

const calcHold = `{
  "schema": "swebuild.pins/v1",
  "rules": [
    {
      "id": "repair-fixture-calc-1.0-fixdep",
      "repo": "fixture/calc",
      "version": "1.0",
      "hold": [{"ecosystem": "pypi", "name": "fixdep", "version": "1.0"}],
      "reason": "fixdep 1.1 broke calc's gold patches",
      "evidence": "night N: 4 images failed"
    }
  ]
}
`

// TestRenderPinsFile: render --pins default,FILE with a hold rule changes
// exactly calc's setup_env.sh (the constraint on its pip line), what names
// its env key and its meta.json (the rule's id), on both arches; textutil
// is untouched. A bad file is an error naming it, the line and the field.
func TestRenderPinsFile(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "..", "..", "testdata", "fixture")
	raw, err := os.ReadFile(filepath.Join(fixture, "specs.json"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := pyindex.Lookup("breaking-dependency")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pyindex.Specs(raw, sc.Requires)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	specs, hold := filepath.Join(tmp, "specs.json"), filepath.Join(tmp, "proposal.json")
	if err := os.WriteFile(specs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hold, []byte(calcHold), 0o644); err != nil {
		t.Fatal(err)
	}
	render := func(pinsValue string) (string, error) {
		out := filepath.Join(t.TempDir(), "out")
		var so, se bytes.Buffer
		err := runRender(context.Background(), []string{"--dataset", filepath.Join(fixture, "dataset.jsonl"), "--specs", specs,
			"--instance", "fixture__calc-1", "--instance", "fixture__textutil-1", "--arch", "all", "--out", out,
			"--cache-dir", t.TempDir(), "--pins", pinsValue}, &so, &se)
		if err != nil {
			err = &renderErr{err, se.String()}
		}
		return out, err
	}
	plain, err := render("default")
	if err != nil {
		t.Fatal(err)
	}
	held, err := render("default," + hold)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	err = filepath.Walk(plain, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(plain, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(held, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			changed = append(changed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(changed)
	var want []string
	for _, arch := range []string{"arm64", "x86_64"} {
		for _, f := range []string{"Dockerfile.instance", "meta.json", "setup_env.sh"} {
			want = append(want, filepath.Join("fixture__calc-1", arch, f))
		}
	}
	if !slices.Equal(changed, want) {
		t.Errorf("files changed by the pins file: %q\nwant %q", changed, want)
	}
	env, err := os.ReadFile(filepath.Join(held, "fixture__calc-1", "arm64", "setup_env.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if line := "python -m pip install fixaux fixdep fixfmt fixlog -c /dev/stdin <<'SWEBUILD_HOLD'\nfixdep==1.0\nSWEBUILD_HOLD\n"; !strings.Contains(string(env), line) {
		t.Errorf("setup_env.sh lacks %q:\n%s", line, env)
	}
	meta, _ := os.ReadFile(filepath.Join(held, "fixture__calc-1", "x86_64", "meta.json"))
	if !strings.Contains(string(meta), `"repair-fixture-calc-1.0-fixdep"`) {
		t.Errorf("meta.json does not record the rule:\n%s", meta)
	}

	bad := filepath.Join(tmp, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(calcHold, `"version": "1.0"}`, `"version": "1.0;id"}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := render("default," + bad); err == nil || !strings.Contains(err.Error(), bad+": line 4: rules[0].hold[0].version") {
		t.Errorf("render with a bad pins file: %v", err)
	}
}

type renderErr struct {
	err    error
	stderr string
}

func (e *renderErr) Error() string { return e.err.Error() + "\n" + e.stderr }

// TestPinsListFile: pins list --file lists a pins file's rules after the
// built-in ones, with their evidence and how to turn them off.
func TestPinsListFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proposal.json")
	if err := os.WriteFile(p, []byte(calcHold), 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	if err := runPins(context.Background(), []string{"list", "--file", p}, &so, &se); err != nil {
		t.Fatalf("%v: %s", err, se.String())
	}
	out := so.String()
	want := "id:       repair-fixture-calc-1.0-fixdep\nmatch:    repo fixture/calc, version 1.0 (its env images)\n" +
		"change:   pip holds back pypi/fixdep==1.0: a constraint on setup_env.sh's pip line (or the environment.yml pip section)\n" +
		"reason:   fixdep 1.1 broke calc's gold patches\nevidence: night N: 4 images failed\n" +
		"turn off: a pins file's rule: leave the file out of --pins (on with --pins default,FILE)\n"
	if !strings.Contains(out, want) || strings.Index(out, want) < strings.Index(out, "id:       arm64-maven-for-mvnd") {
		t.Errorf("pins list --file:\n%s\nwant after the built-in rules:\n%s", out, want)
	}
	if err := runPins(context.Background(), []string{"list", "--file", p + ".missing"}, &so, &se); err == nil || !strings.Contains(err.Error(), "--file: pins file") {
		t.Errorf("pins list --file missing: %v", err)
	}
}
