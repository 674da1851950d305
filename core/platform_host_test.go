package core

import "testing"

// TestGOARCHPlatform: the host platform comes from runtime.GOARCH; only the
// two Go architectures swebuild builds for map to a platform.
func TestGOARCHPlatform(t *testing.T) {
	for _, tc := range []struct {
		goarch string
		want   Platform
		ok     bool
	}{
		{"amd64", AMD64, true},
		{"arm64", ARM64, true},
		{"386", Platform{}, false},
		{"arm", Platform{}, false},
		{"riscv64", Platform{}, false},
		{"x86_64", Platform{}, false}, // an upstream arch name, not a GOARCH
		{"", Platform{}, false},
	} {
		got, err := goarchPlatform(tc.goarch)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("goarchPlatform(%q) = %v, %v; want %v, ok %t", tc.goarch, got, err, tc.want, tc.ok)
		}
	}
}
