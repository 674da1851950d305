package regtest

import "github.com/google/go-containerregistry/pkg/authn"

// Anonymous is a keychain that gives every registry no credentials: what a
// client of the in-process registry or the stack's plain registry needs,
// whatever DOCKER_CONFIG holds on the machine.
func Anonymous() authn.Keychain { return anonymous{} }

type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }
