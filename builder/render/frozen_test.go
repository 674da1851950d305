package render_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/sbom"
)

// Real listings (see ../../sbom/testdata/README.md): the conda explicit
// list of mamba's user guide (conda list --explicit --md5) and the pip
// freeze --all of the fixture's calc image.
const (
	condaListing = "../../sbom/testdata/mamba-docs-conda-explicit.txt"
	pipListing   = "../../sbom/testdata/fixture-py-pip-freeze.txt"
)

// explicitLines are the URL#md5 lines of the conda listing, as printed.
func explicitLines(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "https://") {
			out = append(out, l)
		}
	}
	return out
}

// pinLines are the name==version lines of the pip listing, as printed
// (pip freeze prints names as installed; the rule writes PEP 503 names).
func pinLines(raw []byte) []string {
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if name, v, ok := strings.Cut(l, "=="); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "-") {
			out = append(out, sbom.NormalizePyPI(name)+"=="+v)
		}
	}
	return out
}

// TestFrozenCondaVerified renders one instance of every Verified (repo,
// version) on both platforms with the default pins, then again with the
// frozen rule over a document of that env made by sbom.Parse from the real
// listings, and checks the frozen render line by line against the
// unfrozen one:
//   - the explicit spec in setup_env.sh holds "@EXPLICIT" and every
//     captured URL#md5 line of the listing exactly once, nothing else;
//   - the pip line installs every name==version line of pip freeze
//     exactly once and nothing else (the listing's -e line is left out);
//   - the env script is upstream's first line (source .../activate), the
//     heredoc, conda create -n testbed --file, rm, conda activate testbed
//     and the pip line: no python=, environment.yml or requirements.txt;
//   - Dockerfile.base, Dockerfile.env (the .bashrc lines), setup_repo.sh
//     and eval.sh are byte-identical, Dockerfile.instance differs only in
//     the env key, and the pins gain "frozen".
//
// The frozen renders embed no repository file (the renderer has no RepoFiles);
// unfrozen renders that need one (requirements.txt, environment.yml) are
// counted and checked for the frozen properties alone.
func TestFrozenCondaVerified(t *testing.T) {
	shared := spectest.SharedDir(t)
	condaRaw, err := os.ReadFile(condaListing)
	if err != nil {
		t.Fatal(err)
	}
	pipRaw, err := os.ReadFile(pipListing)
	if err != nil {
		t.Fatal(err)
	}
	condaPkgs, err := sbom.Parse(sbom.FormatCondaExplicit, condaRaw)
	if err != nil {
		t.Fatal(err)
	}
	pipPkgs, err := sbom.Parse(sbom.FormatPipFreeze, pipRaw)
	if err != nil {
		t.Fatal(err)
	}
	wantExplicit := explicitLines(t, condaRaw)
	wantPins := pinLines(pipRaw)
	if len(wantExplicit) != 7 || len(wantPins) != 10 {
		t.Fatalf("listings: %d explicit lines, %d pins; want 7 and 10", len(wantExplicit), len(wantPins))
	}
	sort.Strings(wantPins)

	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	def, err := pins.Named("default")
	if err != nil {
		t.Fatal(err)
	}
	plainR := &render.Renderer{Tables: tables, Pins: def}
	// one instance per (repo, version)
	byEnv := map[[2]string]*core.Instance{}
	for _, recs := range spectest.Records(t, shared, "SWE-bench_Verified/test") {
		for _, inst := range recs {
			k := [2]string{inst.Repo, inst.Version}
			if cur := byEnv[k]; cur == nil || inst.InstanceID < cur.InstanceID {
				byEnv[k] = inst
			}
		}
	}
	if len(byEnv) < 50 {
		t.Fatalf("only %d Verified envs", len(byEnv))
	}
	var checked, compared, needNet int
	for _, inst := range byEnv {
		var docs []*sbom.Document
		for _, p := range core.AllPlatforms() {
			docs = append(docs, &sbom.Document{Kind: "env", Image: "sweb.env.py." + p.Arch() + ".x", Platform: p,
				Repo: inst.Repo, Version: inst.Version, InstanceIDs: []string{inst.InstanceID},
				Packages: append(slices.Clone(condaPkgs), pipPkgs...)})
		}
		rule, err := pins.Frozen(docs)
		if err != nil {
			t.Fatal(err)
		}
		frozenR := &render.Renderer{Tables: tables, Pins: def.With(rule)}
		froze, err := frozenR.RenderArches(context.Background(), inst, core.AllPlatforms())
		if err != nil {
			t.Errorf("%s: frozen render: %v", inst.InstanceID, err)
			continue
		}
		plain, plainErr := plainR.RenderArches(context.Background(), inst, core.AllPlatforms())
		if plainErr != nil {
			needNet++
		}
		for i, f := range froze {
			checked++
			id := inst.InstanceID + " " + f.Arch()
			checkFrozenEnvScript(t, id, f.EnvScriptList, wantExplicit, wantPins)
			if !slices.Contains(f.Pins, pins.IDFrozen) {
				t.Errorf("%s: pins %v lack %q", id, f.Pins, pins.IDFrozen)
			}
			if plainErr != nil {
				continue
			}
			compared++
			p := plain[i]
			if p.EnvScriptList[0] != f.EnvScriptList[0] {
				t.Errorf("%s: first env line %q, upstream %q", id, f.EnvScriptList[0], p.EnvScriptList[0])
			}
			if !slices.Contains(p.EnvScriptList, "conda activate testbed") {
				t.Errorf("%s: upstream env script has no activation: %q", id, p.EnvScriptList)
			}
			for name, pair := range map[string][2]string{
				"Dockerfile.base": {p.BaseDockerfile, f.BaseDockerfile},
				"Dockerfile.env":  {p.EnvDockerfile, f.EnvDockerfile},
				"setup_repo.sh":   {p.SetupRepo, f.SetupRepo},
				"eval.sh":         {p.Eval, f.Eval},
				"Dockerfile.instance (env key aside)": {
					strings.ReplaceAll(p.InstanceDockerfile, p.EnvKey, "ENV"),
					strings.ReplaceAll(f.InstanceDockerfile, f.EnvKey, "ENV")},
			} {
				if pair[0] != pair[1] {
					t.Errorf("%s: %s changed by the frozen rule", id, name)
				}
			}
			if p.BaseKey != f.BaseKey || p.EnvKey == f.EnvKey {
				t.Errorf("%s: base key %s -> %s, env key %s -> %s", id, p.BaseKey, f.BaseKey, p.EnvKey, f.EnvKey)
			}
			if want := append(slices.Clone(p.Pins), pins.IDFrozen); !slices.Equal(f.Pins, want) {
				t.Errorf("%s: pins %v, want %v", id, f.Pins, want)
			}
		}
	}
	if compared == 0 {
		t.Error("no unfrozen render to compare with")
	}
	t.Logf("%d Verified envs, %d frozen renders checked, %d compared with the unfrozen render (%d envs need a download unfrozen)",
		len(byEnv), checked, compared, needNet)
}

func checkFrozenEnvScript(t *testing.T, id string, lines, wantExplicit, wantPins []string) {
	t.Helper()
	const open = "cat <<'EOF_59812759871' > /root/explicit.txt\n"
	want := []string{"source /opt/miniconda3/bin/activate", "", "conda create -n testbed --file /root/explicit.txt -y",
		"rm /root/explicit.txt", "conda activate testbed", ""}
	if len(lines) != len(want) {
		t.Errorf("%s: %d env script lines, want %d: %q", id, len(lines), len(want), lines)
		return
	}
	for i, w := range want {
		if w != "" && lines[i] != w {
			t.Errorf("%s: env line %d = %q, want %q", id, i, lines[i], w)
		}
	}
	heredoc, ok := strings.CutPrefix(lines[1], open)
	body, ok2 := strings.CutSuffix(heredoc, "\nEOF_59812759871")
	if !ok || !ok2 {
		t.Errorf("%s: env line 1 is not the explicit spec heredoc: %q", id, lines[1])
	} else {
		got := strings.Split(body, "\n")
		if got[0] != "@EXPLICIT" {
			t.Errorf("%s: explicit spec starts %q", id, got[0])
		}
		g := slices.Sorted(slices.Values(got[1:]))
		w := slices.Sorted(slices.Values(wantExplicit))
		if !slices.Equal(g, w) {
			t.Errorf("%s: explicit spec lines\n%q\nwant each captured URL#md5 once\n%q", id, g, w)
		}
	}
	pip, ok := strings.CutPrefix(lines[5], "python -m pip install --no-deps ")
	if !ok {
		t.Errorf("%s: last env line %q is not the pip line (exact pins, --no-deps: the captured set is the whole closure)", id, lines[5])
		return
	}
	got := slices.Sorted(slices.Values(strings.Fields(pip)))
	if !slices.Equal(got, wantPins) {
		t.Errorf("%s: pip line installs\n%q\nwant each captured pin once\n%q", id, got, wantPins)
	}
	for _, l := range lines {
		for _, bad := range []string{"python=", "environment.yml", "requirements.txt"} {
			if strings.Contains(l, bad) {
				t.Errorf("%s: frozen env line %q has %q", id, l, bad)
			}
		}
	}
}
