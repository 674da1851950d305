package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/swebuild/swebuild/internal/regtest"
)

// go-containerregistry through the same source against a real registry
// with htpasswd: the Docker config's login works; none, or a wrong one, is
// an *AuthError naming the host and where the credential came from.
func TestClientLoginThroughDockerConfig(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{User: "alice", Password: "right"})
	ctx := context.Background()
	ref, err := name.ParseReference(reg.Host+"/x/y:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		label, config, want string
	}{
		{"login", `{"auths": {"` + reg.Host + `": {"auth": "` + basicAuth("alice", "right") + `"}}}`, ""},
		{"refused", `{"auths": {"` + reg.Host + `": {"auth": "` + basicAuth("alice", "wrong") + `"}}}`, "credential for " + reg.Host + " from "},
		{"none", `{"auths": {"127.0.0.1:1": {"auth": "` + basicAuth("alice", "right") + `"}}}`, "no credential found for " + reg.Host},
	} {
		dir := writeDockerConfig(t, tc.config)
		creds, err := NewCredentials(CredentialOptions{DockerConfigDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Keychain: creds})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Head(ctx, ref) // 404 (nil, nil) once logged in
		if tc.want == "" {
			if err != nil || d != nil {
				t.Errorf("%s: %v, %v", tc.label, d, err)
			}
			continue
		}
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Host != reg.Host || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.label, err)
		}
		if tc.label == "refused" && !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error does not name %s: %v", tc.label, dir, err)
		}
		if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "right") {
			t.Errorf("%s: error shows the password: %v", tc.label, err)
		}
	}
}
