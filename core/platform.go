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
	"runtime"
	"strings"

	"github.com/containerd/platforms"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// Platform is an OCI platform swebuild builds for: linux/amd64 or
// linux/arm64, and nothing else. It is valid by construction: its only values
// are AMD64, ARM64 and the zero value, which means "no platform" (IsZero; an
// index record has none). Strings become a Platform only through
// ParsePlatform (any spelling) or UnmarshalText (the canonical form, what
// every file swebuild writes holds), at the doors: flags, files, JSON.
//
// A Platform is comparable, so it can be a map key; MarshalText writes the
// canonical form, so JSON, YAML and the record codec read and write the same
// bytes as the string they replace.
type Platform struct{ arch arch }

type arch uint8

const (
	noArch arch = iota
	archAMD64
	archARM64
)

// The platforms swebuild builds for.
var (
	AMD64 = Platform{archAMD64}
	ARM64 = Platform{archARM64}
)

// Upstream arch names, as SWE-bench writes them in image keys.
const (
	ArchX86_64 = "x86_64"
	ArchARM64  = "arm64"
)

// AllPlatforms returns every platform, amd64 first (the order of an index).
func AllPlatforms() []Platform { return []Platform{AMD64, ARM64} }

// HostPlatform is the platform of the machine swebuild runs on, from
// runtime.GOARCH: linux/amd64 or linux/arm64. On any other architecture it
// is an error (swebuild builds and runs images of those two only, and on
// such a host both would be emulated).
func HostPlatform() (Platform, error) { return goarchPlatform(runtime.GOARCH) }

// goarchPlatform is the platform of a Go architecture name (runtime.GOARCH).
func goarchPlatform(goarch string) (Platform, error) {
	switch goarch {
	case "amd64":
		return AMD64, nil
	case "arm64":
		return ARM64, nil
	}
	return Platform{}, fmt.Errorf("this host's architecture %q is neither amd64 nor arm64", goarch)
}

// ParsePlatform reads a platform or an arch name in any spelling
// containerd/platforms normalizes ("linux/amd64", "amd64", "x86_64",
// "linux/arm64/v8", "aarch64", ...) and returns the canonical Platform. Only
// linux/amd64 and linux/arm64 are accepted.
func ParsePlatform(s string) (Platform, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Platform{}, fmt.Errorf("empty platform (want linux/amd64 or linux/arm64)")
	}
	p, err := platforms.Parse(s)
	if err != nil {
		return Platform{}, fmt.Errorf("platform %q: %w", s, err)
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
	return Platform{}, fmt.Errorf("platform %q is not supported (want linux/amd64 or linux/arm64)", s)
}

// ParsePlatforms reads a list of platforms, each element possibly a
// comma-separated list (as --platform takes them); duplicates are dropped and
// the result is in AllPlatforms order.
func ParsePlatforms(vals []string) ([]Platform, error) {
	var list []Platform
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			p, err := ParsePlatform(s)
			if err != nil {
				return nil, err
			}
			list = append(list, p)
		}
	}
	return PlatformSet(list)
}

// PlatformSet returns the platforms of list once each, in AllPlatforms
// order; an empty list (or one of zero values only) is an error.
func PlatformSet(list []Platform) ([]Platform, error) {
	var out []Platform
	for _, p := range AllPlatforms() {
		for _, q := range list {
			if q == p {
				out = append(out, p)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform given (want linux/amd64 and/or linux/arm64)")
	}
	return out, nil
}

// String returns the canonical form, "linux/amd64" or "linux/arm64"; "" for
// the zero value.
func (p Platform) String() string {
	switch p.arch {
	case archAMD64:
		return "linux/amd64"
	case archARM64:
		return "linux/arm64"
	}
	return ""
}

// IsZero reports whether p is the zero value, "no platform".
func (p Platform) IsZero() bool { return p.arch == noArch }

// Compare orders platforms as AllPlatforms does (the zero value first): -1,
// 0 or +1.
func (p Platform) Compare(q Platform) int {
	switch {
	case p.arch < q.arch:
		return -1
	case p.arch > q.arch:
		return 1
	}
	return 0
}

// MarshalText writes the canonical form ("" for the zero value), so a
// Platform is written exactly as the string it stands for.
func (p Platform) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads the canonical form only ("linux/amd64" or
// "linux/arm64"; "" is the zero value). Anything else is a *PlatformError
// naming the value: files hold the canonical form, and a file that does not
// is damaged, not an alias to guess at.
func (p *Platform) UnmarshalText(b []byte) error {
	switch string(b) {
	case "":
		*p = Platform{}
	case "linux/amd64":
		*p = AMD64
	case "linux/arm64":
		*p = ARM64
	default:
		return &PlatformError{Value: string(b)}
	}
	return nil
}

// PlatformError is a platform value that is not linux/amd64 or linux/arm64.
type PlatformError struct{ Value string }

func (e *PlatformError) Error() string {
	return fmt.Sprintf("%q is not linux/amd64 or linux/arm64", e.Value)
}

// Arch is the upstream arch name used in image keys and names: "x86_64" or
// "arm64".
func (p Platform) Arch() string {
	switch p.arch {
	case archAMD64:
		return ArchX86_64
	case archARM64:
		return ArchARM64
	}
	return ""
}

// GOARCH is the OCI/Go architecture name ("amd64", "arm64"): BuildKit's
// TARGETARCH, Debian's architecture.
func (p Platform) GOARCH() string { return strings.TrimPrefix(p.String(), "linux/") }

// Dockerfile is how upstream SWE-bench v4.1.0 writes the platform in
// `FROM --platform=...` lines: "linux/x86_64" or "linux/arm64/v8".
func (p Platform) Dockerfile() string {
	switch p.arch {
	case archAMD64:
		return "linux/x86_64"
	case archARM64:
		return "linux/arm64/v8"
	}
	return ""
}

// OCI returns the platform as an OCI descriptor platform.
func (p Platform) OCI() ocispecs.Platform {
	return ocispecs.Platform{OS: "linux", Architecture: p.GOARCH()}
}

// Slug is a file- and job-name friendly form: "linux-amd64".
func (p Platform) Slug() string { return strings.ReplaceAll(p.String(), "/", "-") }
