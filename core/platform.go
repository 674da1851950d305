// Package core holds the types every swebuild stage speaks: Platform (the
// only place an upstream arch name such as "x86_64" is mapped to an OCI
// platform such as "linux/amd64"), Instance (one SWE-bench task record, what
// the dataset loaders and the task-repo reader return and what rendering,
// grading and verification take) and Image (one built, verified or published
// image), with the one codec that reads and writes Image records: the build
// metadata file and the publish ledger are both JSON lines of Image.
//
// The package has no dependencies beyond the standard library and the OCI
// image-spec types, so every stage, including pure ones such as grading and
// rendering, can import it.
package core

import (
	"fmt"
	"strings"

	"github.com/containerd/platforms"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// Platform is an OCI platform swebuild builds for, in canonical form:
// "linux/amd64" or "linux/arm64". The zero value is not a valid platform.
type Platform string

// The platforms swebuild builds for.
const (
	AMD64 Platform = "linux/amd64"
	ARM64 Platform = "linux/arm64"
)

// Upstream arch names, as SWE-bench writes them in image keys.
const (
	ArchX86_64 = "x86_64"
	ArchARM64  = "arm64"
)

// AllPlatforms returns every platform, amd64 first (the order of an index).
func AllPlatforms() []Platform { return []Platform{AMD64, ARM64} }

// ParsePlatform reads a platform or an arch name in any spelling
// containerd/platforms normalizes ("linux/amd64", "amd64", "x86_64",
// "linux/arm64/v8", "aarch64", ...) and returns the canonical Platform. Only
// linux/amd64 and linux/arm64 are accepted.
func ParsePlatform(s string) (Platform, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("empty platform (want linux/amd64 or linux/arm64)")
	}
	p, err := platforms.Parse(s)
	if err != nil {
		return "", fmt.Errorf("platform %q: %w", s, err)
	}
	p = platforms.Normalize(p)
	if p.OS == "linux" {
		switch {
		case p.Architecture == "amd64" && p.Variant == "":
			return AMD64, nil
		case p.Architecture == "arm64" && (p.Variant == "" || p.Variant == "v8"):
			return ARM64, nil
		}
	}
	return "", fmt.Errorf("platform %q is not supported (want linux/amd64 or linux/arm64)", s)
}

// ParsePlatforms reads a list of platforms, each element possibly a
// comma-separated list (as --platform takes them); duplicates are dropped and
// the result is in AllPlatforms order.
func ParsePlatforms(vals []string) ([]Platform, error) {
	seen := map[Platform]bool{}
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			p, err := ParsePlatform(s)
			if err != nil {
				return nil, err
			}
			seen[p] = true
		}
	}
	var out []Platform
	for _, p := range AllPlatforms() {
		if seen[p] {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform given (want linux/amd64 and/or linux/arm64)")
	}
	return out, nil
}

// String returns the canonical form, "linux/amd64" or "linux/arm64".
func (p Platform) String() string { return string(p) }

// Valid reports whether p is one of the canonical platforms.
func (p Platform) Valid() bool { return p == AMD64 || p == ARM64 }

// Arch is the upstream arch name used in image keys and names: "x86_64" or
// "arm64".
func (p Platform) Arch() string {
	switch p {
	case AMD64:
		return ArchX86_64
	case ARM64:
		return ArchARM64
	}
	return ""
}

// GOARCH is the OCI/Go architecture name ("amd64", "arm64"): BuildKit's
// TARGETARCH, Debian's architecture.
func (p Platform) GOARCH() string { return strings.TrimPrefix(string(p), "linux/") }

// Dockerfile is how upstream SWE-bench v4.1.0 writes the platform in
// `FROM --platform=...` lines: "linux/x86_64" or "linux/arm64/v8".
func (p Platform) Dockerfile() string {
	switch p {
	case AMD64:
		return "linux/x86_64"
	case ARM64:
		return "linux/arm64/v8"
	}
	return ""
}

// OCI returns the platform as an OCI descriptor platform.
func (p Platform) OCI() ocispecs.Platform {
	return ocispecs.Platform{OS: "linux", Architecture: p.GOARCH()}
}

// Slug is a file- and job-name friendly form: "linux-amd64".
func (p Platform) Slug() string { return strings.ReplaceAll(string(p), "/", "-") }
