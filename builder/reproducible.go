package builder

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/solver/pb"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/swebuild/swebuild/builder/graph"
)

// Reproducible builds
//
// Two builds of the same plan on two fresh BuildKit states give the same
// image manifests when Options.Reproducible is set. What it does, none of it
// touching a rendered byte:
//
//   - every Dockerfile solve gets the build argument SOURCE_DATE_EPOCH (the
//     frontend dates the image config and its history with it), and every
//     image export rewrite-timestamp=true with that epoch (BuildKit v0.13+:
//     a layer file newer than the epoch is written with the epoch as its
//     mtime);
//   - the RUN steps of every image built on a parent of the graph see a
//     few variables that make their tools deterministic (ReproducibleEnv):
//     SOURCE_DATE_EPOCH (Python's py_compile, and so pip, writes
//     checked-hash .pyc files instead of ones holding the source's mtime),
//     GIT_AUTHOR_DATE / GIT_COMMITTER_DATE (the setup commit of
//     setup_repo.sh, and its reflog line, get the epoch as their date, so
//     the same commit id), pack.threads=1 through GIT_CONFIG_COUNT (git gc's
//     delta search in one thread: the same pack), PYTHONDONTWRITEBYTECODE
//     (no import-time .pyc, which records its source's mtime). They reach
//     the steps through the parent's image config handed to the child's
//     frontend (input-metadata), and are taken out of every image config
//     again before it is exported, so a published config is the one the
//     Dockerfile gives.
//
// What is still not deterministic is named by the file-level comparer
// (package imagediff, swebuild diff-images).

// DefaultSourceDateEpoch is the epoch reproducible builds use unless told
// otherwise: 2000-01-01T00:00:00Z. Fixed, so a plan rebuilt any day gives
// the same bytes; after 1980, so files in an image can still go into a ZIP
// archive (a wheel a test builds); before every base commit of the
// SWE-bench datasets, so no file an upstream layer brings is re-dated.
const DefaultSourceDateEpoch int64 = 946684800

// Reproducible configures reproducible builds (see above).
type Reproducible struct {
	// SourceDateEpoch is the time, in seconds since 1970, files created by
	// the build and the image configs are dated with.
	SourceDateEpoch int64
}

// pushedRefs are the images a reproducible build with a push has pushed,
// by node id. A child starts FROM its nearest pushed ancestor, bound by
// digest as --build-context binds one, instead of re-solving the chain:
// BuildKit's exporter rewrites the timestamps of every layer that is not
// its base image's (by rootfs.diff_ids), so a child re-solved on its
// parent's un-rewritten layers had each of them decompressed, rewritten
// and compressed again at every export (the fixture's 220 MB rootfs layer
// seven times). A nil *pushedRefs binds nothing.
type pushedRefs struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *pushedRefs) add(id, ref string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[id] = ref
}

// bindAncestors returns the index of the first chain member to solve and
// the bound ancestor (key -> pushed ref): the nearest ancestor of the node
// (chain's last member) that was pushed, and nothing before it.
func (p *pushedRefs) bindAncestors(chain []*graph.Node) (int, map[string]string) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(chain) - 2; i >= 0; i-- {
		ref, ok := p.m[chain[i].ID()]
		if !ok {
			continue
		}
		// Every parent of what is still solved is solved too, or is
		// the bound one (else bind nothing: a node of several parents).
		solved := map[string]bool{chain[i].Key: true}
		for _, c := range chain[i+1:] {
			solved[c.Key] = true
		}
		for _, c := range chain[i+1:] {
			for _, pk := range c.Parents {
				if !solved[pk] {
					return 0, nil
				}
			}
		}
		return i + 1, map[string]string{chain[i].Key: ref}
	}
	return 0, nil
}

// ParseSourceDateEpoch parses a --source-date-epoch value: seconds since
// 1970 (as the SOURCE_DATE_EPOCH specification has it), not negative.
func ParseSourceDateEpoch(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of seconds since 1970-01-01T00:00:00Z", v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%q is before 1970", v)
	}
	return n, nil
}

func (r *Reproducible) epoch() string { return strconv.FormatInt(r.SourceDateEpoch, 10) }

// Time is the epoch as a time.
func (r *Reproducible) Time() time.Time { return time.Unix(r.SourceDateEpoch, 0).UTC() }

// ReproducibleEnv is what the RUN steps of a reproducible build see on top
// of their parent image's environment, in this order.
func (r *Reproducible) ReproducibleEnv() []string {
	date := "@" + r.epoch() + " +0000"
	return []string{
		"SOURCE_DATE_EPOCH=" + r.epoch(),
		"GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_DATE=" + date,
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=pack.threads",
		"GIT_CONFIG_VALUE_0=1",
		"PYTHONDONTWRITEBYTECODE=1",
		"SWEBUILD_REPRO_BASH=" + reproBash,
		"BASH_ENV=" + reproBashEnv,
	}
}

// The git index
//
// setup_repo.sh's last command, git commit -am, writes /testbed/.git/index
// with the stat data of every checked-out file (ctime and mtime to the
// nanosecond, device, inode): the build's clock and file system, and no
// git setting keeps it out. `git read-tree HEAD` writes the same entries
// with no stat data (git then compares a file's content when asked about
// it), so the top-level bash of each RUN step runs it when it exits. The
// hook is bash's own: a non-interactive bash sources $BASH_ENV, after
// parameter expansion and command substitution; the substitution writes
// $SWEBUILD_REPRO_BASH to a file and names it, and that text sets the EXIT
// trap in the first bash only (nested ones see SWEBUILD_REPRO_TOP), which
// also removes the file again.
const (
	reproBashFile = "/tmp/.swebuild-reproducible.sh"
	reproBash     = `if [ -z "${SWEBUILD_REPRO_TOP:-}" ]; then export SWEBUILD_REPRO_TOP=1; trap 'rm -f ` + reproBashFile + `; if [ -d /testbed/.git ]; then git -C /testbed read-tree HEAD || true; fi' EXIT; fi`
	reproBashEnv  = `$(printf '%s\n' "$SWEBUILD_REPRO_BASH" > ` + reproBashFile + ` && echo ` + reproBashFile + `)`
)

// frontendAttrs adds the epoch build argument to one Dockerfile solve.
func (r *Reproducible) frontendAttrs(attrs map[string]string) {
	if r == nil {
		return
	}
	attrs["build-arg:SOURCE_DATE_EPOCH"] = r.epoch()
}

// solveOpt adds the epoch and the timestamp rewrite to a build's image and
// OCI exports (and the build argument to its request, which BuildKit also
// reads for its exporters).
func (r *Reproducible) solveOpt(so *bkclient.SolveOpt) {
	if r == nil {
		return
	}
	if so.FrontendAttrs == nil {
		so.FrontendAttrs = map[string]string{}
	}
	r.frontendAttrs(so.FrontendAttrs)
	for i := range so.Exports {
		e := &so.Exports[i]
		if e.Type != bkclient.ExporterImage && e.Type != bkclient.ExporterOCI && e.Type != bkclient.ExporterDocker {
			continue
		}
		if e.Attrs == nil {
			e.Attrs = map[string]string{}
		}
		e.Attrs[string(exptypes.OptKeySourceDateEpoch)] = r.epoch()
		e.Attrs[string(exptypes.OptKeyRewriteTimestamp)] = "true"
	}
}

// withBuildEnv returns an image config (JSON) whose Env also holds
// ReproducibleEnv, for a child's frontend: its RUN steps inherit it. A
// variable the config already sets is overridden.
func (r *Reproducible) withBuildEnv(config []byte) ([]byte, error) {
	if r == nil || config == nil {
		return config, nil
	}
	add := r.ReproducibleEnv()
	return editEnv(config, func(env []string) []string {
		var out []string
		for _, e := range env {
			if !slices.ContainsFunc(add, func(a string) bool { return envName(a) == envName(e) }) {
				out = append(out, e)
			}
		}
		return append(out, add...)
	})
}

// boundParent is a parent bound to an existing image (Options.Images) as a
// frontend input: the image itself, pinned to the digest its reference
// resolves to, and input metadata holding its config with the build-time
// variables. The frontend takes that config as the base image's, whose
// rootfs.diff_ids the exporter leaves alone (the layers a reproducible
// build of the parent already rewrote are not rewritten again, nor pulled
// for a push to the same registry).
func (r *Reproducible) boundParent(ctx context.Context, gc gateway.Client, ref string, p ocispecs.Platform) (*pb.Definition, string, error) {
	_, dgst, cfg, err := gc.ResolveImageConfig(ctx, ref, sourceresolver.Opt{
		LogName:  "[swebuild] reproducible: load metadata for " + ref,
		ImageOpt: &sourceresolver.ResolveImageOpt{Platform: &p, ResolveMode: llb.ResolveModeDefault.String()},
	})
	if err != nil {
		return nil, "", fmt.Errorf("resolving %s: %w", ref, err)
	}
	named := ref
	if dgst != "" {
		if base, _, ok := strings.Cut(ref, "@"); ok {
			named = base + "@" + dgst.String()
		} else {
			named = ref + "@" + dgst.String()
		}
	}
	def, err := llb.Image(named, llb.Platform(p), llb.WithCustomName("[swebuild] reproducible: "+ref)).Marshal(ctx, llb.Platform(p))
	if err != nil {
		return nil, "", err
	}
	withEnv, err := r.withBuildEnv(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("image config of %s: %w", ref, err)
	}
	md, err := json.Marshal(map[string][]byte{exptypes.ExporterImageConfigKey: withEnv})
	if err != nil {
		return nil, "", err
	}
	return def.ToPB(), string(md), nil
}

// withoutBuildEnv takes ReproducibleEnv (exactly those entries) out of an
// image config's Env: what a node's solve returns inherits them from its
// parent's config.
func (r *Reproducible) withoutBuildEnv(config []byte) ([]byte, error) {
	if r == nil || config == nil {
		return config, nil
	}
	add := r.ReproducibleEnv()
	changed := false
	out, err := editEnv(config, func(env []string) []string {
		kept := slices.DeleteFunc(slices.Clone(env), func(e string) bool { return slices.Contains(add, e) })
		changed = len(kept) != len(env)
		return kept
	})
	if err != nil || !changed {
		return config, err
	}
	return out, nil
}

func envName(e string) string {
	for i := range len(e) {
		if e[i] == '=' {
			return e[:i]
		}
	}
	return e
}

// editEnv rewrites the config.Env of an OCI image config, keeping every
// other field as it is (as raw JSON).
func editEnv(config []byte, f func([]string) []string) ([]byte, error) {
	var img map[string]json.RawMessage
	if err := json.Unmarshal(config, &img); err != nil {
		return nil, fmt.Errorf("decoding image config: %w", err)
	}
	cfg := map[string]json.RawMessage{}
	if raw, ok := img["config"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("decoding image config's config: %w", err)
		}
	}
	var env []string
	if raw, ok := cfg["Env"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, fmt.Errorf("decoding image config's Env: %w", err)
		}
	}
	env = f(slices.Clone(env))
	if len(env) == 0 {
		delete(cfg, "Env")
	} else {
		raw, err := json.Marshal(env)
		if err != nil {
			return nil, err
		}
		cfg["Env"] = raw
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	img["config"] = raw
	return json.Marshal(img)
}
