package ci

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/core"
)

// The nightly's env stage. Before the instance shards run, one job per
// platform (or a few, each holding whole base groups) builds and pushes by
// digest every base and env image the night's instances need; the shards
// then build FROM those digests (`swebuild build --build-context
// KEY=docker-image://REF`), so no env is built twice in one night and no
// base either. An env the env ledger (the env stage's records of earlier
// nights) says was built from the same inputs, and that the registry still
// holds, is reused instead of built.

// EnvKey names one env image: its image key on a platform.
type EnvKey struct {
	Key      string
	Platform core.Platform
}

// EnvNeed is an env image the instances to build need, with the base it is
// built FROM and the spec key of its inputs now.
type EnvNeed struct {
	Key      string
	Platform core.Platform
	Base     string
	SpecKey  string
}

// EnvTarget is one env image of the plan: built tonight by an env job, or
// reused from an earlier night.
type EnvTarget struct {
	Key      string        `json:"key"`
	Platform core.Platform `json:"platform"`
	Base     string        `json:"base,omitempty"`
	Action   string        `json:"action"`
	// Shard is the env job that builds it (ActionBuild).
	Shard string `json:"shard,omitempty"`
	// Ref is the digest-pinned image reused (ActionExisting).
	Ref     string `json:"ref,omitempty"`
	SpecKey string `json:"spec_key,omitempty"`
}

// EnvJob is one job of the env stage's matrix: the env images of whole base
// groups of one platform.
type EnvJob struct {
	Slot
	// Keys are the env image keys, comma-separated.
	Keys string `json:"keys"`

	keys []string
}

// EnvKeys returns the job's env keys in order.
func (j EnvJob) EnvKeys() []string { return append([]string(nil), j.keys...) }

// EnvMatrix is the env stage's GitHub matrix value: {"include":[...]}.
type EnvMatrix struct {
	Include []EnvJob `json:"include"`
}

// Encode returns the matrix JSON for a job output.
func (m EnvMatrix) Encode() ([]byte, error) {
	if m.Include == nil {
		m.Include = []EnvJob{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding env matrix: %w", err)
	}
	if len(b) > MaxJobOutputBytes/2 {
		return nil, fmt.Errorf("env matrix JSON is %d bytes, over half the %d-byte job output limit", len(b), MaxJobOutputBytes)
	}
	return b, nil
}

// BuildEnvMatrix puts the env images to build into jobs: per platform (in
// the order of platforms), the envs grouped by base, whole groups spread
// over at most shards jobs (largest group first, to the job with the fewest
// envs), so every base is built by one job only. A platform with nothing to
// build gets no job.
func BuildEnvMatrix(needs []EnvNeed, platforms []core.Platform, shards int, runners map[core.Platform]Runner) (EnvMatrix, error) {
	if shards < 1 {
		return EnvMatrix{}, fmt.Errorf("env shards %d: must be at least 1", shards)
	}
	if len(platforms)*shards > MaxMatrixJobs {
		return EnvMatrix{}, fmt.Errorf("%d platforms x %d env shards is over the limit of %d jobs", len(platforms), shards, MaxMatrixJobs)
	}
	if runners == nil {
		runners = DefaultRunners()
	}
	m := EnvMatrix{Include: []EnvJob{}}
	seen := map[EnvKey]bool{}
	for _, p := range platforms {
		groups := map[string][]string{}
		for _, n := range needs {
			if n.Platform != p {
				continue
			}
			if n.Key == "" {
				return EnvMatrix{}, fmt.Errorf("env need on %s with an empty key", p)
			}
			k := EnvKey{n.Key, n.Platform}
			if seen[k] {
				return EnvMatrix{}, fmt.Errorf("env %s (%s) listed twice", n.Key, p)
			}
			seen[k] = true
			groups[n.Base] = append(groups[n.Base], n.Key)
		}
		if len(groups) == 0 {
			continue
		}
		r, ok := runners[p]
		if !ok {
			return EnvMatrix{}, fmt.Errorf("platform %q: no runner configured", p)
		}
		bases := make([]string, 0, len(groups))
		for b := range groups {
			sort.Strings(groups[b])
			bases = append(bases, b)
		}
		sort.Slice(bases, func(i, j int) bool {
			if len(groups[bases[i]]) != len(groups[bases[j]]) {
				return len(groups[bases[i]]) > len(groups[bases[j]])
			}
			return bases[i] < bases[j]
		})
		jobs := make([][]string, min(shards, len(bases)))
		for _, b := range bases {
			least := 0
			for i := range jobs {
				if len(jobs[i]) < len(jobs[least]) {
					least = i
				}
			}
			jobs[least] = append(jobs[least], groups[b]...)
		}
		for s, keys := range jobs {
			sort.Strings(keys)
			m.Include = append(m.Include, EnvJob{Slot: slot("envs", p, r, s, len(keys)), Keys: strings.Join(keys, ","), keys: keys})
		}
	}
	for _, n := range needs {
		if !seen[EnvKey{n.Key, n.Platform}] {
			return EnvMatrix{}, fmt.Errorf("env %s: platform %s was not requested", n.Key, n.Platform)
		}
	}
	return m, nil
}

// LatestEnvs keeps the last env record per (key, platform), the way the
// env ledger appended night after night is read.
func LatestEnvs(recs []core.Image) map[EnvKey]core.Image {
	out := map[EnvKey]core.Image{}
	for _, r := range recs {
		if r.Kind == core.KindEnv {
			out[EnvKey{r.Key, r.Platform}] = r
		}
	}
	return out
}

// FindExistingEnvs returns, of the wanted envs, those the env ledger
// records as built and pushed from the inputs they would be built from now
// (equal spec key), under the repository prefix the run pushes to, and
// whose digest the registry still holds. As for FindExisting, a registry
// error other than "not found" is returned.
func FindExistingEnvs(ctx context.Context, ledger map[EnvKey]core.Image, want []EnvNeed, repository string, chk DigestChecker, parallel int) (map[EnvKey]core.Image, error) {
	var cands []core.Image
	for _, n := range want {
		r, ok := ledger[EnvKey{n.Key, n.Platform}]
		if !ok || !r.OK() || r.Digest == "" || r.Ref == "" || n.SpecKey == "" || r.SpecKey != n.SpecKey {
			continue
		}
		repo := Repository(r)
		if repository == "" || (repo != repository && !strings.HasPrefix(repo, strings.TrimSuffix(repository, "/")+"/")) {
			continue // another registry or prefix: not trusted
		}
		cands = append(cands, r)
	}
	found := make([]bool, len(cands))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for i, r := range cands {
		g.Go(func() error {
			ok, err := chk.HasDigest(gctx, Repository(r), r.Digest.String())
			if err != nil {
				return fmt.Errorf("checking env %s (%s) at %s: %w", r.Key, r.Platform, r.Ref, err)
			}
			found[i] = ok
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[EnvKey]core.Image{}
	for i, r := range cands {
		if found[i] {
			out[EnvKey{r.Key, r.Platform}] = r
		}
	}
	return out, nil
}

// EnvJobKeys returns the env keys the plan gives to env job name, with
// their platform; an unknown job is an error.
func (p Plan) EnvJobKeys(name string) (platform core.Platform, keys []string, err error) {
	for _, e := range p.Envs {
		if e.Action != ActionBuild || e.Shard != name {
			continue
		}
		if !platform.IsZero() && platform != e.Platform {
			return core.Platform{}, nil, fmt.Errorf("plan: env job %s holds envs of %s and %s", name, platform, e.Platform)
		}
		platform = e.Platform
		keys = append(keys, e.Key)
	}
	if len(keys) == 0 {
		return core.Platform{}, nil, fmt.Errorf("plan: no env job named %q", name)
	}
	return platform, keys, nil
}

// EnvBinding returns the env image instanceID's build on platform is to
// start from: the env's image key and the digest-pinned reference the env
// stage pushed (from envRecs, the env jobs' records) or the plan reuses.
// Empty key and ref, no error: the plan names no env for that image (an id
// list, a flat Dockerfile, an image not built tonight). An error names the
// env and what became of it (failed in its job, no result from its job).
func (p Plan) EnvBinding(envRecs []core.Image, instanceID string, platform core.Platform) (key, ref string, err error) {
	for _, in := range p.Instances {
		if in.InstanceID != instanceID {
			continue
		}
		for _, t := range in.Targets {
			if t.Platform == platform && t.Action == ActionBuild {
				key = t.Env
			}
		}
	}
	if key == "" {
		return "", "", nil
	}
	for _, e := range p.Envs {
		if e.Key != key || e.Platform != platform {
			continue
		}
		if e.Action == ActionExisting {
			return key, e.Ref, nil
		}
		r, ok := LatestEnvs(envRecs)[EnvKey{key, platform}]
		switch {
		case !ok:
			return key, "", fmt.Errorf("env %s (%s): no result from env job %s", key, platform, e.Shard)
		case !r.OK() || r.Ref == "":
			why := r.Error
			if why == "" {
				why = "not pushed"
			}
			return key, "", fmt.Errorf("env %s (%s) failed in env job %s: %s", key, platform, e.Shard, why)
		}
		return key, r.Ref, nil
	}
	return key, "", fmt.Errorf("plan: %s (%s) builds FROM env %s, which the plan does not list", instanceID, platform, key)
}
