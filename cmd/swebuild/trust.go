package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/sign"
)

// trustFlags say whose signatures a check accepts (sign.TrustOptions).
type trustFlags struct{ o sign.TrustOptions }

func (f *trustFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.o.Key, "key", "", "public key (cosign.pub) whose signatures count")
	fs.StringVar(&f.o.Identity, "certificate-identity", "", "keyless: the signing certificate's identity, e.g. https://github.com/OWNER/REPO/.github/workflows/nightly.yml@refs/heads/main")
	fs.StringVar(&f.o.IdentityRegexp, "certificate-identity-regexp", "", "keyless: a regular expression the certificate's identity must match")
	fs.StringVar(&f.o.Issuer, "certificate-oidc-issuer", "", "keyless: the certificate's OIDC issuer, e.g. "+sign.GitHubActionsIssuer)
	fs.StringVar(&f.o.IssuerRegexp, "certificate-oidc-issuer-regexp", "", "keyless: a regular expression the certificate's OIDC issuer must match")
	fs.StringVar(&f.o.TrustedRoot, "trusted-root", "", "keyless: Sigstore trusted_root.json to check certificates and log entries with (default: the public-good instance's, through its TUF repository)")
}

// given reports whether any trust flag was set.
func (f *trustFlags) given() bool { return f.o.Given() }

// trust reads the key or the trusted root; flag problems are usage errors
// (usage) and reading problems errors.
func (f *trustFlags) trust(usage func(format string, a ...any) error) (sign.Trust, error) {
	t, err := f.o.Trust()
	var choice sign.ChoiceError
	if errors.As(err, &choice) {
		return t, usage("%v", choice)
	}
	return t, err
}
