package spec

import "strings"

// platformPolicy decides the platforms of an instance: every instance gets
// linux/amd64; linux/arm64 too unless the id is in upstream's USE_X86 (dead
// code in v4.1.0, honoured here) or an override says otherwise.
type platformPolicy struct {
	x86Only   map[string]bool
	overrides map[string][]string
}

func newPlatformPolicy(useX86 []string) platformPolicy {
	p := platformPolicy{x86Only: make(map[string]bool, len(useX86)), overrides: map[string][]string{}}
	for _, id := range useX86 {
		p.x86Only[id] = true
	}
	return p
}

// Platforms returns the OCI platforms instanceID is built for, amd64 first.
// This is the one place that decision is made.
func (t *Tables) Platforms(instanceID string) []string {
	if o, ok := t.platforms.overrides[instanceID]; ok {
		return append([]string(nil), o...)
	}
	if t.platforms.x86Only[instanceID] {
		return []string{PlatformAMD64}
	}
	return []string{PlatformAMD64, PlatformARM64}
}

// X86Only reports whether instanceID gets no arm64 image.
func (t *Tables) X86Only(instanceID string) bool {
	for _, p := range t.Platforms(instanceID) {
		if p == PlatformARM64 {
			return false
		}
	}
	return true
}

// OverridePlatforms fixes the platforms of one instance (tests, fixtures),
// taking precedence over USE_X86. platforms must be OCI platform names.
func (t *Tables) OverridePlatforms(instanceID string, platforms []string) {
	if t.platforms.overrides == nil {
		t.platforms.overrides = map[string][]string{}
	}
	t.platforms.overrides[instanceID] = append([]string(nil), platforms...)
}

// ArchOf maps an OCI platform ("linux/amd64", "linux/arm64") or an upstream
// arch name to the upstream arch name used in image keys.
func ArchOf(platform string) (string, bool) {
	switch strings.TrimPrefix(platform, "linux/") {
	case "amd64", "x86_64":
		return ArchX86, true
	case "arm64", "arm64/v8", "aarch64":
		return ArchARM64, true
	}
	return "", false
}

// PlatformOf maps an upstream arch name to its OCI platform.
func PlatformOf(arch string) string {
	if arch == ArchARM64 {
		return PlatformARM64
	}
	return PlatformAMD64
}
