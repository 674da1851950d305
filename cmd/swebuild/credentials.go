package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/registry/bkauth"
	"github.com/swebuild/swebuild/verify"
)

// registryCredentials is the one credential source of a command: the
// environment variable envName (USER:PASSWORD for defaultRegistry, or
// REGISTRY=USER:PASSWORD,...) first, then the Docker config that `docker
// login` and docker/login-action write ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json) with its credential helpers.
func registryCredentials(envName, defaultRegistry string) (*registry.Credentials, error) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".docker")
		}
	}
	return registry.NewCredentials(registry.CredentialOptions{
		Text:            os.Getenv(envName),
		TextSource:      "$" + envName,
		DefaultRegistry: defaultRegistry,
		DockerConfigDir: dir,
	})
}

// insecureFunc says whether a host was named with --insecure-registry.
func insecureFunc(hosts []string) func(string) bool {
	return func(h string) bool { return slices.Contains(hosts, h) }
}

// builderAuth makes one BuildKit session login per solve from creds.
func builderAuth(creds *registry.Credentials, insecure []string) func() builder.SessionAuth {
	return func() builder.SessionAuth { return bkauth.New(creds, insecureFunc(insecure)) }
}

// verifyAuth makes one BuildKit session login per verification run.
func verifyAuth(creds *registry.Credentials) func() verify.SessionAuth {
	return func() verify.SessionAuth { return bkauth.New(creds, nil) }
}

// registryClient is a registry client for the repository named by the
// flag flagName (its registry gets an unscoped USER:PASSWORD), on the one
// credential source.
func registryClient(authEnv, repo, flagName string, o registry.Options) (*registry.Client, error) {
	dest, err := registry.RegistryOf(repo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	kc, err := registryCredentials(authEnv, dest)
	if err != nil {
		return nil, fmt.Errorf("--registry-auth-env: %w", err)
	}
	o.Keychain = kc
	return registry.New(o)
}

// publicationReader is the publication reader of the commands that read
// published images: the one credential source (the variable authEnv names,
// then the Docker config and its helpers) and plain HTTP only to loopback
// registries and those named insecure.
func publicationReader(authEnv, defaultRegistry string, o registry.Options) (*publication.Reader, error) {
	kc, err := registryCredentials(authEnv, defaultRegistry)
	if err != nil {
		return nil, fmt.Errorf("--registry-auth-env: %w", err)
	}
	o.Keychain = kc
	client, err := registry.New(o)
	if err != nil {
		return nil, err
	}
	return publication.New(client), nil
}
