package registry

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	dockercreds "github.com/docker/cli/cli/config/credentials"
	helperclient "github.com/docker/docker-credential-helpers/client"
	helpercreds "github.com/docker/docker-credential-helpers/credentials"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Credential is what one registry host gets, and where it came from.
type Credential struct {
	Username, Password string
	// IdentityToken is an OAuth refresh token (Docker config
	// "identitytoken", or a helper's "<token>" user).
	IdentityToken string
	// RegistryToken is a bearer token sent as is ("registrytoken").
	RegistryToken string
	// Source says where the credential came from, for messages: the
	// environment variable, the Docker config file, or the credential
	// helper and the file that names it. Never the value.
	Source string
}

// Empty reports whether c holds nothing to log in with.
func (c Credential) Empty() bool {
	return c.Username == "" && c.Password == "" && c.IdentityToken == "" && c.RegistryToken == ""
}

// CredentialOptions say where credentials are kept.
type CredentialOptions struct {
	// Text holds credentials in ParseCredentials' forms; TextSource names
	// where it came from in messages (e.g. "$SWEBUILD_REGISTRY_AUTH").
	Text, TextSource string
	// DefaultRegistry is the registry an unscoped USER:PASSWORD is for.
	DefaultRegistry string
	// DockerConfigDir is the directory of the Docker config.json that
	// `docker login` and docker/login-action write ($DOCKER_CONFIG, else
	// ~/.docker): its "auths", "credsStore" and "credHelpers" are read.
	// Empty: no Docker config.
	DockerConfigDir string
}

// Credentials is swebuild's one credential source, for go-containerregistry
// (it is an authn.Keychain) and for BuildKit's session (SessionAuth): the
// scoped text first, then the Docker config file and the credential helpers
// it names. Every answer is for one registry host; a host nothing names
// gets no credential. Safe for concurrent use; helpers are asked once per
// host.
type Credentials struct {
	scoped     scopedKeychain
	textSource string
	dockerFile string // config.json path; "" = none
	cf         *configfile.ConfigFile

	mu    sync.Mutex
	cache map[string]lookup
}

type lookup struct {
	cred Credential
	err  error
}

// NewCredentials reads the text and the Docker config file (not the
// helpers: those run when a host is looked up). A config file that exists
// but cannot be read or parsed is an error naming it.
func NewCredentials(o CredentialOptions) (*Credentials, error) {
	src := o.TextSource
	if src == "" {
		src = "the credentials text"
	}
	kc, err := ParseCredentials(o.Text, o.DefaultRegistry)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	c := &Credentials{scoped: kc.(scopedKeychain), textSource: src, cache: map[string]lookup{}}
	if o.DockerConfigDir != "" {
		c.dockerFile = filepath.Join(o.DockerConfigDir, config.ConfigFileName)
		// config.Load returns an empty configuration when the file does
		// not exist.
		if c.cf, err = config.Load(o.DockerConfigDir); err != nil {
			return nil, fmt.Errorf("reading Docker config %s: %w", c.dockerFile, err)
		}
	}
	return c, nil
}

// HostKey normalizes a registry host as go-containerregistry names it;
// Docker Hub's names (docker.io, registry-1.docker.io, BuildKit's name for
// it) become index.docker.io.
func HostKey(host string) string {
	h := strings.ToLower(strings.TrimSpace(host))
	if h == "registry-1.docker.io" || h == "docker.io" {
		return name.DefaultRegistry
	}
	if k, err := registryKey(h); err == nil {
		return k
	}
	return h
}

// dockerConfigKey is the key `docker login` writes for a host.
func dockerConfigKey(key string) string {
	if key == name.DefaultRegistry {
		return "https://index.docker.io/v1/"
	}
	return key
}

// Lookup returns the credential for a registry host (host[:port]); an
// Empty one, with no error, when nothing holds one for it. An error is a
// credential helper that failed, naming it and the host.
func (c *Credentials) Lookup(host string) (Credential, error) {
	key := HostKey(host)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.cache[key]; ok {
		return l.cred, l.err
	}
	cred, err := c.lookup(key)
	c.cache[key] = lookup{cred, err}
	return cred, err
}

func (c *Credentials) lookup(key string) (Credential, error) {
	if a, ok := c.scoped[key]; ok {
		return Credential{Username: a.Username, Password: a.Password, Source: c.textSource}, nil
	}
	if c.cf == nil {
		return Credential{}, nil
	}
	ck := dockerConfigKey(key)
	helper := c.cf.CredentialHelpers[ck]
	via := "credHelpers"
	if helper == "" {
		helper, via = c.cf.CredentialsStore, "credsStore"
	}
	if helper != "" {
		prog := "docker-credential-" + helper
		src := fmt.Sprintf("%s (%s in %s)", prog, via, c.dockerFile)
		got, err := helperclient.Get(helperclient.NewShellProgramFunc(prog), ck)
		if err != nil {
			if helpercreds.IsErrCredentialsNotFound(err) {
				return Credential{}, nil
			}
			return Credential{}, fmt.Errorf("credential helper %s for %s: %w", src, key, err)
		}
		cred := Credential{Username: got.Username, Password: got.Secret, Source: src}
		if got.Username == "<token>" {
			cred = Credential{IdentityToken: got.Secret, Source: src}
		}
		return cred, nil
	}
	auths := c.cf.GetAuthConfigs()
	a, ok := auths[ck]
	if !ok {
		// Keys written as URLs ("https://ghcr.io", legacy configs).
		for k, v := range auths {
			if HostKey(dockercreds.ConvertToHostname(k)) == key {
				a, ok = v, true
				break
			}
		}
	}
	if !ok {
		return Credential{}, nil
	}
	cred := Credential{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken,
		Source: c.dockerFile + " (auths)"}
	if cred.Empty() {
		return Credential{}, nil
	}
	return cred, nil
}

// Resolve implements authn.Keychain.
func (c *Credentials) Resolve(r authn.Resource) (authn.Authenticator, error) {
	cred, err := c.Lookup(r.RegistryStr())
	if err != nil {
		return nil, err
	}
	if cred.Empty() {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: cred.Username, Password: cred.Password,
		IdentityToken: cred.IdentityToken, RegistryToken: cred.RegistryToken}), nil
}

// Describe says, for an error message, which credential a registry host
// got: "credential for HOST from SOURCE", or that none was found and where
// swebuild looked. Never the value.
func (c *Credentials) Describe(host string) string {
	key := HostKey(host)
	cred, err := c.Lookup(host)
	switch {
	case err != nil:
		return fmt.Sprintf("no credential for %s: %v", key, err)
	case cred.Empty():
		return fmt.Sprintf("no credential found for %s (looked in %s)", key, c.places())
	default:
		return fmt.Sprintf("credential for %s from %s", key, cred.Source)
	}
}

// places lists where credentials are looked for.
func (c *Credentials) places() string {
	p := []string{c.textSource}
	if c.dockerFile != "" {
		p = append(p, c.dockerFile)
	}
	return strings.Join(p, " and ")
}

// describer is a keychain that can say what it gives a host.
type describer interface{ Describe(host string) string }

// AuthError is a registry refusing a request for want of a (valid)
// credential: the host and which credential it got.
type AuthError struct {
	Host string
	// Credential is Credentials.Describe(Host).
	Credential string
	Err        error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("registry %s refused the request (%s): %v", e.Host, e.Credential, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// IsAuthFailure reports whether err reads as a registry refusing a login:
// HTTP 401 or 403, or the distribution error codes UNAUTHORIZED / DENIED.
// It reads text, since BuildKit's errors arrive as strings.
func IsAuthFailure(err error) bool {
	if err == nil {
		return false
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		return false // explained already
	}
	s := err.Error()
	for _, m := range []string{"401 Unauthorized", "403 Forbidden", "UNAUTHORIZED", "DENIED", "status code 401", "status code 403", "unexpected status: 401", "unexpected status: 403", "authorization failed", "failed to authorize", "insufficient_scope"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
