package registry

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeDockerConfig writes DIR/config.json as `docker login` does and
// returns DIR.
func writeDockerConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// fakeHelper puts docker-credential-NAME on PATH: it answers `get` for
// server with user/secret and "credentials not found" otherwise, as the
// helper protocol says.
func fakeHelper(t *testing.T, helper, server, user, secret string) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
[ "$1" = get ] || exit 1
read -r server
if [ "$server" = "` + server + `" ]; then
  printf '{"ServerURL":"%s","Username":"` + user + `","Secret":"` + secret + `"}\n' "$server"
else
  echo "credentials not found in native keychain"; exit 1
fi
`
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+helper), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// The Docker config as docker login and docker/login-action write it: each
// host gets its own entry (auths, then a per-host helper, then the store),
// the scoped text comes first, and every credential names its source.
func TestCredentialsDockerConfig(t *testing.T) {
	fakeHelper(t, "fake", "ghcr.io", "helperuser", "helpersecret")
	fakeHelper(t, "store", "https://index.docker.io/v1/", "<token>", "refresh-token")
	dir := writeDockerConfig(t, `{
  "auths": {
    "127.0.0.1:5001": {"auth": "`+basicAuth("alice", "s3cr:et")+`"},
    "https://quay.io": {"auth": "`+basicAuth("qu", "qp")+`"},
    "tok.example": {"registrytoken": "bearer-xyz"},
    "ghcr.io": {"auth": "`+basicAuth("notused", "notused")+`"}
  },
  "credHelpers": {"ghcr.io": "fake"},
  "credsStore": "store"
}`)
	file := filepath.Join(dir, "config.json")
	c, err := NewCredentials(CredentialOptions{
		Text: "10.1.2.3:5000=envuser:envpass", TextSource: "$SWEBUILD_REGISTRY_AUTH",
		DockerConfigDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want Credential
	}{
		{"10.1.2.3:5000", Credential{Username: "envuser", Password: "envpass", Source: "$SWEBUILD_REGISTRY_AUTH"}},
		// credsStore wins over auths for hosts with no credHelpers entry,
		// as in the docker CLI; this store holds only Docker Hub.
		{"127.0.0.1:5001", Credential{}},
		{"ghcr.io", Credential{Username: "helperuser", Password: "helpersecret", Source: "docker-credential-fake (credHelpers in " + file + ")"}},
		{"docker.io", Credential{IdentityToken: "refresh-token", Source: "docker-credential-store (credsStore in " + file + ")"}},
		{"registry-1.docker.io", Credential{IdentityToken: "refresh-token", Source: "docker-credential-store (credsStore in " + file + ")"}},
		{"127.0.0.1:5002", Credential{}},
	} {
		got, err := c.Lookup(tc.host)
		if err != nil {
			t.Errorf("%s: %v", tc.host, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.host, got, tc.want)
		}
	}

	// Without a credsStore, auths answers, with URL keys too.
	dir2 := writeDockerConfig(t, `{"auths": {
    "127.0.0.1:5001": {"auth": "`+basicAuth("alice", "s3cr:et")+`"},
    "https://quay.io": {"auth": "`+basicAuth("qu", "qp")+`"},
    "tok.example": {"registrytoken": "bearer-xyz"}}}`)
	file2 := filepath.Join(dir2, "config.json")
	c2, err := NewCredentials(CredentialOptions{DockerConfigDir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want Credential
	}{
		{"127.0.0.1:5001", Credential{Username: "alice", Password: "s3cr:et", Source: file2 + " (auths)"}},
		{"quay.io", Credential{Username: "qu", Password: "qp", Source: file2 + " (auths)"}},
		{"tok.example", Credential{RegistryToken: "bearer-xyz", Source: file2 + " (auths)"}},
		{"127.0.0.1:5000", Credential{}},
		{"127.0.0.1", Credential{}},
		{"ghcr.io", Credential{}},
	} {
		got, err := c2.Lookup(tc.host)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.host, got, err, tc.want)
		}
	}
	if d := c2.Describe("127.0.0.1:5001"); d != "credential for 127.0.0.1:5001 from "+file2+" (auths)" {
		t.Errorf("Describe: %q", d)
	}
	if d := c2.Describe("127.0.0.1:5000"); d != "no credential found for 127.0.0.1:5000 (looked in the credentials text and "+file2+")" {
		t.Errorf("Describe: %q", d)
	}
	if d := c.Describe("127.0.0.1:5002"); !strings.Contains(d, "$SWEBUILD_REGISTRY_AUTH and "+file) {
		t.Errorf("Describe: %q", d)
	}
}

// A helper that fails (not "not found") is an error naming the helper and
// the host; a config file that does not parse is an error naming it; a
// missing one means no credentials.
func TestCredentialsErrors(t *testing.T) {
	dir := writeDockerConfig(t, `{"credHelpers": {"ghcr.io": "absent-helper-xyz"}}`)
	c, err := NewCredentials(CredentialOptions{DockerConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup("ghcr.io"); err == nil || !strings.Contains(err.Error(), "docker-credential-absent-helper-xyz") || !strings.Contains(err.Error(), "ghcr.io") {
		t.Errorf("failing helper: %v", err)
	}
	bad := writeDockerConfig(t, `{"auths": `)
	if _, err := NewCredentials(CredentialOptions{DockerConfigDir: bad}); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, "config.json")) {
		t.Errorf("malformed config: %v", err)
	}
	c, err = NewCredentials(CredentialOptions{DockerConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Lookup("ghcr.io"); err != nil || !got.Empty() {
		t.Errorf("no config file: %+v, %v", got, err)
	}
	if _, err := NewCredentials(CredentialOptions{Text: "secretvalue", TextSource: "$X"}); err == nil || !strings.HasPrefix(err.Error(), "$X: ") || strings.Contains(err.Error(), "secretvalue") {
		t.Errorf("bad text: %v", err)
	}
}

func TestIsAuthFailure(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"failed to push 127.0.0.1:5001/x: failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized", true},
		{"unexpected status from HEAD request to http://127.0.0.1:5001/v2/x/blobs/sha256:1: 401 Unauthorized", true},
		{"GET http://h/v2/: UNAUTHORIZED: authentication required", true},
		{"connection refused", false},
		{"pull access DENIED for x", true},
	} {
		if got := IsAuthFailure(errors.New(tc.err)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.err, got, tc.want)
		}
	}
	if IsAuthFailure(&AuthError{Host: "h", Err: errors.New("401 Unauthorized")}) {
		t.Error("an AuthError is explained already")
	}
}
