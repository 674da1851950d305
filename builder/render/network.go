package render

import (
	"context"
	"errors"
	"fmt"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/fetch"
)

// Fetcher gets a URL for the few specs whose env script embeds a file from
// the repository (requirements.txt / environment.yml at
// environment_setup_commit). found=false means a non-200 answer (upstream
// then tries the next candidate path); err is for anything else (offline,
// network failure). What is done with the files is package fetch's port of
// upstream (GetRequirements, GetEnvironmentYML).
type Fetcher = fetch.Source

// ErrNeedsNetwork is wrapped by render errors of instances that need a
// download while no Fetcher is configured.
var ErrNeedsNetwork = errors.New("needs network")

// CandidateURLs returns the URLs upstream tries, in order, for an instance
// whose spec installs from requirements.txt or environment.yml (nil
// otherwise or when the bundled environment.yml is used).
func (r *Renderer) CandidateURLs(inst *core.Instance, packages string) []string {
	var paths []string
	switch packages {
	case "requirements.txt":
		paths = r.Tables.ReqsPaths[inst.Repo]
	case "environment.yml":
		paths = r.Tables.EnvYMLPaths[inst.Repo]
	}
	return fetch.Candidates(inst.Repo, inst.EnvSetupCommit(), paths)
}

// needsNetwork is the error for an instance that needs a download of one
// of urls while r has no Fetcher; nil when r has one.
func (r *Renderer) needsNetwork(urls []string, what string) error {
	switch {
	case r.Fetcher != nil:
		return nil
	case len(urls) == 0:
		return fmt.Errorf("no candidate paths for %s", what)
	}
	return fmt.Errorf("%w: %s", ErrNeedsNetwork, urls[0])
}

// replacements is the tables' REPLACE_REQ_PACKAGES; an empty replacement
// can only come from upstream's None, which removes the line.
func (r *Renderer) replacements() []fetch.Replacement {
	out := make([]fetch.Replacement, 0, len(r.Tables.ReplaceReqPackages))
	for _, rp := range r.Tables.ReplaceReqPackages {
		out = append(out, fetch.Replacement{Package: rp[0], With: rp[1], Remove: rp[1] == ""})
	}
	return out
}

// requirements is upstream's get_requirements for inst.
func (r *Renderer) requirements(ctx context.Context, inst *core.Instance) (string, error) {
	if err := r.needsNetwork(r.CandidateURLs(inst, "requirements.txt"), "requirements.txt"); err != nil {
		return "", err
	}
	return fetch.GetRequirements(ctx, r.Fetcher, inst.Repo, inst.EnvSetupCommit(), r.Tables.ReqsPaths[inst.Repo], r.replacements())
}

// environmentYML is upstream's get_environment_yml for inst.
func (r *Renderer) environmentYML(ctx context.Context, inst *core.Instance) (string, error) {
	if err := r.needsNetwork(r.CandidateURLs(inst, "environment.yml"), "environment.yml"); err != nil {
		return "", err
	}
	return fetch.GetEnvironmentYML(ctx, r.Fetcher, inst.Repo, inst.EnvSetupCommit(), r.Tables.EnvYMLPaths[inst.Repo], envName, r.replacements())
}
