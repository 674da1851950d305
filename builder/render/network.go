package render

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/swebuild/swebuild/dataset"
)

// Fetcher gets a URL for the few specs whose env script embeds a file from
// the repository (requirements.txt / environment.yml at
// environment_setup_commit). found=false means a non-200 answer (upstream
// then tries the next candidate path); err is for anything else (offline,
// network failure).
type Fetcher interface {
	Fetch(ctx context.Context, url string) (body string, found bool, err error)
}

// ErrNeedsNetwork is wrapped by render errors of instances that need a
// download while no Fetcher is configured.
var ErrNeedsNetwork = errors.New("needs network")

// posixJoin is Python's posixpath.join.
func posixJoin(parts ...string) string {
	out := ""
	for i, p := range parts {
		switch {
		case i == 0 || strings.HasPrefix(p, "/"):
			out = p
		case out == "" || strings.HasSuffix(out, "/"):
			out += p
		default:
			out += "/" + p
		}
	}
	return out
}

func envCommit(inst *dataset.Instance) string {
	if inst.EnvironmentSetupCommit != "" {
		return inst.EnvironmentSetupCommit
	}
	return inst.BaseCommit
}

// CandidateURLs returns the URLs upstream tries, in order, for an instance
// whose spec installs from requirements.txt or environment.yml (nil
// otherwise or when the bundled environment.yml is used).
func (r *Renderer) CandidateURLs(inst *dataset.Instance, packages string) []string {
	var paths []string
	switch packages {
	case "requirements.txt":
		paths = r.Tables.ReqsPaths[inst.Repo]
	case "environment.yml":
		paths = r.Tables.EnvYMLPaths[inst.Repo]
	}
	urls := make([]string, 0, len(paths))
	for _, p := range paths {
		urls = append(urls, posixJoin(r.Tables.URLRaw, inst.Repo, envCommit(inst), p))
	}
	return urls
}

func (r *Renderer) firstOf(ctx context.Context, urls []string, what string) (body, url string, err error) {
	if len(urls) == 0 {
		return "", "", fmt.Errorf("no candidate paths for %s", what)
	}
	if r.Fetcher == nil {
		return "", "", fmt.Errorf("%w: %s", ErrNeedsNetwork, urls[0])
	}
	for _, u := range urls {
		b, found, err := r.Fetcher.Fetch(ctx, u)
		if err != nil {
			return "", "", fmt.Errorf("fetching %s: %w", u, err)
		}
		if found {
			return b, u, nil
		}
	}
	return "", "", fmt.Errorf("could not find %s at %s", what, strings.Join(urls, ", "))
}

func excludeReqLine(line string) bool {
	s := strings.TrimSpace(line)
	return strings.HasPrefix(s, "-e .") || strings.HasPrefix(s, "#") || strings.HasPrefix(s, ".[test")
}

// requirements ports get_requirements (get_requirements_by_commit +
// clean_requirements).
func (r *Renderer) requirements(ctx context.Context, inst *dataset.Instance) (string, error) {
	body, url, err := r.firstOf(ctx, r.CandidateURLs(inst, "requirements.txt"), "requirements.txt")
	if err != nil {
		return "", err
	}
	reqPath := strings.TrimPrefix(url, posixJoin(r.Tables.URLRaw, inst.Repo, envCommit(inst))+"/")
	reqDir := ""
	if i := strings.LastIndexByte(reqPath, '/'); i >= 0 {
		reqDir = reqPath[:i]
	}
	var original, additional []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "-r") {
			name := strings.TrimSpace(line[min(2, len(line)):])
			u := posixJoin(r.Tables.URLRaw, inst.Repo, envCommit(inst), reqDir, name)
			extra, found, err := r.Fetcher.Fetch(ctx, u)
			if err != nil {
				return "", fmt.Errorf("fetching %s: %w", u, err)
			}
			if found {
				for _, l := range strings.Split(extra, "\n") {
					if !excludeReqLine(l) {
						additional = append(additional, l)
					}
				}
			}
			continue
		}
		if !excludeReqLine(line) {
			original = append(original, line)
		}
	}
	additional = append(additional, strings.Join(original, "\n"))
	text := strings.Join(additional, "\n")
	// clean_requirements: a line "<pkg>" or "<pkg><op>..." becomes the replacement.
	lines := strings.Split(text, "\n")
	for _, rp := range r.Tables.ReplaceReqPackages {
		for i, l := range lines {
			rest, ok := strings.CutPrefix(l, rp[0])
			if ok && (rest == "" || strings.IndexByte("<>=!~", rest[0]) >= 0) {
				lines[i] = rp[1]
			}
		}
	}
	return strings.Join(lines, "\n"), nil
}

var pipSection = regexp.MustCompile(`(?m)^(\s*-\s*pip\s*:\s*\n)`)

// environmentYML ports get_environment_yml (by commit + clean_environment_yml).
func (r *Renderer) environmentYML(ctx context.Context, inst *dataset.Instance) (string, error) {
	body, _, err := r.firstOf(ctx, r.CandidateURLs(inst, "environment.yml"), "environment.yml")
	if err != nil {
		return "", err
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "name:") {
			lines[i] = "name: " + envName
		}
	}
	yml := strings.Join(lines, "\n")
	m := pipSection.FindStringSubmatchIndex(yml)
	if m == nil {
		return yml, nil
	}
	group := yml[m[2]:m[3]]
	pipIndent := len(group) - len(strings.TrimLeft(group, " \t\n\r\f\v"))
	start := m[1]
	end := len(yml)
	after := strings.Split(yml[start:], "\n")
	off := 0
	for _, l := range after {
		if strings.TrimSpace(l) != "" && len(l)-len(strings.TrimLeft(l, " \t\n\r\f\v")) <= pipIndent {
			end = start + off
			break
		}
		off += len(l) + 1
	}
	pip := yml[start:end]
	for _, rp := range r.Tables.ReplaceReqPackages {
		re, err := regexp.Compile(`(?m)^(\s*-\s*)` + regexp.QuoteMeta(rp[0]) + `([<>=!~]=?.*|$)`)
		if err != nil {
			return "", fmt.Errorf("compiling replacement for %s: %w", rp[0], err)
		}
		pip = re.ReplaceAllString(pip, "${1}"+rp[1])
	}
	return yml[:start] + pip + yml[end:], nil
}
