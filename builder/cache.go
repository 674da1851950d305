package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/builder/graph"
)

// Registry caches (--cache-to/--cache-from type=registry) hold the layers
// that more than one image shares, and nothing else:
//
//   - a base or env node exports its cache to its own tag (cacheTag) and
//     every node imports the tags of the base and env nodes of its chain;
//   - an instance built FROM an env exports nothing: its own steps are
//     shared with no other image, so an export would only cost (a
//     per-instance export misses on every later build);
//   - a flat (v5) Dockerfile has no env; the tasks sharing an instruction
//     prefix (affinityKeys' "prefix:" group) import one tag per group, and
//     one task of the group (the first the scheduler starts, the group's
//     lead) exports to it, so a fresh node or a new night finds the
//     prefix's layers there.
//
// Other cache types (local, inline, gha, ...) pass through unchanged, on
// every node, as given.

// groupTag is the registry cache tag of a flat prefix group.
func groupTag(group string) string {
	h := sha256.Sum256([]byte(group))
	return "prefix-" + hex.EncodeToString(h[:6])
}

// withTag returns e with a registry ref suffixed by tag (REPO:TAG ->
// REPO:TAG-<tag>, REPO -> REPO:<tag>); other types unchanged.
func withTag(e bkclient.CacheOptionsEntry, tag string) bkclient.CacheOptionsEntry {
	ref := e.Attrs["ref"]
	if e.Type != "registry" || ref == "" {
		return e
	}
	attrs := make(map[string]string, len(e.Attrs))
	for k, v := range e.Attrs {
		attrs[k] = v
	}
	// A tag follows the last ':' after the last '/'.
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		attrs["ref"] = ref + "-" + tag
	} else {
		attrs["ref"] = ref + ":" + tag
	}
	return bkclient.CacheOptionsEntry{Type: e.Type, Attrs: attrs}
}

// cacheExports are the cache exports of job's node n: registry exports only
// for a base or env node, or for the lead of a flat prefix group.
func cacheExports(entries []bkclient.CacheOptionsEntry, n *graph.Node, job Job) []bkclient.CacheOptionsEntry {
	var out []bkclient.CacheOptionsEntry
	for _, e := range entries {
		switch {
		case e.Type != "registry":
			out = append(out, e)
		case n.Kind != graph.KindInstance:
			out = append(out, perNode(e, n))
		case job.cacheGroup != "" && job.cacheLead:
			out = append(out, withTag(e, groupTag(job.cacheGroup)))
		}
	}
	return out
}

// cacheImports are the cache imports of a chain (base first, the node
// last): the tags of its base and env members, and its prefix group's tag.
func cacheImports(entries []bkclient.CacheOptionsEntry, chain []*graph.Node, group string) []bkclient.CacheOptionsEntry {
	var out []bkclient.CacheOptionsEntry
	for _, e := range entries {
		if e.Type != "registry" {
			out = append(out, e)
			continue
		}
		for _, c := range chain {
			if c.Kind != graph.KindInstance {
				out = append(out, perNode(e, c))
			}
		}
		if group != "" {
			out = append(out, withTag(e, groupTag(group)))
		}
	}
	return out
}
