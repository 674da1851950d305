package registry

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Credentials answer only the registry they were given for: an unscoped
// USER:PASSWORD is for the registry published to and nothing else (a
// metadata file naming another registry must not harvest it), scoped
// entries for their registry. Passwords may hold '=', ':' and ','.
func TestParseCredentials(t *testing.T) {
	const dest = "127.0.0.1:5000"
	type want struct{ registry, user, pass string }
	for _, tc := range []struct {
		text    string
		want    []want // registries that get credentials
		anon    []string
		wantErr string
	}{
		{text: "", anon: []string{dest, "ghcr.io"}},
		{text: "bob:pa:ss", want: []want{{dest, "bob", "pa:ss"}}, anon: []string{"ghcr.io", "10.0.0.1:5000", "127.0.0.1:5001"}},
		// base64 tokens end in '='.
		{text: "bob:dG9rZW4=", want: []want{{dest, "bob", "dG9rZW4="}}, anon: []string{"dG9rZW4"}},
		{text: "bob:a=b,c=d:e", want: []want{{dest, "bob", "a=b,c=d:e"}}},
		{text: "bob:1234=abc", want: []want{{dest, "bob", "1234=abc"}}},
		{text: "ghcr.io=bob:x,127.0.0.1:5000=al:y", want: []want{{"ghcr.io", "bob", "x"}, {dest, "al", "y"}}, anon: []string{"docker.io"}},
		// A comma not followed by REGISTRY= is part of the password.
		{text: "ghcr.io=bob:p,a,ss,localhost:5000=al:y=,z", want: []want{{"ghcr.io", "bob", "p,a,ss"}, {"localhost:5000", "al", "y=,z"}}},
		{text: "ghcr.io=bob:p,ss\n127.0.0.1:5000=al:q,r", want: []want{{"ghcr.io", "bob", "p,ss"}, {dest, "al", "q,r"}}},
		{text: "127.0.0.1:5000=u:tok=en,x==", want: []want{{dest, "u", "tok=en,x=="}}},
		{text: "127.0.0.1:5000=u:a,b=c:d", want: []want{{dest, "u", "a"}, {"b", "c", "d"}}},
		{text: "docker.io=bob:x", want: []want{{"index.docker.io", "bob", "x"}}},
		{text: "nocolon-secretvalue", wantErr: "want USER:PASSWORD"},
		{text: "ghcr.io=secretvalue", wantErr: "entry 1"},
		{text: "ghcr.io=bob:x,ghcr.io=al:secretvalue", wantErr: "given twice"},
	} {
		kc, err := ParseCredentials(tc.text, dest)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.text, err, tc.wantErr)
			} else if strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("error shows the value: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		for _, w := range tc.want {
			cfg := resolve(t, kc, w.registry)
			if cfg.Username != w.user || cfg.Password != w.pass {
				t.Errorf("%q for %s: got %q/%q, want %q/%q", tc.text, w.registry, cfg.Username, cfg.Password, w.user, w.pass)
			}
		}
		for _, r := range tc.anon {
			if cfg := resolve(t, kc, r); cfg.Username != "" || cfg.Password != "" {
				t.Errorf("%q: registry %s got credentials %q", tc.text, r, cfg.Username)
			}
		}
	}
	if _, err := ParseCredentials("bob:x", ""); err == nil {
		t.Error("unscoped credentials accepted with no registry to be for")
	}
}

func resolve(t *testing.T, kc authn.Keychain, registry string) *authn.AuthConfig {
	t.Helper()
	reg, err := name.NewRegistry(registry)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kc.Resolve(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := authn.Authorization(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
