package spec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// Reasons an instance is x86-only besides the X86Rules.
const (
	// RuleUseX86 is upstream's USE_X86 list (dead code in v4.1.0, honoured).
	RuleUseX86 = "USE_X86"
	// RuleOverride is OverridePlatforms (a --specs file's x86_only list).
	RuleOverride = "override"
)

// X86Rule is a written rule that makes instances x86-only because a file
// they build fetches something that exists for x86-64 only and no arm64
// route is known. Where an arm64 route exists it is a pin rule instead
// (package pins), and the instance keeps its arm64 image.
type X86Rule struct {
	ID       string `json:"id"`
	Match    string `json:"match"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`

	applies func(lang string, s *Spec) bool
}

// Rule ids.
const (
	RuleNodeWithoutArm64   = "node-without-arm64-build"
	RulePuppeteerChromium  = "puppeteer-bundled-chromium"
	puppeteerInstallScript = "node_modules/puppeteer/install.js"
)

// X86Rules returns the rules in evaluation order.
func X86Rules() []X86Rule {
	return []X86Rule{
		{
			ID:    RuleNodeWithoutArm64,
			Match: "JavaScript specs whose docker_specs node_version is below 4 (Node 0.x; in v4.1.0: Automattic/wp-calypso 0.8)",
			Reason: "the JS env image runs `nvm install $NODE_VERSION`; nodejs.org publishes linux-arm64 Node binaries from v4.0.0 on, " +
				"so for 0.x nvm finds no arm64 build and falls back to compiling that Node from source, which has no arm64 support",
			Evidence: "https://nodejs.org/en/blog/release/v0.8.28 (binaries: Linux 32/64-bit x86, SunOS, macOS, Windows; no ARM); " +
				"https://nodejs.org/en/blog/release/v4.2.3 (ARMv8 64-bit Binary: https://nodejs.org/dist/v4.2.3/node-v4.2.3-linux-arm64.tar.gz), " +
				"https://nodejs.org/en/blog/release/v5.10.1 (node-v5.10.1-linux-arm64.tar.xz)",
			applies: func(lang string, s *Spec) bool {
				if lang != LangJS {
					return false
				}
				v, ok := s.DockerSpecs.Lookup("node_version")
				if !ok {
					return false
				}
				major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
				return err == nil && major < 4
			},
		},
		{
			ID: RulePuppeteerChromium,
			Match: "specs whose pre_install, install or build runs `" + puppeteerInstallScript +
				"` (puppeteer's own Chromium download; in v4.1.0: processing/p5.js 0.7, 0.8, 0.10, 1.0, 1.3-1.6)",
			Reason: "the command downloads puppeteer's bundled Chromium, which puppeteer builds for x86-64 Linux only: older puppeteer " +
				"installs the x86-64 binary (Exec format error on arm64), puppeteer > 3.3 aborts the install with \"The chromium binary is " +
				"not available for arm64\"; the spec asks for that browser explicitly (PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=''), so no " +
				"Dockerfile change gives it an arm64 build",
			Evidence: "https://github.com/puppeteer/puppeteer/issues/7740 (open: The chromium binary is not available for arm64); " +
				"https://github.com/puppeteer/puppeteer/issues/2124 (npm package installs an x86-64 chrome on Linux ARM); " +
				"https://github.com/puppeteer/puppeteer/issues/8915 (BrowserFetcher's linux/arm64 branch, puppeteer > 3.3.0)",
			applies: func(_ string, s *Spec) bool {
				for _, list := range [][]string{s.PreInstall, s.InstallCmds, s.Build} {
					for _, c := range list {
						if strings.Contains(c, puppeteerInstallScript) {
							return true
						}
					}
				}
				return false
			},
		},
	}
}

// platformPolicy holds the id-keyed parts of the decision; the X86Rules
// are evaluated per repo when its specs are decoded (Tables.repo).
type platformPolicy struct {
	x86Only   map[string]bool
	overrides map[string][]core.Platform
	lifted    map[string]bool // X86Rules ids not applied (LiftX86Rules)
}

// LiftX86Rules stops the X86Rules with these ids from making instances
// x86-only (--pins default,-ID: to try their arm64 images). USE_X86 and
// overrides are not rules and cannot be lifted. An unknown id is an error.
func (t *Tables) LiftX86Rules(ids ...string) error {
	known := map[string]bool{}
	for _, r := range X86Rules() {
		known[r.ID] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if !known[id] {
			return fmt.Errorf("unknown x86-only rule %q", id)
		}
		if t.platforms.lifted == nil {
			t.platforms.lifted = map[string]bool{}
		}
		t.platforms.lifted[id] = true
	}
	for name, r := range t.repos { // decoded before: decide again
		if r.err == nil {
			r.rules, r.anyRule = evalRules(t.RepoToExt[name], r.versions, t.platforms.lifted)
		}
	}
	return nil
}

func newPlatformPolicy(t *Tables) platformPolicy {
	p := platformPolicy{x86Only: make(map[string]bool, len(t.UseX86)), overrides: map[string][]core.Platform{}}
	for _, id := range t.UseX86 {
		p.x86Only[id] = true
	}
	return p
}

// evalRules returns, per version, the first X86Rule the spec meets, and the
// first rule any version meets (versions in sorted order).
func evalRules(lang string, versions map[string]Spec, lifted map[string]bool) (byVersion map[string]string, first string) {
	rules := X86Rules()
	for _, v := range sortedKeys(versions) {
		s := versions[v]
		for i := range rules {
			if !lifted[rules[i].ID] && rules[i].applies(lang, &s) {
				if byVersion == nil {
					byVersion = map[string]string{}
				}
				byVersion[v] = rules[i].ID
				if first == "" {
					first = rules[i].ID
				}
				break
			}
		}
	}
	return byVersion, first
}

// Decision is which platforms an instance is built for and, when it gets
// no arm64 image, why.
type Decision struct {
	Platforms []core.Platform
	// Rule is RuleOverride, RuleUseX86 or an X86Rule id for an x86-only
	// instance; "" when it gets linux/arm64 too.
	Rule string
}

var (
	bothPlatforms = []core.Platform{core.AMD64, core.ARM64}
	x86Platforms  = []core.Platform{core.AMD64}
)

// Decide is the one place an instance's platforms are decided, amd64
// first: an override (OverridePlatforms) wins; else USE_X86; else the first
// X86Rule matching the instance's spec; else linux/amd64 and linux/arm64.
// With no version (an id-only caller) a rule matching any version of the
// repo makes the instance x86-only: never plan an arm64 image that cannot
// be built.
func (t *Tables) Decide(inst *core.Instance) Decision {
	if o, ok := t.platforms.overrides[inst.InstanceID]; ok {
		return Decision{Platforms: append([]core.Platform(nil), o...), Rule: t.X86OnlyRule(inst)}
	}
	if rule := t.X86OnlyRule(inst); rule != "" {
		return Decision{Platforms: append([]core.Platform(nil), x86Platforms...), Rule: rule}
	}
	return Decision{Platforms: append([]core.Platform(nil), bothPlatforms...)}
}

// X86OnlyRule is Decide(inst).Rule: what makes inst x86-only, "" when it
// gets linux/arm64 too.
func (t *Tables) X86OnlyRule(inst *core.Instance) string {
	if o, ok := t.platforms.overrides[inst.InstanceID]; ok {
		for _, p := range o {
			if p == core.ARM64 {
				return ""
			}
		}
		return RuleOverride
	}
	if t.platforms.x86Only[inst.InstanceID] {
		return RuleUseX86
	}
	return t.x86Rule(inst)
}

func (t *Tables) x86Rule(inst *core.Instance) string {
	if t.Profiles[inst.Repo] != nil {
		return ""
	}
	r, ok := t.repo(inst.Repo)
	if !ok || r.err != nil {
		return ""
	}
	if inst.Version == "" {
		return r.anyRule
	}
	return r.rules[inst.Version]
}

// Platforms returns the platforms inst is built for, amd64 first (Decide).
func (t *Tables) Platforms(inst *core.Instance) []core.Platform {
	return t.Decide(inst).Platforms
}

// X86Only reports whether inst gets no arm64 image.
func (t *Tables) X86Only(inst *core.Instance) bool { return t.X86OnlyRule(inst) != "" }

// PlatformsByID returns Platforms as a function of the instance id, for
// callers keyed by id (ci, sizes): ids of insts are decided from their
// records; any other id from the id alone (its repo from the id, version
// unknown, see Decide).
func (t *Tables) PlatformsByID(insts []core.Instance) func(id string) []core.Platform {
	byID := make(map[string]*core.Instance, len(insts))
	for i := range insts {
		byID[insts[i].InstanceID] = &insts[i]
	}
	return func(id string) []core.Platform {
		if inst := byID[id]; inst != nil {
			return t.Platforms(inst)
		}
		return t.Platforms(&core.Instance{InstanceID: id, Repo: RepoFromID(id)})
	}
}

// RepoFromID derives "owner/name" from a SWE-bench instance id
// ("django__django-11099" -> "django/django"); "" when the id does not
// follow the pattern.
func RepoFromID(id string) string {
	owner, rest, ok := strings.Cut(id, "__")
	i := strings.LastIndexByte(rest, '-')
	if !ok || owner == "" || i <= 0 {
		return ""
	}
	return owner + "/" + rest[:i]
}

// OverridePlatforms fixes the platforms of one instance (tests, fixtures),
// taking precedence over USE_X86 and the rules.
func (t *Tables) OverridePlatforms(instanceID string, platforms []core.Platform) {
	if t.platforms.overrides == nil {
		t.platforms.overrides = map[string][]core.Platform{}
	}
	ps := append([]core.Platform(nil), platforms...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i] == core.AMD64 && ps[j] != core.AMD64 })
	t.platforms.overrides[instanceID] = ps
}
