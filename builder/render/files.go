package render

import (
	"errors"
	"fmt"
	"slices"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/envfile"
)

// The env scripts of a few Python specs embed a file of the repository:
// requirements.txt or environment.yml at environment_setup_commit, as
// upstream's get_requirements / get_environment_yml give it (package
// envfile). Rendering does no I/O: those files are resolved before (package
// pipeline downloads what Needs lists through package fetch) and handed to
// the Renderer as RepoFiles.

// Embedded file names (spec.Spec.Packages values).
const (
	FileRequirements   = "requirements.txt"
	FileEnvironmentYML = "environment.yml"
)

// RepoFile names one embedded file: which one, of which repository, at
// which commit (the instance's environment_setup_commit, or base_commit
// when it has none).
type RepoFile struct {
	Name   string // FileRequirements or FileEnvironmentYML
	Repo   string
	Commit string
}

// Need is a RepoFile with the paths upstream looks for it at, in order
// (the repo's MAP_REPO_TO_REQS_PATHS or MAP_REPO_TO_ENV_YML_PATHS entry).
type Need struct {
	RepoFile
	Paths []string
}

// Resolved is what resolving a RepoFile gave: the text the env script
// embeds (after "-r" includes, REPLACE_REQ_PACKAGES and, for
// environment.yml, the env renamed "testbed"), or the error to report for
// every instance that needs it.
type Resolved struct {
	Text string
	Err  error
}

// RepoFiles are resolved repository files.
type RepoFiles map[RepoFile]Resolved

// EnvName is the conda env upstream creates ("testbed"); a resolved
// environment.yml is renamed to it.
const EnvName = envName

// ErrNeedsNetwork is wrapped by render errors of instances whose embedded
// file is not among the Renderer's RepoFiles.
var ErrNeedsNetwork = errors.New("needs network")

// CandidateURLs returns the URLs upstream tries, in order, for an
// instance's embedded file name (nil for another name).
func (r *Renderer) CandidateURLs(inst *core.Instance, name string) []string {
	return envfile.Candidates(inst.Repo, inst.EnvSetupCommit(), r.paths(inst.Repo, name))
}

// paths are the tables' candidate paths of repo's file name.
func (r *Renderer) paths(repo, name string) []string {
	switch name {
	case FileRequirements:
		return r.Tables.ReqsPaths[repo]
	case FileEnvironmentYML:
		return r.Tables.EnvYMLPaths[repo]
	}
	return nil
}

// embeds is the name of the repository file rec's env script embeds, ""
// for none: a Python spec whose packages are requirements.txt or
// environment.yml, unless the env comes from upstream's bundled
// environment.yml, a frozen conda environment or a profile.
func embeds(rec *spec.Recipe) string {
	if rec.Language != spec.LangPython || rec.Profile != nil || rec.CondaExplicit != "" || rec.EnvYMLCached {
		return ""
	}
	switch rec.Spec.Packages {
	case FileRequirements, FileEnvironmentYML:
		return rec.Spec.Packages
	}
	return ""
}

// Needs lists the repository files the env scripts of insts embed on
// platforms (after the pin rules), each once, in order of first need.
// Instances whose recipe cannot be made are left out: rendering them
// reports why.
func (r *Renderer) Needs(insts []core.Instance, platforms []core.Platform) []Need {
	var out []Need
	seen := map[RepoFile]bool{}
	for i := range insts {
		inst := &insts[i]
		for _, p := range platforms {
			rec, err := r.recipe(inst, p)
			if err != nil {
				continue
			}
			name := embeds(rec)
			f := RepoFile{Name: name, Repo: inst.Repo, Commit: inst.EnvSetupCommit()}
			if name == "" || seen[f] {
				continue
			}
			seen[f] = true
			out = append(out, Need{RepoFile: f, Paths: slices.Clone(r.paths(inst.Repo, name))})
		}
	}
	return out
}

// file is the resolved text of inst's embedded file name.
func (r *Renderer) file(inst *core.Instance, name string) (string, error) {
	got, ok := r.RepoFiles[RepoFile{Name: name, Repo: inst.Repo, Commit: inst.EnvSetupCommit()}]
	if !ok {
		urls := r.CandidateURLs(inst, name)
		if len(urls) == 0 {
			return "", fmt.Errorf("no candidate paths for %s", name)
		}
		return "", fmt.Errorf("%w: %s (not resolved before rendering)", ErrNeedsNetwork, urls[0])
	}
	return got.Text, got.Err
}
