package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/sign"
)

// Environment of the signing flags.
const (
	// envSigningKey names cosign.key (scripts/stack.sh env sets the
	// demo's).
	envSigningKey = "SWEBUILD_SIGNING_KEY"
	// GitHub Actions: a job with `permissions: id-token: write` has the
	// two variables that fetch its OIDC token; the workflow's identity is
	// its server URL and workflow ref.
	envActionsTokenURL   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	envActionsTokenValue = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
	envGitHubServer      = "GITHUB_SERVER_URL"
	envGitHubWorkflowRef = "GITHUB_WORKFLOW_REF"
)

// signingFlags choose how publish signs the statements it attaches: with a
// key, keyless (GitHub Actions' OIDC identity), or, only when asked,
// not at all.
type signingFlags struct {
	key      string
	keyless  bool
	unsigned bool
}

func (f *signingFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "signing-key", os.Getenv(envSigningKey), "sign every statement attached (verification, provenance, SBOM) with this cosign.key (password in $"+envSigningPassword+"; default $"+envSigningKey+")")
	fs.BoolVar(&f.keyless, "keyless", false, "sign keyless: a Fulcio certificate for GitHub Actions' OIDC identity of the workflow and a Rekor entry (needs `permissions: id-token: write`; the default on GitHub Actions when no key is given)")
	fs.BoolVar(&f.unsigned, "unsigned", false, "publish without signing anything (a consumer's cosign verify-attestation and check --require-verified then refuse every image)")
}

// signer makes the signer the flags ask for; nil only with --unsigned.
// Without a key, on GitHub Actions with an OIDC token to ask for, it is
// keyless; otherwise it is an error naming the three choices.
// what says what signs, in the error when nothing is chosen.
func (f *signingFlags) signer(fs *pflag.FlagSet, stderr io.Writer, what string) (*sign.Signer, error) {
	keySet := fs.Changed("signing-key")
	onActions := os.Getenv(envActionsTokenURL) != ""
	switch {
	case f.unsigned && (keySet || f.keyless):
		return nil, usageErr(fs, stderr, "--unsigned with --signing-key or --keyless: give one")
	case f.unsigned:
		fmt.Fprintln(stderr, "UNSIGNED (--unsigned): nothing is signed")
		return nil, nil
	case f.keyless && keySet:
		return nil, usageErr(fs, stderr, "--keyless with --signing-key: give one")
	case f.key != "" && !f.keyless:
		key, err := sign.ReadPrivateKey(f.key, []byte(os.Getenv(envSigningPassword)))
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		return sign.NewKeySigner(key)
	case f.keyless || onActions:
		url, tok := os.Getenv(envActionsTokenURL), os.Getenv(envActionsTokenValue)
		if url == "" || tok == "" {
			return nil, errors.New("--keyless: no OIDC token to ask for: on GitHub Actions the job needs `permissions: id-token: write` ($" + envActionsTokenURL + " and $" + envActionsTokenValue + " are unset)")
		}
		return sign.NewGitHubActionsSigner(sign.GitHubActions{TokenURL: url, Token: tok, ServerURL: os.Getenv(envGitHubServer), WorkflowRef: os.Getenv(envGitHubWorkflowRef)})
	}
	return nil, errors.New(what + ": give --signing-key FILE (or $" + envSigningKey + "; its password in $" + envSigningPassword + "; `swebuild sign keygen` makes one), run keyless on GitHub Actions (--keyless, `permissions: id-token: write`), or publish unsigned with --unsigned")
}
