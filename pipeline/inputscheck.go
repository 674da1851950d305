package pipeline

import (
	"errors"
	"fmt"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/pins"
)

// Check validates inputs as a command line gives them (the messages name
// the flags): one of a dataset and a task repo, a cache directory, known
// spec tables and pin rules that parse.
func (in Inputs) Check() error {
	switch {
	case !in.Given():
		return errors.New("--dataset is required (or --task-repo DIR)")
	case in.Dataset != "" && in.TaskRepo != "":
		return errors.New("--dataset and --task-repo: give one")
	case in.CacheDir == "":
		return errors.New("no cache directory: set --cache-dir or $SWEBUILD_CACHE")
	case in.SpecsVersion != spec.VersionV410 && in.SpecsVersion != spec.VersionFinal:
		return fmt.Errorf("--specs-version %q: want %s or %s", in.SpecsVersion, spec.VersionV410, spec.VersionFinal)
	}
	if _, err := pins.Parse(in.Pins); err != nil {
		return fmt.Errorf("--pins: %w", err)
	}
	return nil
}
