// Package render produces, per instance and arch, what upstream SWE-bench
// v4.1.0's TestSpec produces: Dockerfile.base, Dockerfile.env,
// Dockerfile.instance, setup_env.sh, setup_repo.sh, eval.sh and the three
// image keys, for every language upstream supports (Python and C, Go, Java,
// JavaScript/TypeScript, PHP, Ruby, Rust). With no pin rules the bytes equal
// upstream's.
package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/pyrepr"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests/naming"
)

// Pinner edits a recipe before rendering (implemented by package pins).
type Pinner interface {
	Apply(rec *spec.Recipe)
}

// Renderer renders instances. Tables is required; Pins is optional (nil:
// upstream exactly). RepoFiles are the repository files the env scripts of the
// instances to render embed, resolved before (see Needs); an instance whose
// file is missing fails with ErrNeedsNetwork. A Renderer does no I/O.
type Renderer struct {
	Tables    *spec.Tables
	Pins      Pinner
	RepoFiles RepoFiles
}

// Result is everything rendered for one instance and platform.
type Result struct {
	InstanceID string
	Repo       string
	Version    string
	// Language is the repo's language (py, c, go, java, js, php, rb, rs).
	Language string
	Platform core.Platform

	BaseKey     string
	EnvKey      string
	InstanceKey string

	BaseDockerfile     string
	EnvDockerfile      string
	InstanceDockerfile string
	SetupEnv           string
	SetupRepo          string
	Eval               string

	EnvScriptList  []string
	RepoScriptList []string
	EvalScriptList []string

	// DockerSpecs are the spec's docker_specs (part of the base and env
	// keys when not empty).
	DockerSpecs spec.DockerSpecs
	// EnvFromBase: Dockerfile.env is the base template again (upstream has
	// no env template for the language or variant).
	EnvFromBase bool
	// EnvYMLCached: the env came from upstream's bundled environment.yml.
	EnvYMLCached bool
	// Pins are the ids of the pin rules that changed this result.
	Pins []string
	// X86Only: the platform decision gives this instance no arm64 image
	// (X86OnlyRule says why); an arm64 render of it is still produced when
	// asked for.
	X86Only     bool
	X86OnlyRule string
	// Profile is the data-defined profile name, "" for upstream.
	Profile string
	// contextFiles are extra build-context names per node kind.
	contextFiles map[string][]string
	envHash      string
}

// Arch is the upstream arch name of the result's platform (x86_64, arm64).
func (r *Result) Arch() string { return r.Platform.Arch() }

// recipe is the spec of inst on p with the pin rules applied.
func (r *Renderer) recipe(inst *core.Instance, p core.Platform) (*spec.Recipe, error) {
	rec, err := r.Tables.NewRecipe(inst.InstanceID, inst.Repo, inst.Version, p)
	if err != nil {
		return nil, err
	}
	if r.Pins != nil {
		r.Pins.Apply(rec)
	}
	return rec, nil
}

// Render renders one instance for one platform (ctx: a cancelled context
// stops it before it starts).
func (r *Renderer) Render(ctx context.Context, inst *core.Instance, p core.Platform) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := r.recipe(inst, p)
	if err != nil {
		return nil, err
	}
	return r.renderRecipe(rec, inst, nil, nil)
}

// RenderRecipe renders an already prepared (and possibly pinned) recipe.
func (r *Renderer) RenderRecipe(ctx context.Context, rec *spec.Recipe, inst *core.Instance) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.renderRecipe(rec, inst, nil, nil)
}

// RenderArches renders one instance for several platforms. Scripts that do
// not depend on the platform (all of them unless a pin rule changed one
// platform's recipe) are built once and shared between the results.
func (r *Renderer) RenderArches(ctx context.Context, inst *core.Instance, platforms []core.Platform) ([]*Result, error) {
	out := make([]*Result, 0, len(platforms))
	var prevRec *spec.Recipe
	var prev *Result
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, p := range platforms {
		rec, err := r.recipe(inst, p)
		if err != nil {
			return nil, err
		}
		res, err := r.renderRecipe(rec, inst, prevRec, prev)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
		prevRec, prev = rec, res
	}
	return out, nil
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameScripts reports whether two recipes give the same repo and eval
// scripts (sameEnv: and the same env script).
func sameScripts(a, b *spec.Recipe) (same, sameEnv bool) {
	if a == nil || b == nil || a.Profile != b.Profile || a.Language != b.Language {
		return false, false
	}
	sa, sb := &a.Spec, &b.Spec
	same = sa.TestCmd == sb.TestCmd && sameStrings(sa.PreInstall, sb.PreInstall) &&
		sameStrings(sa.EvalCommands, sb.EvalCommands) && (sa.Install == sb.Install ||
		(sa.Install != nil && sb.Install != nil && *sa.Install == *sb.Install)) &&
		sameStrings(sa.InstallCmds, sb.InstallCmds) && sameStrings(sa.Build, sb.Build) &&
		sameStrings(sa.TestCmds, sb.TestCmds)
	sameEnv = same && a.EnvYMLCached == b.EnvYMLCached && a.EnvYML == b.EnvYML && a.CondaExplicit == b.CondaExplicit &&
		sa.Python == sb.Python && sa.Packages == sb.Packages && sa.NoUseEnv == sb.NoUseEnv &&
		sameStrings(sa.PipPackages, sb.PipPackages) && sameStrings(sa.AptPkgs, sb.AptPkgs) &&
		sa.DockerSpecs.Repr() == sb.DockerSpecs.Repr()
	return same, sameEnv
}

func (r *Renderer) renderRecipe(rec *spec.Recipe, inst *core.Instance, prevRec *spec.Recipe, prev *Result) (*Result, error) {
	common := rec.Language != spec.LangPython && rec.Profile == nil
	if common && len(rec.Spec.TestCmds) == 0 || !common && rec.Spec.TestCmd == "" {
		return nil, fmt.Errorf("spec %s %s has no test_cmd", rec.Repo, rec.Version)
	}
	x86Rule := r.Tables.X86OnlyRule(inst)
	res := &Result{
		InstanceID:   inst.InstanceID,
		Repo:         inst.Repo,
		Version:      inst.Version,
		Language:     rec.Language,
		Platform:     rec.Platform,
		DockerSpecs:  rec.Spec.DockerSpecs,
		EnvFromBase:  rec.EnvFromBase,
		EnvYMLCached: rec.EnvYMLCached,
		Pins:         rec.Pins,
		X86Only:      x86Rule != "",
		X86OnlyRule:  x86Rule,
	}
	if rec.Profile != nil {
		res.Profile = rec.Profile.Name
		res.contextFiles = rec.Profile.Context
	}
	// A recipe with the same scripts as the previous instance's reuses them.
	same, sameEnv := sameScripts(prevRec, rec)
	if same {
		res.RepoScriptList, res.SetupRepo = prev.RepoScriptList, prev.SetupRepo
		res.EvalScriptList, res.Eval = prev.EvalScriptList, prev.Eval
	} else if err := r.repoAndEvalScripts(res, rec, inst, common); err != nil {
		return nil, err
	}
	if sameEnv {
		res.EnvScriptList, res.SetupEnv = prev.EnvScriptList, prev.SetupEnv
		res.envHash = prev.envHash
	} else if err := r.envScript(res, rec, inst, common); err != nil {
		return nil, err
	}

	lang, arch := rec.Language, rec.Platform.Arch()
	res.BaseKey = BaseKey(lang, arch, rec.Spec.DockerSpecs)
	res.EnvKey = "sweb.env." + lang + "." + arch + "." + res.envHash + ":latest"
	res.InstanceKey = "sweb.eval." + arch + "." + strings.ToLower(inst.InstanceID) + ":latest"
	if err := res.dockerfiles(rec); err != nil {
		return nil, err
	}
	return res, nil
}

// repoAndEvalScripts sets res's repo and eval scripts for rec: the common
// languages' (common) or Python's.
func (r *Renderer) repoAndEvalScripts(res *Result, rec *spec.Recipe, inst *core.Instance, common bool) error {
	var err error
	if common {
		res.RepoScriptList = repoScriptListCommon(rec, inst)
		res.EvalScriptList, err = r.evalScriptListCommon(rec, inst)
	} else {
		res.RepoScriptList = r.repoScriptList(rec, inst)
		res.EvalScriptList, err = r.evalScriptList(rec, inst)
	}
	if err != nil {
		return fmt.Errorf("eval script: %w", err)
	}
	res.SetupRepo = joinScript("set -euxo pipefail", res.RepoScriptList)
	res.Eval = joinScript("set -uxo pipefail", res.EvalScriptList)
	return nil
}

// envScript sets res's env script for rec, and the env hash it gives.
func (r *Renderer) envScript(res *Result, rec *spec.Recipe, inst *core.Instance, common bool) error {
	if common {
		res.EnvScriptList = envScriptListCommon(rec)
	} else {
		var err error
		if res.EnvScriptList, err = r.envScriptList(rec, inst); err != nil {
			return fmt.Errorf("env script: %w", err)
		}
	}
	res.SetupEnv = joinScript("set -euxo pipefail", res.EnvScriptList)
	res.envHash = EnvHash(res.EnvScriptList, rec.Spec.DockerSpecs)
	return nil
}

// dockerfiles fills the recipe's base, env and instance templates: the
// platform, architectures and image keys, then the docker specs
// ({**DEFAULT_DOCKER_SPECS, **docker_specs}: the spec's entries first).
func (res *Result) dockerfiles(rec *spec.Recipe) error {
	platform, arch := rec.Platform.Dockerfile(), rec.Platform.Arch()
	condaArch := arch
	if rec.Platform == core.ARM64 {
		condaArch = "aarch64"
	}
	dockerVar := func(name string) (string, bool) {
		if v, ok := rec.Spec.DockerSpecs.Lookup(name); ok {
			return v, true
		}
		v, ok := rec.DockerDefaults[name]
		return v, ok
	}
	var err error
	if res.BaseDockerfile, err = pyFormat(rec.BaseTemplate, templateVars(map[string]string{
		"platform": platform, "conda_arch": condaArch, "arch": arch,
	}, dockerVar)); err != nil {
		return fmt.Errorf("Dockerfile.base: %w", err)
	}
	if res.EnvDockerfile, err = pyFormat(rec.EnvTemplate, templateVars(map[string]string{
		"platform": platform, "arch": arch, "base_image_key": res.BaseKey,
	}, dockerVar)); err != nil {
		return fmt.Errorf("Dockerfile.env: %w", err)
	}
	if res.InstanceDockerfile, err = pyFormat(rec.InstanceTemplate, templateVars(map[string]string{
		"platform": platform, "env_image_name": res.EnvKey,
	}, nil)); err != nil {
		return fmt.Errorf("Dockerfile.instance: %w", err)
	}
	return nil
}

// templateVars looks a template's names up in vars, then in rest (nil:
// nowhere else).
func templateVars(vars map[string]string, rest func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		if rest == nil {
			return "", false
		}
		return rest(name)
	}
}

// BaseKey is TestSpec.base_image_key: sweb.base.<lang>.<arch>:latest, with
// .<sha256(str(docker_specs))[:10]> before the tag when docker_specs is
// not empty.
func BaseKey(lang, arch string, ds spec.DockerSpecs) string {
	if ds.Len() == 0 {
		return "sweb.base." + lang + "." + arch + ":latest"
	}
	sum := sha256.Sum256([]byte(ds.Repr()))
	return "sweb.base." + lang + "." + arch + "." + hex.EncodeToString(sum[:5]) + ":latest"
}

// EnvHashInput is the exact string upstream hashes for the env key:
// str(env_script_list), Python's list repr, followed by str(docker_specs)
// when docker_specs is not empty.
func EnvHashInput(envScriptList []string, ds spec.DockerSpecs) string {
	s := pyrepr.ListRepr(envScriptList)
	if ds.Len() > 0 {
		s += ds.Repr()
	}
	return s
}

// EnvHash is sha256(EnvHashInput).hexdigest()[:22].
func EnvHash(envScriptList []string, ds spec.DockerSpecs) string {
	s := EnvHashInput(envScriptList, ds)
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:11])
}

// RemoteInstanceKey is the instance key under a registry namespace, with
// "__" written "_1776_" as upstream does.
func RemoteInstanceKey(namespace, instanceKey string) string {
	return naming.NoDoubleUnderscore(namespace + "/" + instanceKey)
}
