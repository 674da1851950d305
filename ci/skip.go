package ci

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// DigestChecker answers whether a repository holds a manifest by digest.
type DigestChecker interface {
	HasDigest(ctx context.Context, repository, digest string) (bool, error)
}

// FindExisting returns, of the wanted images, those the ledger records as
// verified with a digest that the registry still holds, built from the
// inputs the image would be built from now, in the repository the run
// publishes to. Not returned (so they get built):
//   - images the ledger does not know, or whose latest record is not usable;
//   - images whose ledger spec key differs from specKeys[k] (the key of the
//     build inputs now: a changed spec, pin, Dockerfile or script), or with
//     no entry in a non-nil specKeys (its key cannot be computed now); a nil
//     specKeys compares nothing (an id list, no records to render);
//   - records whose ref names a repository outside repository (another
//     registry, or another prefix): only the registry the run publishes to
//     is asked and trusted;
//   - images whose digest is gone from the registry.
//
// A registry error other than "not found" is returned: a run should not
// rebuild thousands of images because the registry hiccuped. repository is
// also used for ledger records that do not name their own.
func FindExisting(ctx context.Context, ledger map[Key]core.Image, want []Key, specKeys map[Key]string, repository string, chk DigestChecker, parallel int) (map[Key]core.Image, error) {
	if parallel < 1 {
		parallel = 1
	}
	type candidate struct {
		rec  core.Image
		repo string
	}
	var candidates []candidate
	for _, k := range want {
		r, ok := ledger[k]
		if !ok || !Usable(r) {
			continue
		}
		if specKeys != nil && (specKeys[k] == "" || specKeys[k] != r.SpecKey) {
			continue // built from other inputs than the build would use now
		}
		repo := Repository(r)
		if repo == "" {
			repo = repository
		}
		if repo == "" {
			return nil, fmt.Errorf("ledger: %s %s has no repository and none was given", r.InstanceID, r.Platform)
		}
		if repository != "" && repo != repository && !strings.HasPrefix(repo, strings.TrimSuffix(repository, "/")+"/") {
			continue // another registry or prefix: not trusted
		}
		candidates = append(candidates, candidate{r, repo})
	}
	found := make([]bool, len(candidates))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, c := range candidates {
		g.Go(func() error {
			ok, err := chk.HasDigest(gctx, c.repo, c.rec.Digest.String())
			if err != nil {
				return fmt.Errorf("checking %s@%s (%s %s): %w", c.repo, c.rec.Digest, c.rec.InstanceID, c.rec.Platform, err)
			}
			found[i] = ok
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[Key]core.Image{}
	for i, c := range candidates {
		if found[i] {
			r := c.rec
			if r.Ref == "" || Repository(r) != c.repo {
				r.Ref = c.repo + "@" + r.Digest.String()
			}
			out[KeyOf(r)] = r
		}
	}
	return out, nil
}

// ClientChecker checks digests with one HEAD request each through the
// project's registry client (shared rate limit, retries of transient errors,
// Retry-After, credentials from the env or the Docker config).
type ClientChecker struct {
	Client *registry.Client
	// Timeout bounds each check; 0 means 2 minutes.
	Timeout time.Duration
}

// HasDigest implements DigestChecker.
func (c ClientChecker) HasDigest(ctx context.Context, repository, digest string) (bool, error) {
	ref, err := c.Client.ParseReference(repository + "@" + digest)
	if err != nil {
		return false, fmt.Errorf("parsing reference: %w", err)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	desc, err := c.Client.Head(ctx, ref)
	if err != nil {
		return false, err
	}
	return desc != nil, nil
}

// MapChecker is a DigestChecker over a fixed set of "repository@digest"
// references, for tests and dry runs.
type MapChecker struct {
	mu   sync.Mutex
	refs map[string]bool
	// Calls counts HasDigest calls.
	calls int
}

// NewMapChecker returns a checker that has exactly refs.
func NewMapChecker(refs ...string) *MapChecker {
	m := &MapChecker{refs: map[string]bool{}}
	for _, r := range refs {
		m.refs[r] = true
	}
	return m
}

// HasDigest implements DigestChecker.
func (m *MapChecker) HasDigest(_ context.Context, repository, digest string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	return m.refs[repository+"@"+digest], nil
}

// Calls returns how many lookups were made.
func (m *MapChecker) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func sortedKeys(m map[Key]core.Image) []Key {
	out := make([]Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceID != out[j].InstanceID {
			return out[i].InstanceID < out[j].InstanceID
		}
		return out[i].Platform.Compare(out[j].Platform) < 0
	})
	return out
}
