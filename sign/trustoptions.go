package sign

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// TrustOptions say whose signatures a check accepts, as cosign
// verify-attestation's flags do: a public key file, or a keyless signer's
// certificate identity and OIDC issuer (exact or a regular expression),
// checked against a Sigstore trusted root (a file; default the
// public-good instance's).
type TrustOptions struct {
	Key                      string
	Identity, IdentityRegexp string
	Issuer, IssuerRegexp     string
	TrustedRoot              string
}

// ChoiceError is a choice of options that does not make a trust or a
// signer (a usage problem); its message names the flags.
type ChoiceError string

func (e ChoiceError) Error() string { return string(e) }

// Given reports whether any option was set.
func (o TrustOptions) Given() bool { return o.Key != "" || o.keyless() || o.TrustedRoot != "" }

func (o TrustOptions) keyless() bool {
	return o.Identity != "" || o.IdentityRegexp != "" || o.Issuer != "" || o.IssuerRegexp != ""
}

// Trust reads the key or the trusted root; a choice that names no one (or
// two) is a ChoiceError.
func (o TrustOptions) Trust() (Trust, error) {
	switch {
	case o.Key != "" && (o.keyless() || o.TrustedRoot != ""):
		return Trust{}, ChoiceError("--key with --certificate-*: give a key or a certificate identity")
	case o.Key != "":
		k, err := ReadPublicKey(o.Key)
		if err != nil {
			return Trust{}, err
		}
		return Trust{Key: k}, nil
	case !o.keyless():
		return Trust{}, ChoiceError("give --key PUB, or --certificate-identity[-regexp] and --certificate-oidc-issuer[-regexp]")
	case (o.Identity == "") == (o.IdentityRegexp == ""):
		return Trust{}, ChoiceError("give one of --certificate-identity and --certificate-identity-regexp")
	case (o.Issuer == "") == (o.IssuerRegexp == ""):
		return Trust{}, ChoiceError("give one of --certificate-oidc-issuer and --certificate-oidc-issuer-regexp")
	}
	t := Trust{Identity: &Identity{Subject: o.Identity, SubjectRegexp: o.IdentityRegexp, Issuer: o.Issuer, IssuerRegexp: o.IssuerRegexp}}
	var err error
	if o.TrustedRoot != "" {
		t.TrustedRoot, err = LoadTrustedRoot(o.TrustedRoot)
	} else {
		t.TrustedRoot, err = FetchPublicTrustedRoot()
	}
	return t, err
}

// GitHubActions is what a GitHub Actions job gives keyless signing: the
// URL and token that fetch its OIDC token (a job with `permissions:
// id-token: write` has them), its server URL and workflow ref.
type GitHubActions struct {
	TokenURL, Token, ServerURL, WorkflowRef string
}

// NewGitHubActionsSigner signs keyless as the job's workflow, a fresh OIDC
// token for each certificate.
func NewGitHubActionsSigner(a GitHubActions) (*Signer, error) {
	if a.TokenURL == "" || a.Token == "" {
		return nil, errors.New("no OIDC token to ask for")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	id := GitHubWorkflowIdentity(a.ServerURL, a.WorkflowRef)
	return NewKeylessSigner(KeylessOptions{
		IDTokenSource: func(ctx context.Context) (string, error) {
			return GitHubActionsIDToken(ctx, client, a.TokenURL, a.Token)
		},
		Identity: id.Subject,
	})
}
