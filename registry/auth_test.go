package registry

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestEnvKeychain(t *testing.T) {
	const env = "SWEBUILD_TEST_REGISTRY_AUTH"
	for _, tc := range []struct {
		val, registry, user, pass string
		wantErr                   bool
	}{
		{"", "ghcr.io", "", "", false},
		{"bob:pa:ss", "ghcr.io", "bob", "pa:ss", false},
		{"ghcr.io=bob:x,127.0.0.1:5000=al:y", "127.0.0.1:5000", "al", "y", false},
		{"ghcr.io=bob:x", "docker.io", "", "", false},
		{"nocolon-secretvalue", "", "", "", true},
		{"ghcr.io=secretvalue", "", "", "", true},
	} {
		t.Setenv(env, tc.val)
		kc, err := EnvKeychain(env)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q accepted", tc.val)
			} else if strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("error shows the value: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.val, err)
		}
		reg, _ := name.NewRegistry(tc.registry)
		a, err := kc.Resolve(reg)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := authn.Authorization(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != tc.user || cfg.Password != tc.pass {
			t.Errorf("%q for %s: got %q/%q", tc.val, tc.registry, cfg.Username, cfg.Password)
		}
	}
}
