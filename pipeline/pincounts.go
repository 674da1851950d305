package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/pins"
)

// PinCounts loads each dataset (a file or a hub name, through in's cache,
// hub and offline setting; bad records are said on in.Log and left out)
// and counts the instances each rule touches (`pins list --dataset`).
func PinCounts(ctx context.Context, datasets []string, in Inputs) ([]pins.DatasetCounts, error) {
	if len(datasets) == 0 {
		return nil, nil
	}
	tables, err := spec.Load()
	if err != nil {
		return nil, err
	}
	log := writerOr(in.Log)
	opts := dataset.OpenOptions{LoadOptions: dataset.LoadOptions{Known: tables}}
	if in.CacheDir != "" {
		if opts.Hub, err = hub.New(hub.Options{Endpoint: in.Hub.Endpoint, Token: in.Hub.Token, CacheDir: filepath.Join(in.CacheDir, "hub"), Offline: in.Offline, Log: log}); err != nil {
			return nil, fmt.Errorf("$HF_ENDPOINT: %w", err)
		}
	}
	var out []pins.DatasetCounts
	for _, name := range datasets {
		insts, _, err := dataset.Open(ctx, name, opts)
		var verr *dataset.ValidationError
		if err != nil && !errors.As(err, &verr) {
			return nil, fmt.Errorf("--dataset %s: %w", name, err)
		}
		if verr != nil {
			fmt.Fprintln(log, verr.Error())
		}
		c := pins.DatasetCounts{Dataset: name, Instances: len(insts)}
		c.Touched, c.Unresolved = pins.Count(tables, insts)
		out = append(out, c)
	}
	return out, nil
}
