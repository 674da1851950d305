package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/verify"
)

// The checks of the options a command line gives (`swebuild verify`,
// `build --verify`); their messages name the flags.

// Check validates what verify's command line sets (the run, the images,
// the limits, the parser, the script and the engine) and reads Images:
// "dataset" or "dataset=REGISTRY" sets DatasetImages (and DatasetRegistry)
// instead. It returns the registry the images are pulled from ("" for an
// OCI layout or a metadata file): the host of the runs' credentials.
func (o *VerifyOptions) Check() (string, error) {
	if err := o.checkRun(); err != nil {
		return "", err
	}
	if err := checkGrading(o.Parser, "--eval-script", o.EvalScript); err != nil {
		return "", err
	}
	switch {
	case o.RunID != "" && verify.PathName(o.RunID) != o.RunID:
		return "", fmt.Errorf("--run-id %q: want a plain name ([A-Za-z0-9._-], not starting with '.')", o.RunID)
	case o.Engine != EngineBuildKit && o.Engine != EngineDocker:
		return "", fmt.Errorf("--engine %q: want %s or %s", o.Engine, EngineBuildKit, EngineDocker)
	case o.Engine == EngineDocker && o.BuildKit != "":
		return "", errors.New("--builder is for --engine buildkit; with --engine docker give --docker-host")
	}
	return o.splitImages()
}

// checkRun checks what runs and how often.
func (o *VerifyOptions) checkRun() error {
	switch {
	case !o.Gold && !o.Control && o.PredictionsFile == "":
		return errors.New("give --gold, --control or --predictions FILE")
	case (o.Images == "") == (o.MetadataFile == ""):
		return errors.New("give exactly one of --images REPO|dataset[=REGISTRY] and --metadata-file F")
	case o.Workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", o.Workers)
	case o.Repeat < 1:
		return fmt.Errorf("--repeat %d: want at least 1", o.Repeat)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %s: want a positive duration", o.Timeout)
	}
	return nil
}

// checkGrading checks a --log-parser name and an eval script choice (its
// flag: scriptFlag).
func checkGrading(parser, scriptFlag, script string) error {
	if parser != "" && !slices.Contains(grading.ParserNames(), parser) {
		return fmt.Errorf("--log-parser %q: want one of %s", parser, strings.Join(grading.ParserNames(), ", "))
	}
	if script != verify.ScriptDataset && script != verify.ScriptGenerated {
		return fmt.Errorf("%s %q: want %s or %s", scriptFlag, script, verify.ScriptDataset, verify.ScriptGenerated)
	}
	return nil
}

// splitImages reads Images "dataset[=REGISTRY]" into DatasetImages and
// DatasetRegistry, and returns the registry the images come from.
func (o *VerifyOptions) splitImages() (string, error) {
	if rest, ok := strings.CutPrefix(o.Images, "dataset"); ok && (rest == "" || strings.HasPrefix(rest, "=")) {
		o.DatasetImages, o.Images = true, ""
		if rest != "" {
			if o.DatasetRegistry = strings.TrimPrefix(rest, "="); o.DatasetRegistry == "" {
				return "", errors.New("--images dataset=: want a registry (and path) after '='")
			}
		}
	}
	switch {
	case strings.HasPrefix(o.Images, "oci:"):
		return "", nil // an OCI layout: no registry to log in to
	case o.Images != "":
		dest, err := registry.RegistryOf(o.Images)
		if err != nil {
			return "", fmt.Errorf("--images: %w", err)
		}
		return dest, nil
	case o.DatasetRegistry != "":
		dest, err := registry.RegistryOf(o.DatasetRegistry)
		if err != nil {
			return "", fmt.Errorf("--images dataset=: %w", err)
		}
		return dest, nil
	}
	return "", nil
}

// Check validates what `build --verify`'s command line sets.
func (o GoldCheckOptions) Check() error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--verify-timeout %s: want a positive duration", o.Timeout)
	}
	if o.Repeat < 1 || o.Repeat > 100 {
		return fmt.Errorf("--verify-repeat %d: want 1 to 100 runs", o.Repeat)
	}
	return checkGrading(o.Parser, "--verify-eval-script", o.EvalScript)
}

// VerifyPlatforms are the platforms verify runs: those given (the
// --platform flag), else the host's (core.HostPlatform: host, or hostErr
// when this machine is neither amd64 nor arm64, and --platform is then
// needed). Another platform than the host's is only run when asked: it is
// emulated.
func VerifyPlatforms(given []core.Platform, host core.Platform, hostErr error) ([]core.Platform, error) {
	if len(given) > 0 {
		plats, err := core.PlatformSet(given)
		if err != nil {
			return nil, fmt.Errorf("--platform: %w", err)
		}
		return plats, nil
	}
	if hostErr != nil {
		return nil, fmt.Errorf("no --platform given and no default: %w; give --platform linux/amd64 and/or linux/arm64", hostErr)
	}
	return []core.Platform{host}, nil
}
