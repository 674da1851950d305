package pins

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// Flat Dockerfiles (SWE-bench v5: upstream's make_v5_dockerfiles.py output
// and the v5 task repositories' per-task Dockerfiles) are one file per
// instance, written for linux/amd64 only. The flat rules below turn such a
// file into its linux/arm64 form. They work on the parsed Dockerfile
// (BuildKit's parser): each rule picks instructions (FROM, RUN) by their
// parsed form and rewrites one token of a line the instruction spans (a
// platform flag, a URL's arch word), or the lines of one instruction; no
// other line changes. What has no arm64 equivalent is not rewritten: it
// makes the file x86-only with a named reason.

// FlatResult is the arm64 form of one flat Dockerfile.
type FlatResult struct {
	// Dockerfile is the rewritten file (the input's bytes wherever no rule
	// applied).
	Dockerfile []byte
	// Applied lists the ids of the rewrite rules that changed something, in
	// application order.
	Applied []string
	// X86Only says why the result still does not build on linux/arm64
	// ("<rule id>: <reason>", several joined by "; "); "" when it does. The
	// rewrites are applied either way.
	X86Only string
}

// FlatRule is one arm64 rule for flat Dockerfiles. Match, Change, Reason
// and Evidence are for people (`swebuild pins list`).
type FlatRule struct {
	ID       string `json:"id"`
	Match    string `json:"match"`
	Change   string `json:"change"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`
	// X86Only marks a rule that rewrites nothing: a file it matches stays
	// x86-only.
	X86Only bool `json:"x86_only,omitempty"`

	find func(d *flatDoc) (edits []lineEdit, x86 string)
}

// lineEdit replaces line (0-based) of the file by lines (none: deleted).
type lineEdit struct {
	line  int
	lines []string
}

// Flat rule ids.
const (
	IDFlatPlatform      = "flat-arm64-from-platform"
	IDFlatMiniconda     = "flat-arm64-miniconda-installer"
	IDFlatEnvYML        = "flat-arm64-env-yml"
	IDFlatChromeApt     = "flat-arm64-chrome-apt"
	IDFlatPnpm          = "flat-arm64-pnpm-binary"
	IDFlatMvnd          = "flat-arm64-maven-for-mvnd"
	IDFlatChromeTesting = "flat-x86-chrome-for-testing"
	IDFlatOtherPlatform = "flat-x86-from-platform"
)

// FlatRules returns every flat rule in application order: the rewrites,
// then the x86-only rules (which look at the rewritten file).
func FlatRules() []FlatRule {
	return []FlatRule{flatPlatformRule(), flatMinicondaRule(), flatEnvYMLRule(), flatChromeAptRule(), flatPnpmRule(),
		flatMvndRule(), flatChromeTestingRule(), flatOtherPlatformRule()}
}

// RewriteFlatArm64 applies every flat rule to one flat Dockerfile. The
// result re-parses; an input that does not parse is an error naming the
// line the parser names.
func RewriteFlatArm64(dockerfile []byte) (FlatResult, error) {
	return rewriteFlat(dockerfile, FlatRules())
}

// flatDoc is a Dockerfile as lines and its parsed instructions.
type flatDoc struct {
	lines []string // split on "\n"; a trailing newline gives a last ""
	nodes []*parser.Node
}

func parseFlat(b []byte) (*flatDoc, error) {
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return &flatDoc{lines: strings.Split(string(b), "\n"), nodes: res.AST.Children}, nil
}

// span is the 0-based line range [from, to) of n, heredoc bodies included.
func (d *flatDoc) span(n *parser.Node) (int, int) {
	from, to := n.StartLine-1, n.EndLine
	from = max(from, 0)
	to = min(to, len(d.lines))
	return from, to
}

// instructions returns the nodes whose instruction is cmd (lower case).
func (d *flatDoc) instructions(cmd string) []*parser.Node {
	var out []*parser.Node
	for _, n := range d.nodes {
		if strings.EqualFold(n.Value, cmd) {
			out = append(out, n)
		}
	}
	return out
}

// replaceInRuns rewrites, in every line a RUN instruction spans (its
// continuation lines and heredoc bodies), each match of re on a line that
// also contains context, by repl (regexp.Expand syntax).
func replaceInRuns(d *flatDoc, context string, re *regexp.Regexp, repl string) []lineEdit {
	var edits []lineEdit
	for _, n := range d.instructions("run") {
		from, to := d.span(n)
		for i := from; i < to; i++ {
			l := d.lines[i]
			if !strings.Contains(l, context) || !re.MatchString(l) {
				continue
			}
			if nl := re.ReplaceAllString(l, repl); nl != l {
				edits = append(edits, lineEdit{i, []string{nl}})
			}
		}
	}
	return edits
}

func rewriteFlat(b []byte, rules []FlatRule) (FlatResult, error) {
	d, err := parseFlat(b)
	if err != nil {
		return FlatResult{}, fmt.Errorf("parsing the Dockerfile: %w", err)
	}
	res := FlatResult{}
	var reasons []string
	changed := false
	for _, r := range rules {
		edits, x86 := r.find(d)
		if x86 != "" {
			reasons = append(reasons, r.ID+": "+x86)
		}
		if len(edits) == 0 {
			continue
		}
		lines, err := applyEdits(d.lines, edits)
		if err != nil {
			return FlatResult{}, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		text := strings.Join(lines, "\n")
		nd, err := parseFlat([]byte(text))
		if err != nil {
			return FlatResult{}, fmt.Errorf("rule %s: the rewritten Dockerfile does not parse: %w", r.ID, err)
		}
		d = nd
		changed = true
		res.Applied = append(res.Applied, r.ID)
	}
	if changed {
		res.Dockerfile = []byte(strings.Join(d.lines, "\n"))
	} else {
		res.Dockerfile = append([]byte(nil), b...)
	}
	res.X86Only = strings.Join(reasons, "; ")
	return res, nil
}

// applyEdits returns lines with edits applied; two edits of one line are an
// error (a rule bug, never input).
func applyEdits(lines []string, edits []lineEdit) ([]string, error) {
	byLine := make(map[int][]string, len(edits))
	for _, e := range edits {
		if _, dup := byLine[e.line]; dup {
			return nil, fmt.Errorf("line %d edited twice", e.line+1)
		}
		if e.line < 0 || e.line >= len(lines) {
			return nil, fmt.Errorf("line %d out of range", e.line+1)
		}
		byLine[e.line] = e.lines
	}
	out := make([]string, 0, len(lines))
	for i, l := range lines {
		if repl, ok := byLine[i]; ok {
			out = append(out, repl...)
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// FlatAmd64Platforms are the FROM --platform values the platform rule
// rewrites (upstream's flat tool writes linux/amd64; v4 wrote linux/x86_64).
var FlatAmd64Platforms = []string{"linux/amd64", "linux/x86_64"}

const flatArm64Platform = "linux/arm64"

func flatPlatformRule() FlatRule {
	return FlatRule{
		ID:     IDFlatPlatform,
		Match:  "FROM instructions with --platform=linux/amd64 (or linux/x86_64): every flat Dockerfile and every v5 task-repo Dockerfile",
		Change: "the flag's value becomes linux/arm64; the image name, tag and the rest of the line are kept",
		Reason: "the flat files pin the base image's amd64 variant, so an arm64 build would pull amd64 layers and run them under emulation; " +
			"every base image they name is a multi-arch official image with a linux/arm64/v8 variant",
		Evidence: "FROM lines of the reference (x86_only_summary.md platform_amd64): ubuntu:jammy, maven:3.9-eclipse-temurin-11/17/21, php:8.3.16, " +
			"ruby:3.1/3.3, rust:1.77-1.84 (Docker Hub official images, each listing arm64v8); upstream v4.1.0's own arm64 Dockerfile.base files " +
			"use the same images with --platform=linux/arm64/v8 (upstream-v4.1.0/instances/*/arm64/Dockerfile.base)",
		find: func(d *flatDoc) ([]lineEdit, string) {
			var edits []lineEdit
			for _, n := range d.instructions("from") {
				plat, ok := fromPlatform(n)
				if !ok || !isAmd64Platform(plat) {
					continue
				}
				old := "--platform=" + plat
				from, to := d.span(n)
				for i := from; i < to; i++ {
					if strings.Count(d.lines[i], old) == 1 {
						edits = append(edits, lineEdit{i, []string{strings.Replace(d.lines[i], old, "--platform="+flatArm64Platform, 1)}})
						break
					}
				}
			}
			return edits, ""
		},
	}
}

func fromPlatform(n *parser.Node) (string, bool) {
	for _, f := range n.Flags {
		if v, ok := strings.CutPrefix(f, "--platform="); ok {
			return v, true
		}
	}
	return "", false
}

func isAmd64Platform(p string) bool {
	for _, a := range FlatAmd64Platforms {
		if strings.EqualFold(p, a) {
			return true
		}
	}
	return false
}

var minicondaRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(https://repo\.anaconda\.com/miniconda/Miniconda3-[A-Za-z0-9._-]+)-Linux-x86_64\.sh`)
})

func flatMinicondaRule() FlatRule {
	return FlatRule{
		ID:     IDFlatMiniconda,
		Match:  "RUN lines downloading a Miniconda installer https://repo.anaconda.com/miniconda/Miniconda3-<version>-Linux-x86_64.sh (every Python flat Dockerfile: Miniconda3-py311_23.11.0-2)",
		Change: "the URL ends in -Linux-aarch64.sh instead of -Linux-x86_64.sh (same release)",
		Reason: "the x86_64 installer holds an x86-64 conda and Python; Anaconda publishes a Linux-aarch64 installer of every Miniconda release",
		Evidence: "upstream v4.1.0's arm64 Dockerfile.base (e.g. upstream-v4.1.0/instances/astropy__astropy-12907/arm64/Dockerfile.base line 24) " +
			"downloads https://repo.anaconda.com/miniconda/Miniconda3-py311_23.11.0-2-Linux-aarch64.sh: upstream's own arm64 spelling of the same release",
		find: func(d *flatDoc) ([]lineEdit, string) {
			return replaceInRuns(d, "repo.anaconda.com/miniconda/", minicondaRe(), "${1}-Linux-aarch64.sh"), ""
		},
	}
}

// envYMLStart matches the shell line that starts the heredoc writing an
// environment.yml inside a RUN heredoc: cat <<'DELIM' > /path/environment.yml
var envYMLStart = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*cat\s+<<-?\s*(['"]?)([A-Za-z0-9_]+)(['"]?)\s*>\s*\S*environment\.ya?ml\s*$`)
})

func flatEnvYMLRule() FlatRule {
	return FlatRule{
		ID:    IDFlatEnvYML,
		Match: "RUN heredocs that write an environment.yml with a nested `cat <<'DELIM' > .../environment.yml` heredoc (the bundled, linux-64-exported files of every Verified instance)",
		Change: "inside that nested heredoc only, as " + IDArm64EnvYML + ": conda dependencies `name=version=build` become `name=version`, " +
			"_libgcc_mutex is removed, ld_impl_linux-64 becomes ld_impl_linux-aarch64 (same version); pip entries and every other line kept",
		Reason: "the files were exported on linux-64: their build strings and linux-64-only packages cannot resolve on linux-aarch64, so " +
			"`conda env create` fails on arm64 (same reason as " + IDArm64EnvYML + ")",
		Evidence: "x86_only.csv conda_linux64_builds rows (every Verified flat file, e.g. `- ca-certificates=2024.9.24=h06a4308_0`); the evidence of " + IDArm64EnvYML,
		find: func(d *flatDoc) ([]lineEdit, string) {
			var edits []lineEdit
			for _, n := range d.instructions("run") {
				if len(n.Heredocs) == 0 {
					continue
				}
				from, to := d.span(n)
				for i := from; i < to; i++ {
					m := envYMLStart().FindStringSubmatch(d.lines[i])
					if m == nil || m[1] != m[3] {
						continue
					}
					delim := m[2]
					j := i + 1
					for ; j < to && strings.TrimRight(d.lines[j], "\r") != delim; j++ {
						nl, keep := translateLine(d.lines[j])
						switch {
						case !keep:
							edits = append(edits, lineEdit{j, nil})
						case nl != d.lines[j]:
							edits = append(edits, lineEdit{j, []string{nl}})
						}
					}
					i = j
				}
			}
			return edits, ""
		},
	}
}

var chromeAptRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[arch=amd64\]`) })

func flatChromeAptRule() FlatRule {
	return FlatRule{
		ID:     IDFlatChromeApt,
		Match:  "RUN lines writing Google's Chrome apt source `deb [arch=amd64] http://dl.google.com/linux/chrome/deb/ stable main` (the 102 Multimodal dev flat files, v4's _DOCKERFILE_BASE_JS)",
		Change: "`[arch=amd64]` becomes `[arch=arm64]` on that line; the `apt-get install -y google-chrome-stable` that follows then installs the arm64 build",
		Reason: "apt skips a source restricted to [arch=amd64] on arm64, so google-chrome-stable is not found; Google's repository has served arm64 since Chrome 151 (same as " + IDChromeApt + "). " +
			"The Multilingual JS/TS files (js_2) name the same repository without [arch=...] and need no rewrite",
		Evidence: "the evidence of " + IDChromeApt + " (SWE-bench issue #520; dists/stable/Release lists amd64 and arm64)",
		find: func(d *flatDoc) ([]lineEdit, string) {
			return replaceInRuns(d, "dl.google.com/linux/chrome/deb", chromeAptRe(), "[arch=arm64]"), ""
		},
	}
}

var pnpmRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(https://github\.com/pnpm/pnpm/releases/download/[^"'\s]*/)pnpm-linux-x64(["'\s]|$)`)
})

func flatPnpmRule() FlatRule {
	return FlatRule{
		ID:       IDFlatPnpm,
		Match:    "RUN lines (and RUN heredoc lines) downloading https://github.com/pnpm/pnpm/releases/download/<version>/pnpm-linux-x64 (the 102 Multimodal dev flat files; 3 task-repo dev tasks)",
		Change:   "the asset name becomes pnpm-linux-arm64 (same release)",
		Reason:   "pnpm-linux-x64 is an x86-64 executable; pnpm publishes pnpm-linux-arm64 in every release since 6.x (same as " + IDPnpmArm64 + ")",
		Evidence: "the evidence of " + IDPnpmArm64 + " (pnpm/pnpm#3830; release asset v9.5.0/pnpm-linux-arm64)",
		find: func(d *flatDoc) ([]lineEdit, string) {
			return replaceInRuns(d, "pnpm-linux-x64", pnpmRe(), "${1}pnpm-linux-arm64${2}"), ""
		},
	}
}

func flatMvndRule() FlatRule {
	old, new := MvndLines()
	return FlatRule{
		ID:    IDFlatMvnd,
		Match: "RUN instructions that are exactly v4's five-line mvnd 1.0.2 linux-amd64 download (every Java flat file, twice: the base body is repeated)",
		Change: "each such RUN becomes the three-line RUN of " + IDMavenForMvnd + " writing /usr/local/mvnd/bin/mvnd as `exec mvn \"$@\"` " +
			"(idempotent, so the repeated base body runs it twice without error)",
		Reason: "mvnd 1.0.2 has no linux-aarch64 build (same as " + IDMavenForMvnd + "); a RUN holding the download in another form is left alone " +
			"and makes the file x86-only",
		Evidence: "the evidence of " + IDMavenForMvnd + " (apache/maven-mvnd#921, SWE-bench PR #521)",
		find: func(d *flatDoc) ([]lineEdit, string) {
			var edits []lineEdit
			x86 := ""
			for _, n := range d.instructions("run") {
				from, to := d.span(n)
				holds := false
				for i := from; i < to; i++ {
					if strings.Contains(d.lines[i], "maven-mvnd-") && strings.Contains(d.lines[i], "-linux-amd64") {
						holds = true
					}
				}
				if !holds {
					continue
				}
				if to-from != len(old) || !sameLines(d.lines[from:to], old) {
					x86 = fmt.Sprintf("line %d downloads mvnd for linux-amd64 in a form this rule does not rewrite", from+1)
					continue
				}
				edits = append(edits, lineEdit{from, new})
				for i := from + 1; i < to; i++ {
					edits = append(edits, lineEdit{i, nil})
				}
			}
			return edits, x86
		},
	}
}

func sameLines(got, want []string) bool {
	for i := range want {
		if strings.TrimRight(got[i], "\r") != want[i] {
			return false
		}
	}
	return true
}

// ChromeForTestingArm64Since is the first Chrome for Testing version with a
// linux-arm64 download.
const ChromeForTestingArm64Since = "153.0.8001.0"

var cftRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`chrome-for-testing-public/([0-9.]+)/linux64/`) })

func flatChromeTestingRule() FlatRule {
	return FlatRule{
		ID:      IDFlatChromeTesting,
		X86Only: true,
		Match:   "RUN lines (and RUN heredoc lines) downloading a Chrome for Testing linux64 zip, https://storage.googleapis.com/chrome-for-testing-public/<version>/linux64/chrome-linux64.zip (all 612 v5 Multimodal task-repo Dockerfiles pin 151.0.7922.137; 4 also fetch 120.0.6099.109)",
		Change:  "none: the file stays x86-only",
		Reason: "Chrome for Testing publishes linux-arm64 only since " + ChromeForTestingArm64Since + "; the pinned 151.0.7922.137 and 120.0.6099.109 exist for linux64 (x86-64) alone. " +
			"The task repo pins Chrome for Testing to keep the browser version fixed (its comment: Chrome 151 broke openlayers' WebGL and Cypress), so another " +
			"version or Google's apt package (which serves only the current stable) is not an equivalent. A pin at " + ChromeForTestingArm64Since + " or later is also left alone (no rule rewrites its layout yet)",
		Evidence: "https://github.com/GoogleChromeLabs/chrome-for-testing#supported-platforms (linux-arm64 supported since v153.0.8001.0; before: linux64, mac-arm64, mac-x64, win32, win64); " +
			"https://github.com/GoogleChromeLabs/chrome-for-testing/issues/1 (Linux ARM64 support); https://github.com/cypress-io/cypress-docker-images/pull/1584 " +
			"(CfT Linux/arm64 for 153 and above only); the task repo's Dockerfile comment on the pin (tasks/*/Dockerfile)",
		find: func(d *flatDoc) ([]lineEdit, string) {
			var none, later []string
			seen := map[string]bool{}
			for _, n := range d.instructions("run") {
				from, to := d.span(n)
				for i := from; i < to; i++ {
					for _, m := range cftRe().FindAllStringSubmatch(d.lines[i], -1) {
						if seen[m[1]] {
							continue
						}
						seen[m[1]] = true
						v := fmt.Sprintf("%s (line %d)", m[1], i+1)
						if versionLess(m[1], ChromeForTestingArm64Since) {
							none = append(none, v)
						} else {
							later = append(later, v)
						}
					}
				}
			}
			var why []string
			if len(none) > 0 {
				why = append(why, "Chrome for Testing linux64 "+strings.Join(none, ", ")+" has no linux-arm64 build")
			}
			if len(later) > 0 {
				why = append(why, "Chrome for Testing linux64 "+strings.Join(later, ", ")+" has a linux-arm64 build, but no rule rewrites it yet")
			}
			return nil, strings.Join(why, "; ")
		},
	}
}

// versionLess compares dotted decimal versions ("151.0.7922.137").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func flatOtherPlatformRule() FlatRule {
	return FlatRule{
		ID:      IDFlatOtherPlatform,
		X86Only: true,
		Match:   "FROM instructions whose --platform is, after the rewrites, a literal platform other than linux/arm64 (variables such as $TARGETPLATFORM are fine)",
		Change:  "none: the file stays x86-only",
		Reason:  "a base pinned to another platform cannot make an arm64 image; no reference file has one (the platform rule rewrites every linux/amd64)",
		Evidence: "the FROM lines of every flat and task-repo reference Dockerfile (upstream-v5/flat/x86_only.csv, platform_amd64): after " + IDFlatPlatform +
			" none is left",
		find: func(d *flatDoc) ([]lineEdit, string) {
			var bad []string
			for _, n := range d.instructions("from") {
				p, ok := fromPlatform(n)
				if !ok || strings.Contains(p, "$") {
					continue
				}
				if l := strings.ToLower(p); l != "linux/arm64" && l != "linux/arm64/v8" {
					bad = append(bad, fmt.Sprintf("line %d names --platform=%s", n.StartLine, p))
				}
			}
			return nil, strings.Join(bad, ", ")
		},
	}
}
