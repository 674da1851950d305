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
)

// LatestTag is the moving tag written next to every content key tag.
const LatestTag = "latest"

// Arch names as upstream writes them in image keys.
const (
	ArchX86_64 = "x86_64"
	ArchArm64  = "arm64"
)

// Namer names images under one repository prefix.
type Namer struct {
	// Repo is the prefix: registry host and optional namespace.
	Repo string
	// KeepDoubleUnderscore disables the "__" -> "_1776_" replacement.
	KeepDoubleUnderscore bool
}

// NameID is an instance id as it appears in image names.
func (n Namer) NameID(instanceID string) string {
	id := strings.ToLower(instanceID)
	if !n.KeepDoubleUnderscore {
		id = strings.ReplaceAll(id, "__", "_1776_")
	}
	return id
}

func (n Namer) prefix() string {
	return strings.TrimSuffix(n.Repo, "/")
}

// ArchRepo is the upstream-compatible per-arch repository,
// REPO/sweb.eval.<arch>.<id>.
func (n Namer) ArchRepo(arch, instanceID string) string {
	return fmt.Sprintf("%s/sweb.eval.%s.%s", n.prefix(), arch, n.NameID(instanceID))
}

// IndexRepo is the multi-arch repository, REPO/sweb.eval.<id>.
func (n Namer) IndexRepo(instanceID string) string {
	return fmt.Sprintf("%s/sweb.eval.%s", n.prefix(), n.NameID(instanceID))
}

// MaxNameIDLen is the longest an instance id may be in its image-name form
// (NameID: lower-cased, "__" as "_1776_"). Real ids are at most 34 bytes (every
// SWE-bench split, Multilingual and Multimodal). With 128 the longest
// published repository path, "NAMESPACE/sweb.eval.x86_64.<id>", needs 145
// bytes and leaves 110 for the namespace under the 255 bytes the reference
// grammar allows; and as a directory name (render and verify output, an id
// plus a suffix) it leaves room under the 255-byte file-name limit.
const MaxNameIDLen = 128

// IDError says why an instance id cannot name images.
type IDError struct {
	ID     string
	Reason string // without the id, e.g. "ends with '-' (...)"
}

func (e *IDError) Error() string { return fmt.Sprintf("instance id %q %s", e.ID, e.Reason) }

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isSep(c byte) bool { return c == '.' || c == '_' || c == '-' }

// ValidateID returns an *IDError when instanceID cannot be a part of the
// image names this module gives it (with and without the "__" mapping), or
// nil. The id must be made of [A-Za-z0-9._-]; lower-cased, it must be a path
// component of the OCI distribution spec's grammar,
// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*: it starts and ends with a letter or
// digit and between letters and digits holds one '.', one '_', "__" or a run
// of '-'; and its NameID is at most MaxNameIDLen bytes. (A test holds this
// hand-written check to distribution/reference, the registry's own parser,
// over every short id; the check runs for every record a dataset loads, and
// the parser's regular expressions would cost more than the rest of the
// validation.)
func ValidateID(instanceID string) error {
	bad := func(format string, args ...any) error {
		return &IDError{ID: instanceID, Reason: fmt.Sprintf(format, args...)}
	}
	if instanceID == "" {
		return bad("is empty")
	}
	lower := strings.ToLower(instanceID)
	for i := 0; i < len(lower); i++ {
		if c := lower[i]; !isAlnum(c) && !isSep(c) {
			return bad("has a character outside [A-Za-z0-9._-] at byte %d", i)
		}
	}
	for i := 0; i < len(lower); {
		if !isSep(lower[i]) {
			i++
			continue
		}
		j := i
		for j < len(lower) && isSep(lower[j]) {
			j++
		}
		run := lower[i:j]
		switch {
		case i == 0:
			return bad("starts with %q (image names start with a letter or digit)", lower[0])
		case j == len(lower):
			return bad("ends with %q (image names end with a letter or digit)", lower[j-1])
		case strings.Contains(run, ".."):
			return bad("contains \"..\"")
		case run == "." || run == "_" || run == "__" || strings.Trim(run, "-") == "":
		default:
			return bad("has %q at byte %d (image names allow one '.', one '_', \"__\" or a run of '-' between letters and digits)", run, i)
		}
		i = j
	}
	// The length of NameID without building it: each "__" (counted left to
	// right, as strings.ReplaceAll replaces) gains 4 bytes.
	if n := len(lower) + 4*strings.Count(lower, "__"); n > MaxNameIDLen {
		return bad("is %d bytes in image names (lower-cased, \"__\" as \"_1776_\"), over the limit of %d", n, MaxNameIDLen)
	}
	return nil
}

// Collision is an instance id whose images would get the same names as an
// earlier id's: ids differing only in case, or in "__" against "_1776_".
type Collision struct {
	First, Second int    // indexes into the ids, First < Second
	NameID        string // the name both map to
}

// Collisions returns, in order, every id of ids that maps to the same
// NameID as an earlier one (the earliest), so that one name would hold two
// instances' images. An id given twice collides with itself.
func (n Namer) Collisions(ids []string) []Collision {
	first := make(map[string]int, len(ids))
	var out []Collision
	for i, id := range ids {
		name := n.NameID(id)
		if j, ok := first[name]; ok {
			out = append(out, Collision{First: j, Second: i, NameID: name})
			continue
		}
		first[name] = i
	}
	return out
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

// ArchForPlatform maps an OCI platform to the upstream arch name.
func ArchForPlatform(platform string) (string, error) {
	switch platform {
	case "linux/amd64":
		return ArchX86_64, nil
	case "linux/arm64", "linux/arm64/v8":
		return ArchArm64, nil
	}
	return "", fmt.Errorf("unsupported platform %q (want linux/amd64 or linux/arm64)", platform)
}

// PlatformForArch maps an upstream arch name to its OCI platform.
func PlatformForArch(arch string) (string, error) {
	switch arch {
	case ArchX86_64:
		return "linux/amd64", nil
	case ArchArm64:
		return "linux/arm64", nil
	}
	return "", fmt.Errorf("unsupported arch %q (want x86_64 or arm64)", arch)
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
