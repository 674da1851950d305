// Package manifests is the one place that names swebuild's published images
// and assembles their multi-arch indexes.
//
// # Naming scheme
//
// Given a repository prefix REPO (registry host plus optional namespace, e.g.
// "127.0.0.1:5000/swebench" or "ghcr.io/org"), instance id ID and arch
// x86_64 or arm64:
//
//	per-arch image  REPO/sweb.eval.x86_64.<id>   REPO/sweb.eval.arm64.<id>
//	multi-arch      REPO/sweb.eval.<id>
//
// where <id> is the instance id lower-cased with "__" replaced by "_1776_",
// exactly as upstream SWE-bench v4.1.0 names namespaced instance images (for
// example "django__django-11099" -> "sweb.eval.x86_64.django_1776_django-11099").
// Docker Hub rejects "__" in repository names; Namer.KeepDoubleUnderscore
// keeps it for registries that accept it.
//
// The per-arch names are the ones the upstream harness pulls. The multi-arch
// repository holds the same per-arch manifests (by digest) and one OCI image
// index per instance listing linux/amd64 and linux/arm64, or linux/amd64
// alone for x86-only instances.
//
// Every name carries two tags: "latest" and a content key tag "k-<12 hex>",
// the first 12 hex digits of sha256 over the build inputs (ContentTag), so a
// changed spec or patch always gets a new tag and never hides behind an old
// one. For a per-arch image the key is that image's spec key; for the index it
// covers every platform's spec key.
//
// Index annotations (AnnotationInstanceID ...) record the instance id, base
// commit, spec key and the swebuild version; each child descriptor carries
// its platform and spec key.
package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/manifests/naming"
)

// LatestTag is the moving tag written next to every content key tag.
const LatestTag = naming.LatestTag

// Namer names images under one repository prefix.
type Namer struct {
	// Repo is the prefix: registry host and optional namespace.
	Repo string
	// KeepDoubleUnderscore disables the "__" -> "_1776_" replacement.
	KeepDoubleUnderscore bool
}

// NameID is an instance id as it appears in image names.
func (n Namer) NameID(instanceID string) string {
	return naming.NameID(instanceID, n.KeepDoubleUnderscore)
}

// ArchRepo is the upstream-compatible per-arch repository,
// REPO/sweb.eval.<arch>.<id>.
func (n Namer) ArchRepo(arch, instanceID string) string {
	return naming.ArchRepo(n.Repo, arch, instanceID, n.KeepDoubleUnderscore)
}

// IndexRepo is the multi-arch repository, REPO/sweb.eval.<id>.
func (n Namer) IndexRepo(instanceID string) string {
	return naming.IndexRepo(n.Repo, instanceID, n.KeepDoubleUnderscore)
}

// MaxNameIDLen is the longest an instance id may be in its image-name form
// (see naming.MaxNameIDLen).
const MaxNameIDLen = naming.MaxNameIDLen

// IDError says why an instance id cannot name images.
type IDError = naming.IDError

// ValidateID returns an *IDError when instanceID cannot be a part of the
// image names this module gives it (see naming.ValidateID), or nil.
func ValidateID(instanceID string) error { return naming.ValidateID(instanceID) }

// Collision is an instance id whose images would get the same names as an
// earlier id's: ids differing only in case, or in "__" against "_1776_".
type Collision = naming.Collision

// Collisions returns, in order, every id of ids that maps to the same
// NameID as an earlier one (the earliest), so that one name would hold two
// instances' images. An id given twice collides with itself.
func (n Namer) Collisions(ids []string) []Collision {
	return naming.Collisions(ids, n.KeepDoubleUnderscore)
}

// Describe says what is wrong with c, naming both ids.
func (n Namer) Describe(ids []string, c Collision) string {
	a, b := ids[c.First], ids[c.Second]
	if a == b {
		return fmt.Sprintf("instance id %q appears twice", a)
	}
	return fmt.Sprintf("instance ids %q and %q get the same image names (sweb.eval.%s and sweb.eval.<arch>.%s)", a, b, c.NameID, c.NameID)
}

// CheckCollisions returns an error naming both ids of every collision in
// ids (see Collisions), or nil when every id gets names of its own. Run it
// before anything is pushed.
func (n Namer) CheckCollisions(ids []string) error {
	cs := n.Collisions(ids)
	if len(cs) == 0 {
		return nil
	}
	msgs := make([]string, len(cs))
	for i, c := range cs {
		msgs[i] = n.Describe(ids, c)
	}
	if len(msgs) == 1 {
		return fmt.Errorf("image name collision: %s", msgs[0])
	}
	return fmt.Errorf("%d image name collisions:\n%s", len(msgs), strings.Join(msgs, "\n"))
}

// ContentTag returns "k-" + the first 12 hex digits of sha256 over the given
// keys (sorted, newline-terminated, so the order of platforms does not matter).
func ContentTag(keys ...string) string {
	ks := append([]string(nil), keys...)
	sort.Strings(ks)
	h := sha256.New()
	for _, k := range ks {
		h.Write([]byte(k))
		h.Write([]byte{'\n'})
	}
	return "k-" + hex.EncodeToString(h.Sum(nil))[:12]
}
