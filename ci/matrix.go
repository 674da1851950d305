// Package ci holds the logic behind the nightly GitHub Actions workflow:
// the shard matrix (Matrix), the skip-existing filter (Skipper), the merge of
// shard results into "what to index and what regressed" (Merge) and the job
// summary (WriteSummary). The workflow YAML only calls `swebuild ci ...`.
package ci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// GitHub Actions limits the matrix code respects.
const (
	// MaxMatrixJobs is the most jobs one matrix may generate.
	MaxMatrixJobs = 256
	// MaxJobOutputBytes is the total size allowed for one job's outputs.
	MaxJobOutputBytes = 1 << 20
)

// Runner says which runner label builds a platform and whether that runner
// runs the platform natively or under QEMU emulation.
type Runner struct {
	Label string `json:"label"`
	// Arch is the runner's own OCI platform ("linux/amd64", "linux/arm64").
	Arch core.Platform `json:"arch"`
}

// DefaultRunners are GitHub's hosted runners: each platform builds natively.
func DefaultRunners() map[core.Platform]Runner {
	return map[core.Platform]Runner{
		core.AMD64: {Label: "ubuntu-24.04", Arch: core.AMD64},
		core.ARM64: {Label: "ubuntu-24.04-arm", Arch: core.ARM64},
	}
}

// KnownRunnerArch returns the architecture of a GitHub-hosted runner label,
// for labels given on the command line without an explicit arch.
func KnownRunnerArch(label string) (core.Platform, bool) {
	switch label {
	case "ubuntu-24.04", "ubuntu-22.04", "ubuntu-latest":
		return core.AMD64, true
	case "ubuntu-24.04-arm", "ubuntu-22.04-arm":
		return core.ARM64, true
	}
	return core.Platform{}, false
}

// PlatformsFunc answers which platforms an instance gets images for (the
// USE_X86 decision). It is builder/spec's job; ci only consumes it.
type PlatformsFunc func(instanceID string) []core.Platform

// MatrixOptions configures BuildMatrix.
type MatrixOptions struct {
	// Platforms requested for this run, e.g. linux/amd64 and linux/arm64.
	Platforms []core.Platform
	// Shards is the requested number of shards per platform. The matrix
	// never has more than MaxJobs jobs in total and never an empty shard.
	Shards int
	// MaxJobs caps the total job count; 0 means MaxMatrixJobs. Values above
	// MaxMatrixJobs are an error.
	MaxJobs int
	// PlatformsFor decides the platforms of an instance; nil means every
	// requested platform.
	PlatformsFor PlatformsFunc
	// Skip reports (instance, platform) pairs the registry already has;
	// nil skips nothing.
	Skip func(instanceID string, platform core.Platform) bool
	// Runners maps each requested platform to its runner; nil means
	// DefaultRunners.
	Runners map[core.Platform]Runner
}

// Slot is what every matrix job says of where it runs: one shard of one
// platform, on one runner. Its JSON fields lead each entry of a matrix's
// "include" list.
type Slot struct {
	// Name is unique in the matrix and safe for artifact names: "arm64-3"
	// (an instance shard), "envs-arm64-0" (an env job).
	Name     string        `json:"name"`
	Platform core.Platform `json:"platform"`
	Runner   string        `json:"runner"`
	// QEMU is true when the runner's arch differs from Platform.
	QEMU  bool `json:"qemu"`
	Shard int  `json:"shard"`
	// Count is the number of images the job builds: instance images (Job),
	// env images (EnvJob).
	Count int `json:"count"`
}

// slot is shard s of platform p on runner r, building count images; name
// is its Name's prefix ("" for an instance shard, "envs" for env jobs).
func slot(prefix string, p core.Platform, r Runner, s, count int) Slot {
	name := fmt.Sprintf("%s-%d", platformSlug(p), s)
	if prefix != "" {
		name = prefix + "-" + name
	}
	return Slot{Name: name, Platform: p, Runner: r.Label, QEMU: r.Arch != p, Shard: s, Count: count}
}

// Job is one entry of the matrix "include" list: one shard of one platform.
type Job struct {
	Slot
	// IDs is the comma-separated instance ids; empty when IDsFile is set.
	IDs string `json:"ids"`
	// IDsFile names a file (relative to the ids directory) holding the ids,
	// one per line, used when the inline ids would exceed the job output
	// limit.
	IDsFile string `json:"ids_file,omitempty"`

	ids []string
}

// InstanceIDs returns the shard's ids in order.
func (j Job) InstanceIDs() []string { return append([]string(nil), j.ids...) }

// PlatformCount summarises one platform of the matrix.
type PlatformCount struct {
	Platform core.Platform `json:"platform"`
	Wanted   int           `json:"wanted"`
	Skipped  int           `json:"skipped"`
	ToBuild  int           `json:"to_build"`
	Shards   int           `json:"shards"`
}

// Matrix is the GitHub matrix value: {"include":[...]}. Counts is kept out
// of the JSON given to GitHub (use Plan for the full picture).
type Matrix struct {
	Include []Job           `json:"include"`
	Counts  []PlatformCount `json:"-"`
	// Envs is the env stage that runs before the shards (envs.go); empty
	// when the plan has none.
	Envs EnvMatrix `json:"-"`
}

// Empty reports whether nothing is left to build.
func (m Matrix) Empty() bool { return len(m.Include) == 0 }

// BuildMatrix shards ids per platform. Ids are sorted so instances of one
// repository (which share base and env images) land in the same shard, then
// cut into contiguous shards whose sizes differ by at most one. The shard
// count per platform is the requested one, lowered where a platform has fewer
// ids than shards or where the total would exceed MaxJobs.
func BuildMatrix(ids []string, opts MatrixOptions) (Matrix, error) {
	maxJobs := opts.MaxJobs
	if maxJobs == 0 {
		maxJobs = MaxMatrixJobs
	}
	if maxJobs < 0 || maxJobs > MaxMatrixJobs {
		return Matrix{}, fmt.Errorf("max jobs %d: must be between 1 and %d", maxJobs, MaxMatrixJobs)
	}
	if opts.Shards < 1 {
		return Matrix{}, fmt.Errorf("shards %d: must be at least 1", opts.Shards)
	}
	if len(opts.Platforms) == 0 {
		return Matrix{}, fmt.Errorf("no platforms requested")
	}
	runners := opts.Runners
	if runners == nil {
		runners = DefaultRunners()
	}
	seenPlatform := map[core.Platform]bool{}
	for _, p := range opts.Platforms {
		if seenPlatform[p] {
			return Matrix{}, fmt.Errorf("platform %q requested twice", p)
		}
		seenPlatform[p] = true
		if _, ok := runners[p]; !ok {
			return Matrix{}, fmt.Errorf("platform %q: no runner configured", p)
		}
	}

	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return Matrix{}, fmt.Errorf("instance id %q listed twice", sorted[i])
		}
	}

	perPlatform := make([][]string, len(opts.Platforms))
	counts := make([]PlatformCount, len(opts.Platforms))
	for pi, p := range opts.Platforms {
		counts[pi].Platform = p
	}
	for _, id := range sorted {
		allowed := opts.Platforms
		if opts.PlatformsFor != nil {
			allowed = opts.PlatformsFor(id)
		}
		for pi, p := range opts.Platforms {
			if !slices.Contains(allowed, p) {
				continue
			}
			counts[pi].Wanted++
			if opts.Skip != nil && opts.Skip(id, p) {
				counts[pi].Skipped++
				continue
			}
			perPlatform[pi] = append(perPlatform[pi], id)
		}
	}

	sizes := make([]int, len(perPlatform))
	for i, l := range perPlatform {
		sizes[i] = len(l)
	}
	shards, err := allocateShards(sizes, opts.Shards, maxJobs)
	if err != nil {
		return Matrix{}, err
	}

	var m Matrix
	for pi, p := range opts.Platforms {
		list := perPlatform[pi]
		counts[pi].ToBuild = len(list)
		counts[pi].Shards = shards[pi]
		r := runners[p]
		for s, chunk := range split(list, shards[pi]) {
			m.Include = append(m.Include, Job{Slot: slot("", p, r, s, len(chunk)), IDs: strings.Join(chunk, ","), ids: chunk})
		}
	}
	if m.Include == nil {
		m.Include = []Job{}
	}
	m.Counts = counts
	return m, nil
}

// allocateShards gives each platform min(requested, its id count) shards,
// lowering a common cap until the total fits maxJobs. Platforms with few ids
// keep all they need, so the cap is spent where the work is.
func allocateShards(sizes []int, requested, maxJobs int) ([]int, error) {
	out := make([]int, len(sizes))
	total := func(c int) int {
		t := 0
		for _, n := range sizes {
			t += min(n, c)
		}
		return t
	}
	c := requested
	for c > 1 && total(c) > maxJobs {
		c--
	}
	if total(c) > maxJobs {
		return nil, fmt.Errorf("%d platforms need at least %d jobs, over the limit of %d", len(sizes), total(c), maxJobs)
	}
	for i, n := range sizes {
		out[i] = min(n, c)
	}
	return out, nil
}

// split cuts list into k contiguous chunks whose sizes differ by at most one
// (the first len%k chunks get the extra element).
func split(list []string, k int) [][]string {
	if k <= 0 || len(list) == 0 {
		return nil
	}
	out := make([][]string, 0, k)
	base, extra := len(list)/k, len(list)%k
	start := 0
	for i := 0; i < k; i++ {
		n := base
		if i < extra {
			n++
		}
		out = append(out, list[start:start+n])
		start += n
	}
	return out
}

// platformSlug is the platform in job names: "amd64", "arm64".
func platformSlug(p core.Platform) string { return p.GOARCH() }

// EncodeForOutput returns the matrix JSON for a job output. When the JSON
// would exceed limit bytes (0 means MaxJobOutputBytes minus room for the
// other outputs), each shard's ids are written to idsDir/<name>.txt and the
// jobs carry ids_file instead; idsDir must then be set.
func (m Matrix) EncodeForOutput(limit int, idsDir string) ([]byte, error) {
	if limit == 0 {
		limit = MaxJobOutputBytes - 64<<10
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding matrix: %w", err)
	}
	if len(b) <= limit {
		return b, nil
	}
	if idsDir == "" {
		return nil, fmt.Errorf("matrix JSON is %d bytes, over the %d-byte job output limit: set an ids directory to move the ids into files", len(b), limit)
	}
	if err := os.MkdirAll(idsDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating ids directory: %w", err)
	}
	out := Matrix{Include: make([]Job, len(m.Include)), Counts: m.Counts}
	for i, j := range m.Include {
		name := j.Name + ".txt"
		data := strings.Join(j.ids, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(idsDir, name), []byte(data), 0o644); err != nil {
			return nil, fmt.Errorf("writing ids of shard %s: %w", j.Name, err)
		}
		j.IDs = ""
		j.IDsFile = name
		out.Include[i] = j
	}
	b, err = json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encoding matrix: %w", err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("matrix JSON is %d bytes even with ids in files, over the %d-byte limit", len(b), limit)
	}
	return b, nil
}
