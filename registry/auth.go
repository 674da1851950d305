package registry

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultAuthEnv is the environment variable commands read registry
// credentials from (never argv, so they do not show in process listings).
const DefaultAuthEnv = "SWEBUILD_REGISTRY_AUTH"

// ParseCredentials reads registry credentials given as text and returns a
// keychain that answers only the registries they were given for; any other
// registry, including one named by a file's image reference, gets no
// credentials from it. Two forms:
//
//	USER:PASSWORD
//	    Unscoped: for defaultRegistry only (the registry published to).
//	    PASSWORD is everything after the first ':' and may hold any
//	    character, '=' and ',' included (base64 tokens).
//	REGISTRY=USER:PASSWORD[,REGISTRY=USER:PASSWORD...]
//	    Scoped. Entries are separated by newlines, or by a comma followed by
//	    the next REGISTRY=USER:; any other comma is part of a password (a
//	    password holding ",HOST=NAME:" needs the newline form).
//
// The text is scoped when what precedes its first '=' is a registry name
// (a host name or IP address, optionally with a numeric port:
// "ghcr.io", "127.0.0.1:5000", "localhost"), unless the first entry then
// has no USER:PASSWORD and the whole text is a valid USER:PASSWORD
// ("bob:1234=abc" is user bob). Empty text means no credentials. Errors
// never include the text.
func ParseCredentials(text, defaultRegistry string) (authn.Keychain, error) {
	kc := scopedKeychain{}
	text = strings.TrimSpace(text)
	if text == "" {
		return kc, nil
	}
	entries, scoped := splitScoped(text)
	if scoped {
		for i, e := range entries {
			reg, cred, _ := strings.Cut(e, "=")
			user, pass, ok := strings.Cut(cred, ":")
			if !ok || user == "" {
				if i == 0 && unscopedForm(text) {
					scoped = false
					break
				}
				return nil, fmt.Errorf("credentials: entry %d: want REGISTRY=USER:PASSWORD (value not shown)", i+1)
			}
			key, err := registryKey(reg)
			if err != nil {
				return nil, fmt.Errorf("credentials: entry %d: %w", i+1, err)
			}
			if _, dup := kc[key]; dup {
				return nil, fmt.Errorf("credentials: entry %d: registry %s given twice", i+1, key)
			}
			kc[key] = authn.AuthConfig{Username: user, Password: pass}
		}
		if scoped {
			return kc, nil
		}
	}
	if !unscopedForm(text) {
		return nil, errors.New("credentials: want USER:PASSWORD or REGISTRY=USER:PASSWORD,... (value not shown)")
	}
	if defaultRegistry == "" {
		return nil, errors.New("credentials: an unscoped USER:PASSWORD is only for the registry published to, and there is none here; give REGISTRY=USER:PASSWORD")
	}
	key, err := registryKey(defaultRegistry)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	user, pass, _ := strings.Cut(text, ":")
	clear(kc)
	kc[key] = authn.AuthConfig{Username: user, Password: pass}
	return kc, nil
}

// registryName is a host name or IPv4 address with an optional port, or a
// bracketed IPv6 address with an optional port.
var registryName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)
})

// entryStart is the start of a scoped entry: REGISTRY=USER:
var entryStart = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?=[^:,=\s]+:`)
})

// splitScoped splits text into scoped entries when it is in the scoped form.
func splitScoped(text string) ([]string, bool) {
	first, _, ok := strings.Cut(text, "=")
	if !ok || !registryName().MatchString(strings.TrimSpace(first)) {
		return nil, false
	}
	var entries []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		start := 0
		for i := 0; i < len(line); i++ {
			if line[i] != ',' {
				continue
			}
			// A comma starts a new entry only when REGISTRY=USER: follows.
			if entryStart().MatchString(line[i+1:]) {
				entries = append(entries, strings.TrimSpace(line[start:i]))
				start = i + 1
			}
		}
		entries = append(entries, strings.TrimSpace(line[start:]))
	}
	return entries, true
}

// unscopedForm reports whether text is one USER:PASSWORD.
func unscopedForm(text string) bool {
	user, _, ok := strings.Cut(text, ":")
	return ok && user != "" && !strings.ContainsAny(user, "\n=,")
}

// registryKey normalizes a registry name as go-containerregistry names it
// ("docker.io" -> "index.docker.io").
func registryKey(s string) (string, error) {
	r, err := name.NewRegistry(strings.TrimSpace(s), name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("registry name %q: %w", strings.TrimSpace(s), err)
	}
	return r.RegistryStr(), nil
}

// scopedKeychain answers the registries it holds credentials for, and no
// other.
type scopedKeychain map[string]authn.AuthConfig

func (k scopedKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if c, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(c), nil
	}
	return authn.Anonymous, nil
}

// Keychain returns the credentials in text (ParseCredentials(text,
// defaultRegistry)) first, then go-containerregistry's authn.DefaultKeychain
// (the Docker config it finds itself).
//
// Deprecated: the commands use NewCredentials, which also serves BuildKit's
// session (SessionAuth) and names each credential's source in errors.
func Keychain(text, defaultRegistry string) (authn.Keychain, error) {
	kc, err := ParseCredentials(text, defaultRegistry)
	if err != nil {
		return nil, err
	}
	return authn.NewMultiKeychain(kc, authn.DefaultKeychain), nil
}

// RegistryOf returns the registry of a repository name ("ghcr.io/o/r" ->
// "ghcr.io", "ubuntu" -> "index.docker.io").
func RegistryOf(repo string) (string, error) {
	r, err := name.NewRepository(repo)
	if err != nil {
		return "", fmt.Errorf("repository %q: %w", repo, err)
	}
	return r.RegistryStr(), nil
}
