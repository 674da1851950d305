package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/sizes"
)

// SizesInstances gives cfg the input's instances, sorted by id, and their
// platform decisions (ids and decisions only: nothing is rendered). Bad
// records are said on in.Log ("swebuild sizes: ...") and the rest
// measured; the error is set only when nothing could be loaded.
func SizesInstances(ctx context.Context, in Inputs, cfg *sizes.Config) error {
	in.NotRendered = true
	loaded, err := Load(ctx, in)
	if loaded == nil {
		return err
	}
	if err != nil {
		fmt.Fprintf(writerOr(in.Log), "swebuild sizes: %v\n", err)
	}
	for _, in := range loaded.Instances {
		cfg.Instances = append(cfg.Instances, sizes.Instance{ID: in.InstanceID, Repo: in.Repo, Version: in.Version})
	}
	slices.SortFunc(cfg.Instances, func(a, b sizes.Instance) int { return strings.Compare(a.ID, b.ID) })
	cfg.Policy = sizes.PlatformPolicy(loaded.PlatformsByID())
	return nil
}
