package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/manifests"
)

// ImageFunc returns the image reference of an instance on a platform.
type ImageFunc func(instanceID string, platform core.Platform) (string, error)

// ErrImageAbsent is wrapped by an ImageFunc's error when the place it looks
// has no image of the instance for the platform (no record, none built, none
// exported, no layout entry), and by verify's registry lookups when the
// registry has none: the target's result is FailureImageAbsent.
var ErrImageAbsent = errors.New("image absent")

// imageKey is an instance on a platform, the key of the image lookups.
type imageKey struct {
	id       string
	platform core.Platform
}

// ImagesFromRepo names images as published under repo: the per-arch
// repository manifests.Namer.ArchRepo at tag "latest".
func ImagesFromRepo(repo string) ImageFunc {
	n := manifests.Namer{Repo: repo}
	return func(id string, platform core.Platform) (string, error) {
		if platform.IsZero() {
			return "", fmt.Errorf("%s: no platform", id)
		}
		return n.ArchRepo(platform.Arch(), id) + ":" + manifests.LatestTag, nil
	}
}

// ImagesFromRecords looks images up in build records (a metadata file):
// built instance images with a pushed Ref, else in their OCI layout
// (LayoutRef).
func ImagesFromRecords(recs []core.Image, file string) ImageFunc {
	byKey := map[imageKey]core.Image{}
	for _, im := range recs {
		if im.Kind == core.KindInstance {
			byKey[imageKey{im.InstanceID, im.Platform}] = im
		}
	}
	return func(id string, platform core.Platform) (string, error) {
		im, ok := byKey[imageKey{id, platform}]
		switch {
		case !ok:
			return "", fmt.Errorf("%w: %s: no instance image of %s for %s", ErrImageAbsent, file, id, platform)
		case im.Status == core.StatusFailed:
			return "", fmt.Errorf("%w: %s: the %s image of %s failed to build: %s", ErrImageAbsent, file, platform, id, im.Error)
		case im.Ref == "" && im.OCILayout != "" && im.Digest != "":
			return LayoutRef(im.OCILayout, im.Digest.String()), nil
		case im.Ref == "":
			return "", fmt.Errorf("%w: %s: the %s image of %s was not exported (no ref, no OCI layout): build it with --push REPO or --output type=oci,dest=DIR", ErrImageAbsent, file, platform, id)
		}
		return im.Ref, nil
	}
}

// TargetOptions choose the targets Targets makes.
type TargetOptions struct {
	// Platforms, when not empty, keeps only these of each instance's
	// platforms (the tables decide them).
	Platforms []core.Platform
	// Images names each target's image; nil: no image (the builder hook).
	Images ImageFunc
	// Script is ScriptDataset ("" too: the record's eval_script as upstream
	// v5 runs it, graded by the record's log_parser under v5's rules; the
	// generated eval.sh for a record without one, said in ScriptInfo) or
	// ScriptGenerated (the v4.1.0 eval.sh swebuild renders, graded by the
	// profile's parser or upstream's map under v4.1.0's rules).
	Script string
}

// Targets makes a target for every instance and each of its platforms: the
// eval script chosen by o.Script (rendering eval.sh where needed), the
// parser and rules to grade with, and the image o.Images names. Bad
// instances are returned as errors, the others as targets.
func Targets(ctx context.Context, r *render.Renderer, insts []core.Instance, o TargetOptions) ([]Target, []error) {
	var out []Target
	var errs []error
	switch o.Script {
	case "", ScriptDataset, ScriptGenerated:
	default:
		return nil, []error{fmt.Errorf("eval script source %q: want %s or %s", o.Script, ScriptDataset, ScriptGenerated)}
	}
	wanted := map[core.Platform]bool{}
	for _, p := range o.Platforms {
		wanted[p] = true
	}
	for i := range insts {
		inst := insts[i]
		for _, p := range r.Tables.Platforms(&inst) {
			if len(wanted) > 0 && !wanted[p] {
				continue
			}
			t := Target{Instance: inst, Platform: p}
			if err := t.chooseScript(ctx, r, o.Script); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
				continue
			}
			if o.Images != nil {
				ref, err := o.Images(inst.InstanceID, p)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
					continue
				}
				t.Image = ref
			}
			out = append(out, t)
		}
	}
	return out, errs
}

// NewTarget is the target of inst on platform p whose platforms were
// decided elsewhere (a task repo's plan): the eval script chosen by source
// as Targets chooses it, the parser and rules to grade with; no image.
func NewTarget(ctx context.Context, r *render.Renderer, inst core.Instance, p core.Platform, source string) (Target, error) {
	t := Target{Instance: inst, Platform: p}
	if err := t.chooseScript(ctx, r, source); err != nil {
		return Target{}, err
	}
	return t, nil
}

// chooseScript sets the target's eval script, parser and rules.
func (t *Target) chooseScript(ctx context.Context, r *render.Renderer, source string) error {
	inst := &t.Instance
	if source != ScriptGenerated && inst.EvalScript != "" {
		if inst.LogParser == "" {
			return fmt.Errorf("%s: the record has an eval_script but no log_parser to grade its output with", inst.Source)
		}
		// v5 grading resolves the name in its PARSER_REGISTRY (aliases such
		// as parse_log_sphinx included); a name it has not is the record's
		// fault, said before anything runs.
		if _, err := grading.EvalLog(*inst, "", grading.GradeOptions{Rules: grading.RulesV5}); errors.Is(err, grading.ErrUnknownParser) || errors.Is(err, grading.ErrParserNotImplemented) {
			return fmt.Errorf("%s: field \"log_parser\": %w", inst.Source, err)
		}
		t.EvalScript, t.RecordsExit = EvalScriptV5(inst.EvalScript)
		t.Script = scriptInfo(ScriptDataset, inst.EvalScript, "")
		t.Parser = inst.LogParser
		t.Rules = grading.RulesV5
		return nil
	}
	res, err := r.Render(ctx, inst, t.Platform)
	if err != nil {
		return fmt.Errorf("rendering eval.sh: %w", err)
	}
	fallback := ""
	if source != ScriptGenerated {
		fallback = "the record has no eval_script"
	}
	t.EvalScript = res.Eval
	t.Script = scriptInfo(ScriptGenerated, res.Eval, fallback)
	t.Parser = r.Tables.LogParser(inst.Repo)
	t.Rules = grading.RulesV41
	return nil
}

// ImagesFromDataset names each instance's image as its record's image field
// says (upstream v5's TestSpec.image, e.g.
// "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest": namespace,
// "_1776_" for "__", tag), re-rooted at registry when it is not empty
// ("127.0.0.1:5000/mirror" gives
// "127.0.0.1:5000/mirror/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest").
// On linux/arm64 a repository named sweb.eval.x86_64.<id> becomes
// sweb.eval.arm64.<id> (upstream's arm64 name of the same instance image);
// any other name is used for both platforms. A record without an image is
// an error naming it.
func ImagesFromDataset(insts []core.Instance, registry string) ImageFunc {
	byID := map[string]*core.Instance{}
	for i := range insts {
		byID[insts[i].InstanceID] = &insts[i]
	}
	return func(id string, platform core.Platform) (string, error) {
		in, ok := byID[id]
		switch {
		case !ok:
			return "", fmt.Errorf("no dataset record of %s", id)
		case in.Image == "":
			return "", fmt.Errorf("%s: the record has no image field", in.Source)
		}
		ref, err := DatasetImage(in.Image, registry, platform)
		if err != nil {
			return "", fmt.Errorf("%s: field \"image\": %w", in.Source, err)
		}
		return ref, nil
	}
}

// DatasetImage is the reference ImagesFromDataset pulls for a record's
// image on platform p, re-rooted at registry when it is not empty.
func DatasetImage(image, registry string, p core.Platform) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", image, err)
	}
	path := reference.Path(named)
	if p == core.ARM64 {
		dir, base := "", path
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			dir, base = path[:i+1], path[i+1:]
		}
		if rest, ok := strings.CutPrefix(base, "sweb.eval.x86_64."); ok {
			path = dir + "sweb.eval.arm64." + rest
		}
	}
	domain := reference.Domain(named)
	if registry != "" {
		domain = strings.TrimSuffix(registry, "/")
	}
	ref := domain + "/" + path
	if t, ok := named.(reference.Tagged); ok {
		ref += ":" + t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		ref += "@" + d.Digest().String()
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return "", fmt.Errorf("%q re-rooted at %q is %q, not an image reference: %w", image, registry, ref, err)
	}
	return ref, nil
}
