// Package builder builds plan nodes (base, env and instance images) with
// BuildKit: one solve per node and platform, in dependency order, up to N at a
// time, on one or more builders (one per platform, native or emulated), with a
// progress display, one log file per node, a summary table and a metadata file.
//
// The package knows nothing about SWE-bench specs or rendering: callers hand it
// nodes (graph.Node: a Dockerfile, the context files it copies, and the keys
// of the nodes it builds FROM). See Build.
package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/distribution/reference"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// contextName is the name under which the Dockerfile frontend looks up a named
// context for a FROM of key: the familiar reference with ":latest" removed
// (dockerui.Client.NamedContext).
func contextName(key string) (string, error) {
	named, err := reference.ParseNormalizedNamed(key)
	if err != nil {
		return "", fmt.Errorf("parent key %q is not an image reference: %w", key, err)
	}
	return strings.TrimSuffix(reference.FamiliarString(named), ":latest"), nil
}

// givenImages checks Options.Images and keys it by context name.
func givenImages(images map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(images))
	for key, ref := range images {
		cn, err := contextName(key)
		if err != nil {
			return nil, fmt.Errorf("bound image: %w", err)
		}
		if _, err := reference.ParseNormalizedNamed(ref); err != nil {
			return nil, fmt.Errorf("image bound to %s: %q is not an image reference: %w", key, ref, err)
		}
		out[cn] = ref
	}
	return out, nil
}

// givenRef returns the image bound to key, if any.
func givenRef(given map[string]string, key string) (string, bool) {
	if len(given) == 0 {
		return "", false
	}
	cn, err := contextName(key)
	if err != nil {
		return "", false
	}
	ref, ok := given[cn]
	return ref, ok
}

// withoutGiven drops the nodes bound to given images, then the nodes that
// were built only for them: a base or env whose children are all gone (a
// base under a bound env is not needed).
func withoutGiven(nodes []*graph.Node, given map[string]string) []*graph.Node {
	gone := map[string]bool{} // node IDs
	for _, n := range nodes {
		if _, ok := givenRef(given, n.Key); ok {
			gone[n.ID()] = true
		}
	}
	for changed := true; changed; {
		changed = false
		children := map[string]int{} // parent node ID -> children left
		hadChildren := map[string]bool{}
		for _, n := range nodes {
			for _, pk := range n.Parents {
				id := pk + "@" + n.Platform.String()
				hadChildren[id] = true
				if !gone[n.ID()] {
					children[id]++
				}
			}
		}
		for _, n := range nodes {
			if !gone[n.ID()] && n.Kind != graph.KindInstance && hadChildren[n.ID()] && children[n.ID()] == 0 {
				gone[n.ID()] = true
				changed = true
			}
		}
	}
	var kept []*graph.Node
	for _, n := range nodes {
		if !gone[n.ID()] {
			kept = append(kept, n)
		}
	}
	return kept
}

// validateNode checks a node's fields before anything is built; the error
// names the node and the field.
func validateNode(n *graph.Node) error {
	if n.Key == "" {
		return fmt.Errorf("node with platform %q: key: empty", n.Platform)
	}
	switch n.Kind {
	case graph.KindBase, graph.KindEnv, graph.KindInstance:
	default:
		return fmt.Errorf("node %s: kind: %q is not base, env or instance", n.ID(), n.Kind)
	}
	if n.Platform.IsZero() {
		return fmt.Errorf("node %s: platform: required (linux/amd64 or linux/arm64)", n.ID())
	}
	if n.X86Only && n.Platform != core.AMD64 {
		return fmt.Errorf("node %s: platform: %s is x86-only; refusing to build a %s image", n.ID(), n.Key, n.Platform.Arch())
	}
	if n.Kind == graph.KindInstance && n.InstanceID == "" {
		return fmt.Errorf("node %s: instance id: empty (an instance node builds exactly one instance)", n.ID())
	}
	if n.Kind != graph.KindInstance && n.InstanceID != "" {
		return fmt.Errorf("node %s: instance id: %q set on a %s node", n.ID(), n.InstanceID, n.Kind)
	}
	if len(n.Dockerfile) == 0 {
		return fmt.Errorf("node %s: dockerfile: empty", n.ID())
	}
	for _, parent := range n.Parents {
		if _, err := contextName(parent); err != nil {
			return fmt.Errorf("node %s: parents: %w", n.ID(), err)
		}
	}
	for name := range n.Context {
		if err := checkContextName(name); err != nil {
			return fmt.Errorf("node %s: context: %w", n.ID(), err)
		}
	}
	if n.ContextDir != "" {
		if !path.IsAbs(filepath.ToSlash(n.ContextDir)) {
			return fmt.Errorf("node %s: context dir: %q is not absolute", n.ID(), n.ContextDir)
		}
		if len(n.Context) > 0 || len(n.ContextFiles) > 0 {
			return fmt.Errorf("node %s: context dir: set together with context files (a context directory is the whole context)", n.ID())
		}
	}
	for name, p := range n.ContextFiles {
		if err := checkContextName(name); err != nil {
			return fmt.Errorf("node %s: context files: %w", n.ID(), err)
		}
		if _, dup := n.Context[name]; dup {
			return fmt.Errorf("node %s: context files: %q is also an in-memory context file", n.ID(), name)
		}
		if !path.IsAbs(p) {
			return fmt.Errorf("node %s: context files: %q: path %q is not absolute", n.ID(), name, p)
		}
	}
	return nil
}

func checkContextName(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == "." || strings.HasPrefix(name, "../") || name == ".." {
		return fmt.Errorf("file name %q must be a clean relative path", name)
	}
	if strings.ContainsAny(name, "*?[\\") {
		return fmt.Errorf("file name %q must not contain pattern characters", name)
	}
	return nil
}

// SpecKeys returns, by node ID, the spec key the build records for each
// node (Report.Records' SpecKey): the node's own SpecKey, else the key of
// its build inputs (no image bound to a parent). The nightly compares it
// with the ledger's to rebuild what changed (ci.FindExisting).
func SpecKeys(nodes []*graph.Node) map[string]string {
	keys := inputKeys(nodes, nil)
	for _, n := range nodes {
		if n.SpecKey != "" {
			keys[n.ID()] = n.SpecKey
		}
	}
	return keys
}

// inputKeys derives, for every node, a key of its build inputs: platform,
// Dockerfile, in-memory context (names and bytes), context files (names,
// sizes and modification times, so a 200 MB tarball is not read) and the
// keys of its parents, or the image bound to a parent (given). Equal keys
// mean BuildKit would see the same inputs.
func inputKeys(nodes []*graph.Node, given map[string]string) map[string]string {
	byID := make(map[string]*graph.Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID()] = n
	}
	keys := make(map[string]string, len(nodes))
	var key func(n *graph.Node, depth int) string
	key = func(n *graph.Node, depth int) string {
		if k, ok := keys[n.ID()]; ok {
			return k
		}
		h := sha256.New()
		field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
		field(n.Platform.String())
		field(string(n.Dockerfile))
		names := slices.Sorted(maps.Keys(n.Context))
		for _, name := range names {
			field(name)
			field(string(n.Context[name]))
		}
		names = names[:0]
		for name := range n.ContextFiles {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			field(name)
			// A file by its size and time (the rootfs tarballs: large,
			// rewritten only when made again); a directory by its tree's
			// content, whose own time says nothing of what it holds (the
			// repair scenario's two nights' wheels directories, written
			// in the same instant, keyed alike).
			if fi, err := os.Stat(n.ContextFiles[name]); err == nil && fi.IsDir() {
				if fp, err := fingerprintTree(n.ContextFiles[name]); err == nil {
					field("tree " + fp)
				}
			} else if err == nil {
				field(fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano()))
			}
		}
		if n.ContextDir != "" {
			field("dir " + n.ContextDir)
			if fp, err := fingerprintTree(n.ContextDir); err == nil {
				field(fp)
			}
		}
		for _, pk := range n.Parents {
			field(pk)
			if ref, ok := givenRef(given, pk); ok {
				field("image " + ref)
				continue
			}
			if p, ok := byID[pk+"@"+n.Platform.String()]; ok && depth < len(nodes) {
				field(key(p, depth+1))
			}
		}
		k := "sha256:" + hex.EncodeToString(h.Sum(nil))
		keys[n.ID()] = k
		return k
	}
	for _, n := range nodes {
		key(n, 0)
	}
	return keys
}

// SpecKeysBound is SpecKeys for a build that binds images to parent keys
// (Options.Images, `build --build-context KEY=docker-image://REF`): the key
// of a node whose parent is bound covers the bound reference instead of the
// parent's inputs, as Report.Records then records it. The nightly computes
// the keys its instance shards will record on the env images it reuses.
func SpecKeysBound(nodes []*graph.Node, images map[string]string) (map[string]string, error) {
	given, err := givenImages(images)
	if err != nil {
		return nil, err
	}
	keys := inputKeys(nodes, given)
	for _, n := range nodes {
		if n.SpecKey != "" {
			keys[n.ID()] = n.SpecKey
		}
	}
	return keys, nil
}
