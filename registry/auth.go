package registry

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// DefaultAuthEnv is the environment variable read for registry credentials
// when no other name is given. Credentials are read from the environment,
// never from argv, so they do not show in process listings.
const DefaultAuthEnv = "SWEBUILD_REGISTRY_AUTH"

// EnvKeychain returns a keychain answering every registry with the
// credentials in environment variable name, formatted "USER:PASSWORD" or
// "REGISTRY=USER:PASSWORD[,REGISTRY=USER:PASSWORD...]". An unset or empty
// variable yields no credentials. The value is never included in errors.
func EnvKeychain(name string) (authn.Keychain, error) {
	v := os.Getenv(name)
	if v == "" {
		return envKeychain{}, nil
	}
	kc := envKeychain{byRegistry: map[string]authn.AuthConfig{}}
	if !strings.Contains(v, "=") {
		user, pass, ok := strings.Cut(v, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("env %s: want USER:PASSWORD or REGISTRY=USER:PASSWORD,... (value not shown)", name)
		}
		kc.all = &authn.AuthConfig{Username: user, Password: pass}
		return kc, nil
	}
	for i, part := range strings.Split(v, ",") {
		reg, cred, ok := strings.Cut(part, "=")
		user, pass, ok2 := strings.Cut(cred, ":")
		if !ok || !ok2 || reg == "" || user == "" {
			return nil, fmt.Errorf("env %s: entry %d: want REGISTRY=USER:PASSWORD (value not shown)", name, i+1)
		}
		kc.byRegistry[strings.TrimSpace(reg)] = authn.AuthConfig{Username: user, Password: pass}
	}
	return kc, nil
}

type envKeychain struct {
	all        *authn.AuthConfig
	byRegistry map[string]authn.AuthConfig
}

func (k envKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if k.all != nil {
		return authn.FromConfig(*k.all), nil
	}
	if c, ok := k.byRegistry[r.RegistryStr()]; ok {
		return authn.FromConfig(c), nil
	}
	return authn.Anonymous, nil
}

// Keychain returns the keychain swebuild uses: credentials from env
// (EnvKeychain(envName)) first, then the Docker config file and its
// credential helpers (authn.DefaultKeychain).
func Keychain(envName string) (authn.Keychain, error) {
	if envName == "" {
		envName = DefaultAuthEnv
	}
	env, err := EnvKeychain(envName)
	if err != nil {
		return nil, err
	}
	return authn.NewMultiKeychain(env, authn.DefaultKeychain), nil
}
