package ci

// Helpers of the nightly's steps that the ci commands share: GitHub
// outputs, --runner values, job ids, the record of an instance whose env is
// not available.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// AppendGitHubOutput appends name=value lines to the $GITHUB_OUTPUT file;
// an empty path writes nothing.
func AppendGitHubOutput(path, lines string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening GitHub output file: %w", err)
	}
	_, werr := io.WriteString(f, lines)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing GitHub output file: %w", werr)
	}
	return nil
}

// MatrixOutput are the matrix job's output lines for $GITHUB_OUTPUT:
// matrix (encoded, as EncodeForOutput wrote it), jobs, envs_matrix and
// envs_jobs.
func MatrixOutput(m Matrix, encoded string) (string, error) {
	envs, err := m.Envs.Encode()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("matrix=%s\njobs=%d\nenvs_matrix=%s\nenvs_jobs=%d\n", encoded, len(m.Include), envs, len(m.Envs.Include)), nil
}

// ParseRunners reads --runner values, PLATFORM=LABEL[@RUNNER_PLATFORM],
// over DefaultRunners; a label KnownRunnerArch does not know needs its
// platform.
func ParseRunners(flags []string) (map[core.Platform]Runner, error) {
	runners := DefaultRunners()
	for _, f := range flags {
		plat, rest, ok := strings.Cut(f, "=")
		if !ok || plat == "" || rest == "" {
			return nil, fmt.Errorf("--runner %q: want PLATFORM=LABEL[@RUNNER_PLATFORM]", f)
		}
		platform, err := core.ParsePlatform(plat)
		if err != nil {
			return nil, fmt.Errorf("--runner %q: %w", f, err)
		}
		label, archName, hasArch := strings.Cut(rest, "@")
		var arch core.Platform
		if hasArch {
			if arch, err = core.ParsePlatform(archName); err != nil {
				return nil, fmt.Errorf("--runner %q: runner platform: %w", f, err)
			}
		} else {
			var known bool
			if arch, known = KnownRunnerArch(label); !known {
				return nil, fmt.Errorf("--runner %q: unknown runner label %q; say its platform: %s=%s@linux/amd64", f, label, plat, label)
			}
		}
		runners[platform] = Runner{Label: label, Arch: arch}
	}
	return runners, nil
}

// WriteEnvUnavailable writes, to the metadata file path, the failed record
// of an instance image not built because its env image is not available
// (why): `ci merge` then says why. It returns why, joined with any writing
// error.
func WriteEnvUnavailable(path, instanceID string, p core.Platform, why error) error {
	rec := core.Image{Kind: core.KindInstance, InstanceID: instanceID, Platform: p, Status: core.StatusFailed,
		Error: "not built: its env image is not available: " + why.Error()}
	if err := core.WriteFile(path, []core.Image{rec}); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// JobIDs are one matrix job's instance ids: its ids (inline, comma
// separated) or its ids_file (file, one per line); none is an error.
func JobIDs(inline, file string) ([]string, error) {
	ids := SplitIDs(inline)
	if file != "" {
		var err error
		if ids, err = ReadIDList(file); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("no instance ids given")
	}
	return ids, nil
}
