// Package graph is the image graph's one node type: what rendering produces
// for an instance and platform (base, env and instance images), what the
// plan groups and prints, and what the builder solves. It holds data only,
// no I/O: render fills Kind, Key, Parents, Platform, Dockerfile, Context and
// External; plan adds Instances; pipeline finds External on disk
// (ContextFiles), gives each instance its own node (InstanceID, BaseCommit)
// and marks X86Only; a task repo's flat Dockerfile node has a ContextDir
// instead.
package graph

import (
	"encoding/json"

	"github.com/swebuild/swebuild/core"
)

// Kind is the layer of the image graph.
type Kind string

// Node kinds.
const (
	KindBase     Kind = "base"
	KindEnv      Kind = "env"
	KindInstance Kind = "instance"
)

// Node is one image to build for one platform.
type Node struct {
	// Kind is base, env or instance.
	Kind Kind
	// Key is the image key the Dockerfiles of children name in FROM, e.g.
	// "sweb.env.py.x86_64.0123abcd:latest". Key and Platform identify a node.
	Key string
	// Platform is linux/amd64 or linux/arm64.
	Platform core.Platform
	// Parents are the keys (same platform) this node's Dockerfile builds
	// FROM; a rendered node has at most one.
	Parents []string
	// Instances are the instance ids using this node in a plan (sorted; one
	// for an instance node unless two ids share its key).
	Instances []string
	// InstanceID is the one instance an instance node builds, BaseCommit
	// its base commit (optional).
	InstanceID string
	BaseCommit string
	// SpecKey identifies the build inputs for publish (manifests.ContentTag);
	// empty: the builder derives one from the Dockerfile, the context and the
	// parents' keys.
	SpecKey string
	// X86Only marks an instance (or an env/base only used by such instances)
	// that must never get an arm64 image, whatever the flags say.
	X86Only bool
	// Dockerfile is the Dockerfile text.
	Dockerfile []byte
	// Context holds small in-memory context files (name -> content), e.g.
	// setup_env.sh. Names are slash-separated paths relative to the context.
	Context map[string][]byte
	// External names the big context files a profile's Dockerfile copies
	// (e.g. rootfs-amd64.tar), to be found on disk and set in ContextFiles.
	External []string
	// ContextFiles holds big context files by path on disk (name -> path),
	// e.g. "rootfs-amd64.tar" -> "/root/.cache/swebuild/rootfs/rootfs-amd64.tar".
	// Only these files (or directories, with their contents) are sent to
	// BuildKit, never the rest of the directory they are in.
	ContextFiles map[string]string
	// ContextDir, when set, is a directory on disk sent whole as the build
	// context: a task repo's task directory, which its flat Dockerfile may
	// COPY from. Nothing outside it is sent. Absolute; exclusive with
	// Context and ContextFiles. Before the solve every COPY/ADD source of
	// the Dockerfile (all but COPY --from) must exist in it. Images bound to
	// parent keys are offered to its Dockerfile as named contexts.
	ContextDir string
	// Inventory, when set on an env or instance node, names the listing
	// commands run in the solved image and the identity written in its
	// SBOM. Not part of the node's spec key.
	Inventory *Inventory
	// Pins are the ids of the pin rules that changed the recipe this node
	// was rendered from (render.Result.Pins), written to its record
	// (core.Image.Pins). Not part of the spec key (the rendered bytes are).
	Pins []string
}

// ID is the node's unique identity: key and platform.
func (n *Node) ID() string { return n.Key + "@" + n.Platform.String() }

// Arch is the upstream arch name of the node's platform: x86_64 or arm64.
func (n *Node) Arch() string { return n.Platform.Arch() }

// Parent is the first parent key, "" for none (a base).
func (n *Node) Parent() string {
	if len(n.Parents) == 0 {
		return ""
	}
	return n.Parents[0]
}

// planNode is a node as `swebuild plan --format json` writes it.
type planNode struct {
	Kind      Kind          `json:"kind"`
	Key       string        `json:"key"`
	Parent    string        `json:"parent,omitempty"`
	Platform  core.Platform `json:"platform"`
	Instances []string      `json:"instances"`
}

// MarshalJSON writes the node as the plan shows it: kind, key, parent,
// platform and instances (what is built from it stays out).
func (n Node) MarshalJSON() ([]byte, error) {
	return json.Marshal(planNode{Kind: n.Kind, Key: n.Key, Parent: n.Parent(), Platform: n.Platform, Instances: n.Instances})
}

// Inventory is what a node's SBOM is made of: the listing commands, and the
// identity of the instances the image serves.
type Inventory struct {
	Commands []ListingCommand
	// Repo and Version are the spec identity (empty for an env serving
	// several).
	Repo, Version string
	// InstanceIDs are the node's instance, or every instance an env serves.
	InstanceIDs []string
}

// ListingCommand is one listing: Run, a bash command line, prints a listing
// of Format (sbom.FormatPipFreeze, ...) on its standard output.
type ListingCommand struct {
	Format string
	Run    string
}
