// Package render produces, per instance and arch, what upstream SWE-bench
// v4.1.0's TestSpec produces: Dockerfile.base, Dockerfile.env,
// Dockerfile.instance, setup_env.sh, setup_repo.sh, eval.sh and the three
// image keys. With no pin rules the bytes equal upstream's.
package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unsafe"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
)

// Pinner edits a recipe before rendering (implemented by package pins).
type Pinner interface {
	Apply(rec *spec.Recipe)
}

// Renderer renders instances. Tables is required; Pins and Fetcher are
// optional (nil: upstream exactly; no network).
type Renderer struct {
	Tables  *spec.Tables
	Pins    Pinner
	Fetcher Fetcher
}

// Result is everything rendered for one instance and arch.
type Result struct {
	InstanceID string
	Repo       string
	Version    string
	Arch       string // x86_64 | arm64
	// Platform is upstream's Dockerfile platform (linux/x86_64, linux/arm64/v8);
	// OCIPlatform the OCI name (linux/amd64, linux/arm64).
	Platform    string
	OCIPlatform string

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

	// EnvYMLCached: the env came from upstream's bundled environment.yml.
	EnvYMLCached bool
	// Pins are the ids of the pin rules that changed this result.
	Pins []string
	// X86Only: the platform decision gives this instance no arm64 image
	// (USE_X86); an arm64 render of it is still produced when asked for.
	X86Only bool
	// Profile is the data-defined profile name, "" for upstream.
	Profile string
	// contextFiles are extra build-context names per node kind.
	contextFiles map[string][]string
	envHash      string
}

// upstreamPlatform is TestSpec.platform.
func upstreamPlatform(arch string) string {
	if arch == spec.ArchARM64 {
		return "linux/arm64/v8"
	}
	return "linux/x86_64"
}

// Render renders one instance for one arch (x86_64 or arm64).
func (r *Renderer) Render(ctx context.Context, inst *dataset.Instance, arch string) (*Result, error) {
	rec, err := r.Tables.NewRecipe(inst.InstanceID, inst.Repo, inst.Version, arch)
	if err != nil {
		return nil, err
	}
	if r.Pins != nil {
		r.Pins.Apply(rec)
	}
	return r.renderRecipe(ctx, rec, inst, nil, nil)
}

// RenderRecipe renders an already prepared (and possibly pinned) recipe.
func (r *Renderer) RenderRecipe(ctx context.Context, rec *spec.Recipe, inst *dataset.Instance) (*Result, error) {
	return r.renderRecipe(ctx, rec, inst, nil, nil)
}

// RenderArches renders one instance for several arches. Scripts that do not
// depend on the arch (all of them unless a pin rule changed one arch's
// recipe) are built once and shared between the results.
func (r *Renderer) RenderArches(ctx context.Context, inst *dataset.Instance, arches []string) ([]*Result, error) {
	out := make([]*Result, 0, len(arches))
	var prevRec *spec.Recipe
	var prev *Result
	for _, arch := range arches {
		rec, err := r.Tables.NewRecipe(inst.InstanceID, inst.Repo, inst.Version, arch)
		if err != nil {
			return nil, err
		}
		if r.Pins != nil {
			r.Pins.Apply(rec)
		}
		res, err := r.renderRecipe(ctx, rec, inst, prevRec, prev)
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
	if a == nil || b == nil || a.Profile != b.Profile {
		return false, false
	}
	sa, sb := &a.Spec, &b.Spec
	same = sa.TestCmd == sb.TestCmd && sameStrings(sa.PreInstall, sb.PreInstall) &&
		sameStrings(sa.EvalCommands, sb.EvalCommands) && (sa.Install == sb.Install ||
		(sa.Install != nil && sb.Install != nil && *sa.Install == *sb.Install))
	sameEnv = same && a.EnvYMLCached == b.EnvYMLCached && a.EnvYML == b.EnvYML &&
		sa.Python == sb.Python && sa.Packages == sb.Packages && sa.NoUseEnv == sb.NoUseEnv &&
		sameStrings(sa.PipPackages, sb.PipPackages)
	return same, sameEnv
}

func (r *Renderer) renderRecipe(ctx context.Context, rec *spec.Recipe, inst *dataset.Instance, prevRec *spec.Recipe, prev *Result) (*Result, error) {
	if rec.Spec.TestCmd == "" {
		return nil, fmt.Errorf("spec %s %s has no test_cmd", rec.Repo, rec.Version)
	}
	if len(rec.Spec.DockerSpecs) != 0 {
		return nil, fmt.Errorf("spec %s %s: docker_specs are not supported for Python specs", rec.Repo, rec.Version)
	}
	arch := rec.Arch
	lang := "py"
	if rec.Profile != nil {
		lang = rec.Profile.Language
	}
	res := &Result{
		InstanceID:   inst.InstanceID,
		Repo:         inst.Repo,
		Version:      inst.Version,
		Arch:         arch,
		Platform:     upstreamPlatform(arch),
		OCIPlatform:  spec.PlatformOf(arch),
		EnvYMLCached: rec.EnvYMLCached,
		Pins:         rec.Pins,
		X86Only:      r.Tables.X86Only(inst.InstanceID),
	}
	if rec.Profile != nil {
		res.Profile = rec.Profile.Name
		res.contextFiles = rec.Profile.Context
	}
	var err error
	same, sameEnv := sameScripts(prevRec, rec)
	envHash := ""
	if same {
		res.RepoScriptList, res.SetupRepo = prev.RepoScriptList, prev.SetupRepo
		res.EvalScriptList, res.Eval = prev.EvalScriptList, prev.Eval
	} else {
		res.RepoScriptList = r.repoScriptList(rec, inst)
		if res.EvalScriptList, err = r.evalScriptList(rec, inst); err != nil {
			return nil, fmt.Errorf("eval script: %w", err)
		}
		res.SetupRepo = joinScript("set -euxo pipefail", res.RepoScriptList)
		res.Eval = joinScript("set -uxo pipefail", res.EvalScriptList)
	}
	if sameEnv {
		res.EnvScriptList, res.SetupEnv = prev.EnvScriptList, prev.SetupEnv
		envHash = prev.envHash
	} else {
		if res.EnvScriptList, err = r.envScriptList(ctx, rec, inst); err != nil {
			return nil, fmt.Errorf("env script: %w", err)
		}
		res.SetupEnv = joinScript("set -euxo pipefail", res.EnvScriptList)
		envHash = EnvHash(res.EnvScriptList)
	}
	res.envHash = envHash

	res.BaseKey = "sweb.base." + lang + "." + arch + ":latest"
	res.EnvKey = "sweb.env." + lang + "." + arch + "." + envHash + ":latest"
	res.InstanceKey = "sweb.eval." + arch + "." + strings.ToLower(inst.InstanceID) + ":latest"

	condaArch := arch
	if arch == spec.ArchARM64 {
		condaArch = "aarch64"
	}
	if res.BaseDockerfile, err = pyFormat(rec.BaseTemplate, func(name string) (string, bool) {
		switch name {
		case "platform":
			return res.Platform, true
		case "conda_arch":
			return condaArch, true
		case "arch":
			return arch, true
		}
		v, ok := rec.DockerDefaults[name]
		return v, ok
	}); err != nil {
		return nil, fmt.Errorf("Dockerfile.base: %w", err)
	}
	if res.EnvDockerfile, err = pyFormat(rec.EnvTemplate, func(name string) (string, bool) {
		switch name {
		case "platform":
			return res.Platform, true
		case "arch":
			return arch, true
		case "base_image_key":
			return res.BaseKey, true
		}
		v, ok := rec.DockerDefaults[name]
		return v, ok
	}); err != nil {
		return nil, fmt.Errorf("Dockerfile.env: %w", err)
	}
	if res.InstanceDockerfile, err = pyFormat(rec.InstanceTemplate, func(name string) (string, bool) {
		switch name {
		case "platform":
			return res.Platform, true
		case "env_image_name":
			return res.EnvKey, true
		}
		return "", false
	}); err != nil {
		return nil, fmt.Errorf("Dockerfile.instance: %w", err)
	}
	return res, nil
}

// EnvHashInput is the exact string upstream hashes for the env key:
// str(env_script_list), Python's list repr.
func EnvHashInput(envScriptList []string) string { return PyListRepr(envScriptList) }

// EnvHash is sha256(str(env_script_list)).hexdigest()[:22].
func EnvHash(envScriptList []string) string {
	s := PyListRepr(envScriptList)
	// Hash the string's bytes in place rather than copying them into a
	// []byte first (the repr holds the whole environment.yml: kilobytes).
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	return hex.EncodeToString(sum[:11])
}

// RemoteInstanceKey is the instance key under a registry namespace, with
// "__" written "_1776_" as upstream does.
func RemoteInstanceKey(namespace, instanceKey string) string {
	return strings.ReplaceAll(namespace+"/"+instanceKey, "__", "_1776_")
}
