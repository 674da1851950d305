package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/manifests"
)

// ImageFunc returns the image reference of an instance on a platform.
type ImageFunc func(instanceID, platform string) (string, error)

// ImagesFromRepo names images as published under repo: the per-arch
// repository manifests.Namer.ArchRepo at tag "latest".
func ImagesFromRepo(repo string) ImageFunc {
	n := manifests.Namer{Repo: repo}
	return func(id, platform string) (string, error) {
		p, err := core.ParsePlatform(platform)
		if err != nil {
			return "", fmt.Errorf("platform %q has no upstream arch name", platform)
		}
		return n.ArchRepo(p.Arch(), id) + ":" + manifests.LatestTag, nil
	}
}

// ImagesFromRecords looks images up in build records (a metadata file):
// built instance images with a pushed Ref.
func ImagesFromRecords(recs []core.Image, file string) ImageFunc {
	byKey := map[string]core.Image{}
	for _, im := range recs {
		if im.Kind == core.KindInstance {
			byKey[im.InstanceID+"@"+im.Platform.String()] = im
		}
	}
	return func(id, platform string) (string, error) {
		im, ok := byKey[id+"@"+platform]
		switch {
		case !ok:
			return "", fmt.Errorf("%s: no instance image of %s for %s", file, id, platform)
		case im.Status == core.StatusFailed:
			return "", fmt.Errorf("%s: the %s image of %s failed to build: %s", file, platform, id, im.Error)
		case im.Ref == "":
			return "", fmt.Errorf("%s: the %s image of %s was not pushed (no ref); verify runs images from a registry", file, platform, id)
		}
		return im.Ref, nil
	}
}

// Targets renders eval.sh for every instance and each of its platforms
// (tables decide them; only those in want, when want is not empty) and
// names its image with images (nil: no image, for the builder hook). Bad
// instances are returned as errors, the others as targets.
func Targets(ctx context.Context, r *render.Renderer, insts []dataset.Instance, want []string, images ImageFunc) ([]Target, []error) {
	var out []Target
	var errs []error
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p] = true
	}
	for i := range insts {
		inst := insts[i]
		for _, cp := range r.Tables.Platforms(&inst) {
			p := cp.String()
			if len(wanted) > 0 && !wanted[p] {
				continue
			}
			res, err := r.Render(ctx, &inst, cp)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): rendering eval.sh: %w", inst.InstanceID, p, err))
				continue
			}
			t := Target{Instance: inst, Platform: p, EvalScript: res.Eval, Parser: r.Tables.LogParser(inst.Repo)}
			if images != nil {
				ref, err := images(inst.InstanceID, p)
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

// ReadPredictions reads an upstream predictions file: JSON Lines, or a JSON
// array (a .json file), of {instance_id, model_name_or_path, model_patch}.
// Errors name the file, line and field.
func ReadPredictions(path string) (map[string]Prediction, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading predictions: %w", err)
	}
	var raws []json.RawMessage
	var lineNos []int
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &raws); err != nil {
			return nil, fmt.Errorf("%s: parsing JSON array: %w", path, err)
		}
		for i := range raws {
			lineNos = append(lineNos, i+1)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<28)
		for n := 1; sc.Scan(); n++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			raws = append(raws, json.RawMessage(append([]byte(nil), sc.Bytes()...)))
			lineNos = append(lineNos, n)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	where := func(i int) string {
		if len(data) > 0 && bytes.TrimSpace(data)[0] == '[' {
			return fmt.Sprintf("%s: entry %d", path, lineNos[i])
		}
		return fmt.Sprintf("%s:%d", path, lineNos[i])
	}
	out := map[string]Prediction{}
	var problems []string
	for i, raw := range raws {
		var p Prediction
		if err := json.Unmarshal(raw, &p); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where(i), err))
			continue
		}
		switch {
		case p.InstanceID == "":
			problems = append(problems, fmt.Sprintf("%s: instance_id: missing or empty", where(i)))
		case p.Model == "":
			problems = append(problems, fmt.Sprintf("%s: model_name_or_path: missing or empty", where(i)))
		default:
			if _, dup := out[p.InstanceID]; dup {
				problems = append(problems, fmt.Sprintf("%s: instance_id: %s appears twice", where(i), p.InstanceID))
				continue
			}
			out[p.InstanceID] = p
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("%d bad prediction(s):\n%s", len(problems), strings.Join(problems, "\n"))
	}
	return out, nil
}
