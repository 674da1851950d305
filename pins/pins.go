// Package pins holds declarative pin rules: small, documented changes applied
// to a spec.Recipe (a private copy of one instance's spec, env file and
// templates) before rendering. The upstream tables are never edited, and
// with no rules the rendering is upstream's byte for byte.
package pins

import (
	"fmt"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// Rule is one pin. Match/Change/Reason/Evidence are for people (`swebuild
// pins list`); apply does the change and reports whether anything changed.
type Rule struct {
	ID       string `json:"id"`
	Match    string `json:"match"`
	Change   string `json:"change"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`

	apply func(rec *spec.Recipe) bool
}

// Set is an ordered list of rules; it implements render.Pinner.
type Set struct {
	rules  []Rule
	lifted []string // x86-only rules lifted (spec.X86Rules ids)
	files  []string // pins files read (their rules are in rules)
}

// Apply runs every rule on rec in order and records the ids of the rules
// that changed it in rec.Pins.
func (s *Set) Apply(rec *spec.Recipe) {
	if s == nil {
		return
	}
	for _, r := range s.rules {
		if r.apply(rec) {
			rec.Pins = append(rec.Pins, r.ID)
		}
	}
}

// Rules returns the rules in application order.
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	return append([]Rule(nil), s.rules...)
}

// All returns every known rule, in application order.
//
// The arm64 rules (arm64-env-yml, arm64-chrome-apt, arm64-pnpm-binary,
// arm64-maven-for-mvnd) are part of the default set: they change arm64
// files only, each replaces something that exists for x86-64 only by its
// arm64 equivalent, and without them those arm64 images do not build (or
// carry an x86-64 binary). `--pins none` keeps upstream's arm64 files,
// which is what upstream generates when asked for arm64.
func All() []Rule {
	return []Rule{pygmentsRule(), condaChannelsRule(), arm64EnvRule(), chromeAptRule(), pnpmArm64Rule(), mavenForMvndRule()}
}

// Named returns the rule set for a --pins value (Parse); kept for callers
// that name a whole set ("none", "default").
func Named(name string) (*Set, error) { return Parse(name) }

// Parse returns the selection a --pins value names: a comma-separated list
// read left to right over the rules of All and the x86-only rules of
// spec.X86Rules.
//
//	none          no pin rule (upstream's files byte for byte)
//	default       every pin rule (also the empty value)
//	ID or +ID     add pin rule ID
//	-ID           drop pin rule ID; for an x86-only rule, lift it (its
//	              instances get a linux/arm64 image again, to try)
//	FILE          add the hold rules of a pins file (ReadFile): an item
//	              with a slash or ending in .json, e.g. a nightly's
//	              proposal (default,./proposal.json)
//
// A list starting with -ID starts from default ("-ID" is "default,-ID");
// one starting with ID from none ("ID,ID" is just those). Rules apply in
// All's order whatever the order of the list, then the files' rules in the
// order of the list. An unknown id is an error naming the valid ones; a
// file that cannot be read or checked an error naming it (and the line and
// field).
func Parse(value string) (*Set, error) {
	value = strings.TrimSpace(value)
	sel := &selection{value: value, all: All(), on: map[string]bool{}, lifted: map[string]bool{}}
	items := strings.Split(value, ",")
	if value == "" || strings.HasPrefix(strings.TrimSpace(items[0]), "-") {
		sel.setAll(true)
	}
	for _, item := range items {
		if err := sel.item(strings.TrimSpace(item)); err != nil {
			return nil, err
		}
	}
	s := &Set{files: sel.files}
	for _, r := range sel.all {
		if sel.on[r.ID] {
			s.rules = append(s.rules, r)
		}
	}
	s.rules = append(s.rules, sel.fileRules...)
	for _, r := range spec.X86Rules() {
		if sel.lifted[r.ID] {
			s.lifted = append(s.lifted, r.ID)
		}
	}
	return s, nil
}

// selection is a --pins value being read: the pin rules on, the x86-only
// rules lifted, and the pins files with their rules.
type selection struct {
	value     string
	all       []Rule
	on        map[string]bool
	lifted    map[string]bool
	files     []string
	fileRules []Rule
}

func (sel *selection) setAll(v bool) {
	for _, r := range sel.all {
		sel.on[r.ID] = v
	}
}

// item reads one item of the list.
func (sel *selection) item(item string) error {
	value := sel.value
	id, drop := strings.CutPrefix(item, "-")
	if !drop {
		id = strings.TrimPrefix(id, "+")
	}
	switch {
	case item == "" && value == "":
	case item == "":
		return fmt.Errorf("pins %q: empty item (want a comma-separated list of none, default, ID, -ID, FILE)", value)
	case isFileItem(id) && drop:
		return fmt.Errorf("pins %q: -%s: a pins file is added, not dropped (leave it out of the list)", value, id)
	case isFileItem(id):
		return sel.addFile(id)
	case !drop && id == "default":
		sel.setAll(true)
	case !drop && id == "none":
		sel.setAll(false)
		clear(sel.lifted)
	case isPinRule(sel.all, id):
		sel.on[id] = !drop
	case isX86Rule(id) && drop:
		sel.lifted[id] = true
	case isX86Rule(id):
		return fmt.Errorf("pins %q: %s is an x86-only rule, on unless lifted: write -%s to lift it", value, id, id)
	default:
		return fmt.Errorf("pins %q: unknown rule %q; pin rules: %s; x86-only rules (lift with -ID): %s",
			value, id, strings.Join(ruleIDs(sel.all), ", "), strings.Join(x86IDs(), ", "))
	}
	return nil
}

// addFile adds the hold rules of pins file name, refusing a file listed
// twice and a rule another file of the list has.
func (sel *selection) addFile(name string) error {
	if slices.Contains(sel.files, name) {
		return fmt.Errorf("pins %q: pins file %s listed twice", sel.value, name)
	}
	_, rules, err := ReadFile(name)
	if err != nil {
		return fmt.Errorf("pins %q: %w", sel.value, err)
	}
	for _, r := range rules {
		if slices.ContainsFunc(sel.fileRules, func(o Rule) bool { return o.ID == r.ID }) {
			return fmt.Errorf("pins %q: %s: rule %q is also in another pins file of the list", sel.value, name, r.ID)
		}
	}
	sel.files = append(sel.files, name)
	sel.fileRules = append(sel.fileRules, rules...)
	return nil
}

// LiftedX86 returns the ids of the x86-only rules the selection lifts (for
// spec.Tables.LiftX86Rules), in spec.X86Rules order.
func (s *Set) LiftedX86() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.lifted...)
}

// String is the selection in Parse's syntax: "none", "default",
// "default,-ID...", or the ids, then the lifted x86-only rules as -ID,
// then the pins files.
func (s *Set) String() string {
	all := All()
	var on []string
	for _, r := range s.Rules() {
		if isPinRule(all, r.ID) {
			on = append(on, r.ID)
		}
	}
	var parts []string
	switch {
	case len(on) == len(all):
		parts = []string{"default"}
	case len(on) == 0:
		parts = []string{"none"}
	case len(on) >= len(all)/2:
		parts = []string{"default"}
		for _, r := range all {
			if !slices.Contains(on, r.ID) {
				parts = append(parts, "-"+r.ID)
			}
		}
	default:
		parts = on
	}
	for _, id := range s.LiftedX86() {
		parts = append(parts, "-"+id)
	}
	if s != nil {
		parts = append(parts, s.files...)
	}
	return strings.Join(parts, ",")
}

func isPinRule(all []Rule, id string) bool {
	return slices.ContainsFunc(all, func(r Rule) bool { return r.ID == id })
}

func isX86Rule(id string) bool {
	return slices.ContainsFunc(spec.X86Rules(), func(r spec.X86Rule) bool { return r.ID == id })
}

func ruleIDs(all []Rule) []string {
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.ID
	}
	return ids
}

func x86IDs() []string {
	var ids []string
	for _, r := range spec.X86Rules() {
		ids = append(ids, r.ID)
	}
	return ids
}

// Only returns a set holding just the rules with the given ids.
func Only(ids ...string) (*Set, error) {
	s := &Set{}
	for _, id := range ids {
		found := false
		for _, r := range All() {
			if r.ID == id {
				s.rules = append(s.rules, r)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown pin rule %q", id)
		}
	}
	return s, nil
}

// Rule ids.
const (
	IDSphinxPygments = "sphinx-pygments-2.18"
	IDCondaChannels  = "conda-channels-tos"
	IDArm64EnvYML    = "arm64-env-yml"
	IDChromeApt      = "arm64-chrome-apt"
	IDPnpmArm64      = "arm64-pnpm-binary"
	IDMavenForMvnd   = "arm64-maven-for-mvnd"
)

// PygmentsPin is the pinned Pygments requirement.
const PygmentsPin = "Pygments==2.18.0"

func pygmentsRule() Rule {
	return Rule{
		ID:     IDSphinxPygments,
		Match:  "repo sphinx-doc/sphinx, every version, both arches",
		Change: "pip installs " + PygmentsPin + ": replaces any pygments== line in the pip section of the environment.yml, or (spec-built envs) any Pygments entry of pip_packages",
		Reason: "Pygments 2.19 changed the HTML line-number spans; sphinx tests comparing highlighted HTML then fail and PASS_TO_PASS breaks",
		Evidence: "Pygments 2.19.0 changelog (line number span markup); SWE-bench's bundled Verified environment.yml files for sphinx " +
			"all pin pygments==2.18.0 (44/44), while spec-built sphinx envs (Lite/dev) resolve the newest Pygments",
		apply: func(rec *spec.Recipe) bool {
			if rec.Repo != "sphinx-doc/sphinx" || rec.Profile != nil {
				return false
			}
			if rec.EnvYMLCached {
				yml, changed := pinPipYML(rec.EnvYML, "pygments", "2.18.0")
				rec.EnvYML = yml
				return changed
			}
			var kept []string
			for _, p := range rec.Spec.PipPackages {
				if !isPackage(p, "pygments") {
					kept = append(kept, p)
				}
			}
			kept = append(kept, PygmentsPin)
			changed := strings.Join(kept, " ") != strings.Join(rec.Spec.PipPackages, " ") || rec.Spec.PipPackages == nil
			rec.Spec.PipPackages = kept
			return changed
		},
	}
}

// isPackage reports whether requirement p names pkg (case-insensitive,
// - and _ equal).
func isPackage(p, pkg string) bool {
	name := p
	if i := strings.IndexAny(p, "<>=!~[; "); i >= 0 {
		name = p[:i]
	}
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	return norm(name) == norm(pkg)
}

// pinPipYML sets pkg==version on every "- pkg==..." line (pip section
// syntax) of an environment.yml; if there is none but a "- pip:" section,
// the pin is added as its first entry.
func pinPipYML(yml, pkg, version string) (string, bool) {
	lines := strings.Split(yml, "\n")
	found, changed := false, false
	pipAt, pipIndent := -1, ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(trimmed)]
		if trimmed == "- pip:" {
			pipAt = i
			continue
		}
		rest, ok := strings.CutPrefix(trimmed, "- ")
		if !ok || !strings.Contains(rest, "==") || !isPackage(rest, pkg) {
			continue
		}
		if pipAt >= 0 && pipIndent == "" {
			pipIndent = indent
		}
		found = true
		want := indent + "- " + rest[:strings.Index(rest, "==")] + "==" + version
		if l != want {
			lines[i] = want
			changed = true
		}
	}
	if !found && pipAt >= 0 {
		indent := lines[pipAt][:len(lines[pipAt])-len(strings.TrimLeft(lines[pipAt], " "))] + "    "
		if pipAt+1 < len(lines) {
			next := lines[pipAt+1]
			if t := strings.TrimLeft(next, " "); strings.HasPrefix(t, "- ") {
				indent = next[:len(next)-len(t)]
			}
		}
		lines = append(lines[:pipAt+1], append([]string{indent + "- " + strings.ToLower(pkg) + "==" + version}, lines[pipAt+1:]...)...)
		changed = true
	}
	return strings.Join(lines, "\n"), changed
}

// CondaChannelLine is the upstream base Dockerfile line the conda rule replaces.
const CondaChannelLine = "RUN conda config --append channels conda-forge"

// CondaChannelLines returns the lines the conda rule puts in place of
// CondaChannelLine in Dockerfile.base.
func CondaChannelLines() []string {
	return []string{
		"ENV CONDA_PLUGINS_AUTO_ACCEPT_TOS=yes",
		"RUN (conda tos accept --override-channels --channel https://repo.anaconda.com/pkgs/main" +
			" && conda tos accept --override-channels --channel https://repo.anaconda.com/pkgs/r) || true",
		"RUN conda config --remove-key channels || true",
		"RUN conda config --add channels defaults && conda config --append channels conda-forge" +
			" && conda config --set channel_priority flexible",
	}
}

func condaChannelsRule() Rule {
	return Rule{
		ID:     IDCondaChannels,
		Match:  "every upstream (conda) base image, both arches",
		Change: "Dockerfile.base: `" + CondaChannelLine + "` becomes: " + strings.Join(CondaChannelLines(), " / "),
		Reason: "newer Miniconda installers default to conda-forge only with strict channel priority and ask to accept the " +
			"Anaconda Terms of Service interactively; env images built from defaults-channel environment.yml files then fail",
		Evidence: "conda-anaconda-tos plugin (conda >= 25.5, Miniconda 25.5.1+): CondaToSNonInteractiveError unless " +
			"CONDA_PLUGINS_AUTO_ACCEPT_TOS=yes or `conda tos accept`; Miniforge-style defaults in new installers; the bundled " +
			"Verified environment.yml files all list channels defaults + conda-forge (500/500)",
		apply: func(rec *spec.Recipe) bool {
			if rec.Profile != nil {
				return false
			}
			// The line is a whole line of the template, never its first.
			old := "\n" + CondaChannelLine + "\n"
			if !strings.Contains(rec.BaseTemplate, old) {
				return false
			}
			rec.BaseTemplate = strings.ReplaceAll(rec.BaseTemplate, old, "\n"+strings.Join(CondaChannelLines(), "\n")+"\n")
			changed := true
			return changed
		},
	}
}

// arm64Package maps a linux-64 conda package name to its linux-aarch64
// name; drop=true for packages that do not exist there.
func arm64Package(name string) (to string, drop bool) {
	switch name {
	case "_libgcc_mutex":
		return "", true
	case "ld_impl_linux-64":
		return "ld_impl_linux-aarch64", false
	}
	return name, false
}

func arm64EnvRule() Rule {
	return Rule{
		ID:    IDArm64EnvYML,
		Match: "arch arm64, instances using a bundled (Verified) environment.yml",
		Change: "conda dependencies `name=version=build` become `name=version` (x86 build string dropped); " +
			"_libgcc_mutex removed; ld_impl_linux-64 becomes ld_impl_linux-aarch64 (same version); pip section unchanged",
		Reason: "the bundled environment.yml files were exported on linux-64: their build strings and linux-64-only " +
			"packages cannot resolve on linux-aarch64, so `conda env create` fails on arm64",
		Evidence: "500/500 bundled files list _libgcc_mutex=0.1=main, 498/500 ld_impl_linux-64=...=h..., every conda " +
			"dependency carries a linux-64 build string (e.g. python=3.9.20=he870216_1); repo.anaconda.com/pkgs/main/linux-aarch64 " +
			"has no _libgcc_mutex and ships ld_impl_linux-aarch64",
		apply: func(rec *spec.Recipe) bool {
			if rec.Platform != core.ARM64 || !rec.EnvYMLCached || rec.Profile != nil {
				return false
			}
			yml, changed := TranslateEnvYMLForArm64(rec.EnvYML)
			rec.EnvYML = yml
			return changed
		},
	}
}

// TranslateEnvYMLForArm64 rewrites the conda dependency lines of an
// exported linux-64 environment.yml ("  - name=version=build") as described
// by the arm64-env-yml rule. Other lines are kept byte for byte.
func TranslateEnvYMLForArm64(yml string) (string, bool) {
	var b strings.Builder
	b.Grow(len(yml))
	changed := false
	for rest := yml; ; {
		line, more, found := strings.Cut(rest, "\n")
		nl, keep := translateLine(line)
		if nl != line || !keep {
			changed = true
		}
		if keep {
			b.WriteString(nl)
			if found {
				b.WriteByte('\n')
			}
		}
		if !found {
			break
		}
		rest = more
	}
	if !changed {
		return yml, false
	}
	out := b.String()
	if !strings.HasSuffix(yml, "\n") {
		out = strings.TrimSuffix(out, "\n")
	}
	return out, true
}

// translateLine rewrites one "  - name=version=build" line; keep=false drops it.
func translateLine(l string) (string, bool) {
	rest, ok := strings.CutPrefix(l, "  - ")
	if !ok || strings.Contains(rest, "==") || strings.ContainsAny(rest, " :") {
		return l, true
	}
	name, tail, ok := strings.Cut(rest, "=")
	if !ok || name == "" {
		return l, true
	}
	version, _, _ := strings.Cut(tail, "=")
	to, drop := arm64Package(name)
	if drop {
		return "", false
	}
	if to == name && version == tail {
		return l, true
	}
	return "  - " + to + "=" + version, true
}

// replaceBlock replaces the whole lines old (joined by newlines) by new in
// tmpl; changed=false when tmpl does not hold them.
func replaceBlock(tmpl string, old, new []string) (string, bool) {
	o := "\n" + strings.Join(old, "\n") + "\n"
	if !strings.Contains(tmpl, o) {
		return tmpl, false
	}
	return strings.ReplaceAll(tmpl, o, "\n"+strings.Join(new, "\n")+"\n"), true
}

// editTemplates applies replaceBlock to the base and env templates of an
// arm64 upstream recipe (the env template may be the base one again).
func editTemplates(rec *spec.Recipe, old, new []string) bool {
	if rec.Platform != core.ARM64 || rec.Profile != nil {
		return false
	}
	var b, e bool
	rec.BaseTemplate, b = replaceBlock(rec.BaseTemplate, old, new)
	rec.EnvTemplate, e = replaceBlock(rec.EnvTemplate, old, new)
	return b || e
}

// ChromeAptLines returns the upstream Dockerfile line the arm64-chrome-apt
// rule replaces, and its replacement.
func ChromeAptLines() (old, new []string) {
	return []string{`    && echo "deb [arch=amd64] http://dl.google.com/linux/chrome/deb/ stable main" >> /etc/apt/sources.list.d/google-chrome.list \`},
		[]string{`    && echo "deb [arch=arm64] http://dl.google.com/linux/chrome/deb/ stable main" >> /etc/apt/sources.list.d/google-chrome.list \`}
}

func chromeAptRule() Rule {
	old, new := ChromeAptLines()
	return Rule{
		ID:    IDChromeApt,
		Match: "arch arm64, Dockerfiles holding upstream's Chrome apt source line (_DOCKERFILE_BASE_JS: the Dockerfile.base of every non-variant JavaScript spec, i.e. all 102 SWE-bench Multimodal instances)",
		Change: "Dockerfile.base: `" + strings.TrimSpace(old[0]) + "` becomes `" + strings.TrimSpace(new[0]) +
			"`; the same `apt-get install -y google-chrome-stable ...` then installs Google's arm64 build (CHROME_BIN /usr/bin/google-chrome unchanged)",
		Reason: "apt skips a source restricted to [arch=amd64] on arm64, so `apt-get install google-chrome-stable` fails there; " +
			"Google's apt repository has published google-chrome-stable for arm64 since Chrome 151 (2026-07), from the same URL. " +
			"The JS_2 base (43 Multilingual JS/TS instances) names the same repository without an arch restriction and needs no rule",
		Evidence: "https://github.com/SWE-bench/SWE-bench/issues/520 (Chrome apt path with [arch=amd64] is not valid on ARM64); " +
			"https://github.com/wimpysworld/deb-get/pull/1951 (dl.google.com/linux/chrome/deb dists/stable/main/binary-arm64/Packages lists " +
			"google-chrome-stable; Chromium blog 2026/03 bringing-chrome-to-arm64-linux-devices); " +
			"https://github.com/armbian/os/pull/485 (dists/stable/Release: Architectures: amd64 arm64; google-chrome-stable 151.0.7922.137-1 on both); " +
			"https://github.com/ulixee/chrome-versions/pull/18 (google-chrome-stable_151.0.7922.75-1_arm64.deb is an ARM aarch64 ELF; issues.chromium.org/issues/374811603)",
		apply: func(rec *spec.Recipe) bool { return editTemplates(rec, old, new) },
	}
}

// PnpmLines returns the upstream Dockerfile line the arm64-pnpm-binary rule
// replaces, and its replacement.
func PnpmLines() (old, new []string) {
	return []string{`    wget -qO $PNPM_HOME/pnpm "https://github.com/pnpm/pnpm/releases/download/v$PNPM_VERSION/pnpm-linux-x64" && \`},
		[]string{`    wget -qO $PNPM_HOME/pnpm "https://github.com/pnpm/pnpm/releases/download/v$PNPM_VERSION/pnpm-linux-arm64" && \`}
}

func pnpmArm64Rule() Rule {
	old, new := PnpmLines()
	return Rule{
		ID:     IDPnpmArm64,
		Match:  "arch arm64, Dockerfiles downloading pnpm-linux-x64 (_DOCKERFILE_ENV_JS: the Dockerfile.env of every non-variant JavaScript spec, all 102 SWE-bench Multimodal instances; pnpm 9.5.0, or 7.9.0 for some Chart.js versions)",
		Change: "Dockerfile.env: the pnpm download URL ends in pnpm-linux-arm64 instead of pnpm-linux-x64 (same release, same $PNPM_VERSION)",
		Reason: "pnpm-linux-x64 is an x86-64 executable: on arm64 `pnpm -v` (run by the same Dockerfile) fails, or runs under emulation where binfmt is set up; " +
			"pnpm publishes a standalone linux-arm64 executable in every release since 6.x",
		Evidence: "https://github.com/SWE-bench/SWE-bench/issues/520 (`pnpm-linux-x64` binary is selected even on ARM64); " +
			"https://github.com/pnpm/pnpm/pull/3830 (Add a linux arm64 build, merged 2021-10); " +
			"release asset https://github.com/pnpm/pnpm/releases/download/v9.5.0/pnpm-linux-arm64 (same name pattern as pnpm-linux-x64)",
		apply: func(rec *spec.Recipe) bool { return editTemplates(rec, old, new) },
	}
}

// MvndLines returns the upstream Dockerfile lines the arm64-maven-for-mvnd
// rule replaces, and their replacement: an mvnd command in $MVND_HOME/bin
// (still on PATH) that runs the image's own Maven.
func MvndLines() (old, new []string) {
	return []string{
			`RUN curl -fsSL -o mvnd.zip https://downloads.apache.org/maven/mvnd/1.0.2/maven-mvnd-1.0.2-linux-amd64.zip && \`,
			`    unzip mvnd.zip -d /tmp && \`,
			`    mv /tmp/maven-mvnd-1.0.2-linux-amd64 /usr/local/mvnd && \`,
			`    rm mvnd.zip && \`,
			`    rm -rf /tmp/maven-mvnd-1.0.2-linux-amd64`,
		}, []string{
			`RUN mkdir -p /usr/local/mvnd/bin && \`,
			`    printf '#!/bin/sh\nexec mvn "$@"\n' > /usr/local/mvnd/bin/mvnd && \`,
			`    chmod 755 /usr/local/mvnd/bin/mvnd`,
		}
}

func mavenForMvndRule() Rule {
	old, new := MvndLines()
	return Rule{
		ID:    IDMavenForMvnd,
		Match: "arch arm64, Dockerfiles downloading maven-mvnd-1.0.2-linux-amd64.zip (_DOCKERFILE_BASE_JAVA: Dockerfile.base and Dockerfile.env of every Java spec, all 43 Multilingual Java instances)",
		Change: "Dockerfile.base/.env: the five-line RUN that downloads and unpacks mvnd 1.0.2 for linux-amd64 becomes a RUN writing " +
			"/usr/local/mvnd/bin/mvnd as `#!/bin/sh` + `exec mvn \"$@\"`; ENV MVND_HOME and PATH stay, so the gson and druid test commands' " +
			"`mvnd test -B -T 1C -pl ... -Dtest=...` run the base image's Maven 3.9 (maven:3.9-eclipse-temurin-*, multi-arch) with the same arguments",
		Reason: "mvnd 1.0.2 publishes no linux-aarch64 build (only linux-amd64, darwin-amd64/aarch64, windows-amd64), so the downloaded " +
			"native client cannot run on arm64; mvnd is a Maven daemon for speed: the same flags give the same `[INFO] BUILD SUCCESS/FAILURE` " +
			"lines parse_log_maven reads. eval.sh is unchanged (the shell trace still shows `+ mvnd test ...`)",
		Evidence: "https://github.com/SWE-bench/SWE-bench/issues/520 (Java environment failures because mvnd Linux ARM64 binary is unavailable); " +
			"https://github.com/SWE-bench/SWE-bench/pull/521 (ARM64 uses an mvn fallback for mvnd); " +
			"https://github.com/apache/maven-mvnd/issues/921 (no linux arm64 release asset, open); " +
			"https://github.com/apache/maven-mvnd/pull/1016 (release binaries: linux amd64, macos amd64, macos aarch64, windows amd64)",
		apply: func(rec *spec.Recipe) bool { return editTemplates(rec, old, new) },
	}
}
