// Package naming holds the rules by which package manifests turns instance
// ids into image names, with no registry library linked, so that pure
// stages (the dataset loader, which grading links) check ids by the very
// rules the names are made with. Elsewhere use manifests, which re-exports
// them (Namer.NameID, ValidateID, Namer.Collisions).
package naming

import (
	"fmt"
	"strings"
)

// NameID is an instance id as it appears in image names: lower-cased and,
// unless keepDoubleUnderscore, with "__" replaced by "_1776_" as upstream
// SWE-bench does for Docker Hub.
func NameID(instanceID string, keepDoubleUnderscore bool) string {
	id := strings.ToLower(instanceID)
	if !keepDoubleUnderscore {
		id = NoDoubleUnderscore(id)
	}
	return id
}

// NoDoubleUnderscore is s with every "__" written "_1776_", upstream's
// spelling of a name for registries that forbid "__" (Docker Hub): the one
// place that rule is written.
func NoDoubleUnderscore(s string) string {
	return strings.ReplaceAll(s, "__", "_1776_")
}

// LatestTag is the moving tag written next to every content key tag.
const LatestTag = "latest"

// ArchRepo is the upstream-compatible per-arch repository of an instance
// under prefix, PREFIX/sweb.eval.<arch>.<id> (arch: x86_64 or arm64).
func ArchRepo(prefix, arch, instanceID string, keepDoubleUnderscore bool) string {
	return fmt.Sprintf("%s/sweb.eval.%s.%s", strings.TrimSuffix(prefix, "/"), arch, NameID(instanceID, keepDoubleUnderscore))
}

// IndexRepo is the multi-arch repository of an instance under prefix,
// PREFIX/sweb.eval.<id>.
func IndexRepo(prefix, instanceID string, keepDoubleUnderscore bool) string {
	return fmt.Sprintf("%s/sweb.eval.%s", strings.TrimSuffix(prefix, "/"), NameID(instanceID, keepDoubleUnderscore))
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
func Collisions(ids []string, keepDoubleUnderscore bool) []Collision {
	first := make(map[string]int, len(ids))
	var out []Collision
	for i, id := range ids {
		name := NameID(id, keepDoubleUnderscore)
		if j, ok := first[name]; ok {
			out = append(out, Collision{First: j, Second: i, NameID: name})
			continue
		}
		first[name] = i
	}
	return out
}
