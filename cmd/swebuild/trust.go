package main

import (
	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/sign"
)

// trustFlags say whose signatures a check accepts, as cosign
// verify-attestation's flags do: a public key, or a keyless signer's
// certificate identity and OIDC issuer (exact or a regular expression),
// checked against a Sigstore trusted root.
type trustFlags struct {
	key                  string
	identity, identityRe string
	issuer, issuerRe     string
	trustedRoot          string
}

func (f *trustFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "public key (cosign.pub) whose signatures count")
	fs.StringVar(&f.identity, "certificate-identity", "", "keyless: the signing certificate's identity, e.g. https://github.com/OWNER/REPO/.github/workflows/nightly.yml@refs/heads/main")
	fs.StringVar(&f.identityRe, "certificate-identity-regexp", "", "keyless: a regular expression the certificate's identity must match")
	fs.StringVar(&f.issuer, "certificate-oidc-issuer", "", "keyless: the certificate's OIDC issuer, e.g. "+sign.GitHubActionsIssuer)
	fs.StringVar(&f.issuerRe, "certificate-oidc-issuer-regexp", "", "keyless: a regular expression the certificate's OIDC issuer must match")
	fs.StringVar(&f.trustedRoot, "trusted-root", "", "keyless: Sigstore trusted_root.json to check certificates and log entries with (default: the public-good instance's, through its TUF repository)")
}

// given reports whether any trust flag was set.
func (f *trustFlags) given() bool {
	return f.key != "" || f.identity != "" || f.identityRe != "" || f.issuer != "" || f.issuerRe != "" || f.trustedRoot != ""
}

// trust reads the key or the trusted root; flag problems are usage errors
// (usage) and reading problems errors.
func (f *trustFlags) trust(usage func(format string, a ...any) error) (sign.Trust, error) {
	keyless := f.identity != "" || f.identityRe != "" || f.issuer != "" || f.issuerRe != ""
	switch {
	case f.key != "" && (keyless || f.trustedRoot != ""):
		return sign.Trust{}, usage("--key with --certificate-*: give a key or a certificate identity")
	case f.key != "":
		k, err := sign.ReadPublicKey(f.key)
		if err != nil {
			return sign.Trust{}, err
		}
		return sign.Trust{Key: k}, nil
	case !keyless:
		return sign.Trust{}, usage("give --key PUB, or --certificate-identity[-regexp] and --certificate-oidc-issuer[-regexp]")
	case (f.identity == "") == (f.identityRe == ""):
		return sign.Trust{}, usage("give one of --certificate-identity and --certificate-identity-regexp")
	case (f.issuer == "") == (f.issuerRe == ""):
		return sign.Trust{}, usage("give one of --certificate-oidc-issuer and --certificate-oidc-issuer-regexp")
	}
	t := sign.Trust{Identity: &sign.Identity{Subject: f.identity, SubjectRegexp: f.identityRe, Issuer: f.issuer, IssuerRegexp: f.issuerRe}}
	var err error
	if f.trustedRoot != "" {
		t.TrustedRoot, err = sign.LoadTrustedRoot(f.trustedRoot)
	} else {
		t.TrustedRoot, err = sign.FetchPublicTrustedRoot()
	}
	return t, err
}
