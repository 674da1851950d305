package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagErrorsSpeak: every subcommand says what is wrong with its flags
// on stderr, points at its help and exits 2; --help goes to stdout with exit
// 0. In process, before any daemon or file is touched.
func TestFlagErrorsSpeak(t *testing.T) {
	type tc struct {
		args     []string
		code     int
		stderr   []string // substrings, in order
		stdout   string   // substring of stdout ("" = stdout empty)
		noStderr bool
	}
	errCase := func(cmd string, args []string, want ...string) tc {
		see := "See 'swebuild " + cmd + " --help'."
		return tc{args: args, code: 2, stderr: append([]string{"swebuild " + cmd + ": "}, append(want, see)...)}
	}
	cmds := map[string][]string{ // a flag every command has, taking one value
		"render": {"--out"}, "plan": {"--format"}, "grade": {"--run-dir"}, "build": {"--progress"},
		"verify": {"--timeout", "1m"}, "publish": {"--repo"}, "sizes": {"--format"},
		"ci matrix": {"--shards", "2"}, "ci ids": {"--ids-file"}, "ci merge": {"--plan"}, "ci summary": {"--merge"},
		"ci envs": {"--plan"}, "ci contexts": {"--plan"}, "ci ledger pull": {"--repo"}, "ci ledger push": {"--file"},
		"pins": {"--format"}, "check": {"--repo"}, "drift": {"--format"},
	}
	var cases []tc
	for cmd, f := range cmds {
		words := strings.Fields(cmd)
		v := "a"
		if len(f) > 1 {
			v = f[1]
		}
		with := func(a ...string) []string { return append(append([]string(nil), words...), a...) }
		cases = append(cases,
			errCase(cmd, with("--bogus"), "unknown flag: --bogus"),
			errCase(cmd, with(f[0]), "flag needs an argument: "+f[0]),
			errCase(cmd, with(f[0], v, f[0], v), f[0]+" given twice: it takes one value"),
			tc{args: with("--help"), code: 0, stdout: "Usage: swebuild " + cmd, noStderr: true},
			tc{args: append([]string{"help"}, words...), code: 0, stdout: "Usage: swebuild " + cmd, noStderr: true},
		)
	}
	cases = append(cases,
		// The cases of issue 20.
		errCase("render", []string{"render", "--platform", "x"}, "unknown flag: --platform", "did you mean --arch?"),
		errCase("build", []string{"build", "--bogus"}, "unknown flag: --bogus"),
		errCase("plan", []string{"plan", "--dataset"}, "flag needs an argument: --dataset"),
		// Near misses.
		errCase("render", []string{"render", "--instnce", "x"}, "did you mean --instance?"),
		errCase("plan", []string{"plan", "--arch", "arm64"}, "did you mean --platform?"),
		errCase("build", []string{"build", "--worker", "2"}, "did you mean --workers?"),
		// Invalid values and missing flags after parsing.
		errCase("build", []string{"build", "--workers", "two"}, `invalid argument "two" for "-j, --workers"`),
		errCase("plan", []string{"plan", "--format", "yaml", "--dataset", "x"}, `--format "yaml": want table or json`),
		errCase("render", []string{"render", "--dataset", "x", "--arch", "all"}, "--out or --task-repo-out is required"),
		errCase("render", []string{"render", "--arch", "all", "--out", "/nonexistent"}, "--dataset is required"),
		errCase("publish", []string{"publish", "--repo", "r"}, "--metadata-file is required"),
		errCase("sizes", []string{"sizes"}, "--images is required"),
		errCase("check", []string{"check", "--dataset", "x"}, "--repo is required"),
		errCase("drift", []string{"drift", "--images", "a"}, "--against is required"),
		errCase("drift", []string{"drift", "--images", "a", "--against", "b", "--format", "csv"}, `--format: unknown format "csv" (want one of md, json, html)`),
		errCase("drift", []string{"drift", "--images", "/nonexistent/a", "--against", "b"}, "--images /nonexistent/a: not a file, so a repository prefix: --dataset is required"),
		errCase("plan", []string{"plan", "stray"}, "unexpected argument(s): stray"),
		errCase("ci matrix", []string{"ci", "matrix"}, "exactly one of --dataset, --task-repo and --ids is required"),
		errCase("plan", []string{"plan", "--dataset", "x", "--pins", "default,-chrome"}, `--pins: pins "default,-chrome": unknown rule "chrome"; pin rules: sphinx-pygments-2.18,`),
		// Repeatable flags stay repeatable.
		errCase("render", []string{"render", "--instance", "a", "--instance", "b", "--arch", "all"}, "--out or --task-repo-out is required"),
		// Top level.
		tc{args: []string{"--version"}, code: 0, stdout: "swebuild ", noStderr: true},
		tc{args: []string{"version"}, code: 0, stdout: "swebuild ", noStderr: true},
		errCase("version", []string{"version", "--short"}, "unknown flag: --short"),
		errCase("version", []string{"version", "x"}, "unexpected argument(s): x"),
		tc{args: []string{"--help"}, code: 0, stdout: "Usage: swebuild COMMAND", noStderr: true},
		tc{args: []string{"help"}, code: 0, stdout: "Usage: swebuild COMMAND", noStderr: true},
		tc{args: []string{"help", "ci", "matrix"}, code: 0, stdout: "Usage: swebuild ci matrix", noStderr: true},
		tc{args: []string{"plna"}, code: 2, stderr: []string{`swebuild: unknown command "plna"; did you mean "plan"?`, "See 'swebuild --help'."}},
		tc{args: []string{"--dataset", "x"}, code: 2, stderr: []string{`unknown flag "--dataset"`, "See 'swebuild --help'."}},
		tc{args: []string{"ci", "bogus"}, code: 2, stderr: []string{`swebuild ci: unknown command "bogus"`, "See 'swebuild ci --help'."}},
	)
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		name := strings.Join(c.args, " ")
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", name, code, c.code, stdout.String(), stderr.String())
			continue
		}
		rest := stderr.String()
		for _, w := range c.stderr {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: stderr %q lacks %q (in order)", name, stderr.String(), w)
				break
			}
			rest = rest[i+len(w):]
		}
		if c.noStderr && stderr.Len() > 0 {
			t.Errorf("%s: stderr %q, want none", name, stderr.String())
		}
		if c.stdout == "" && stdout.Len() > 0 {
			t.Errorf("%s: stdout %q, want none (errors go to stderr)", name, stdout.String())
		}
		if c.stdout != "" && !strings.Contains(stdout.String(), c.stdout) {
			t.Errorf("%s: stdout %q lacks %q", name, stdout.String(), c.stdout)
		}
		if c.code == 2 && strings.Count(stderr.String(), "\n") > 3 {
			t.Errorf("%s: stderr is %d lines, want the problem and the pointer to --help: %q", name, strings.Count(stderr.String(), "\n"), stderr.String())
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"instnce", "instance", 1}, {"kitten", "sitting", 3}, {"worker", "workers", 1}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
