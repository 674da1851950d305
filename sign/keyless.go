package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
)

// Keyless signing: an ephemeral key, a short-lived Fulcio certificate
// binding it to an OIDC identity (in the nightly, the GitHub Actions
// workflow's), and a Rekor transparency log entry whose integrated time
// proves the signature was made while the certificate was valid. This is
// what cosign attest does with no --key; a consumer verifies with
//
//	cosign verify-attestation \
//	  --certificate-identity https://github.com/OWNER/REPO/.github/workflows/nightly.yml@refs/heads/main \
//	  --certificate-oidc-issuer https://token.actions.githubusercontent.com \
//	  --type <predicate type> IMAGE@sha256:<digest>
//
// Not run here: this machine reaches neither Fulcio, Rekor nor an OIDC
// provider. The verification half is tested against sigstore-go's virtual
// Sigstore (keyless_test.go).

// The public-good Sigstore instance and GitHub Actions' OIDC issuer.
const (
	PublicFulcio        = "https://fulcio.sigstore.dev"
	PublicRekor         = "https://rekor.sigstore.dev"
	GitHubActionsIssuer = "https://token.actions.githubusercontent.com"
	// SigstoreAudience is the audience Fulcio accepts in an ID token.
	SigstoreAudience = "sigstore"
)

// KeylessOptions configure keyless signing.
type KeylessOptions struct {
	// IDToken is an OIDC identity token for audience "sigstore" (in a
	// workflow: GitHubActionsIDToken).
	IDToken string
	// FulcioURL and RekorURL default to the public-good instance.
	FulcioURL, RekorURL string
	// Timeout bounds each request (default 30 s); Retries retries a 5xx
	// answer (default 3).
	Timeout time.Duration
	Retries uint
	// TrustedRoot, when set, is used to verify each bundle right after
	// signing (sigstore-go does it; a bad certificate or log entry fails
	// the signing instead of the consumer's check).
	TrustedRoot root.TrustedMaterial
}

// NewKeylessSigner signs with an ephemeral ECDSA P-256 key certified by
// Fulcio for opts.IDToken, each signature entered in Rekor (v1, whose
// entries carry the integrated time that dates the signature inside the
// certificate's ten minutes).
func NewKeylessSigner(opts KeylessOptions) (*Signer, error) {
	if opts.IDToken == "" {
		return nil, errors.New("keyless signing: no OIDC identity token")
	}
	if opts.FulcioURL == "" {
		opts.FulcioURL = PublicFulcio
	}
	if opts.RekorURL == "" {
		opts.RekorURL = PublicRekor
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 3
	}
	kp, err := sgsign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, fmt.Errorf("keyless signing: making the ephemeral key: %w", err)
	}
	return &Signer{
		keypair: kp,
		idToken: opts.IDToken,
		opts: sgsign.BundleOptions{
			CertificateProvider: sgsign.NewFulcio(&sgsign.FulcioOptions{BaseURL: opts.FulcioURL, Timeout: opts.Timeout, Retries: opts.Retries}),
			TransparencyLogs:    []sgsign.Transparency{sgsign.NewRekor(&sgsign.RekorOptions{BaseURL: opts.RekorURL, Timeout: opts.Timeout, Retries: opts.Retries, Version: 1})},
			TrustedRoot:         opts.TrustedRoot,
		},
	}, nil
}

// GitHubActionsIDToken asks GitHub Actions for the workflow's OIDC token
// for audience "sigstore": requestURL and requestToken are the job's
// ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN, which
// exist only when the workflow has `permissions: id-token: write`.
func GitHubActionsIDToken(ctx context.Context, client *http.Client, requestURL, requestToken string) (string, error) {
	if requestURL == "" || requestToken == "" {
		return "", errors.New("GitHub Actions OIDC token: no request URL or token (the workflow needs `permissions: id-token: write`)")
	}
	u, err := url.Parse(requestURL)
	if err != nil {
		return "", fmt.Errorf("GitHub Actions OIDC token: request URL: %w", err)
	}
	q := u.Query()
	q.Set("audience", SigstoreAudience)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("GitHub Actions OIDC token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+requestToken)
	req.Header.Set("Accept", "application/json")
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GitHub Actions OIDC token: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("GitHub Actions OIDC token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GitHub Actions OIDC token: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var v struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Value == "" {
		return "", fmt.Errorf("GitHub Actions OIDC token: the answer has no token (value)")
	}
	return v.Value, nil
}

// GitHubWorkflowIdentity is the certificate identity Fulcio gives a GitHub
// Actions workflow: the workflow file's URL at the ref it ran from, e.g.
// https://github.com/OWNER/REPO/.github/workflows/nightly.yml@refs/heads/main
// (the job's GITHUB_SERVER_URL, and its GITHUB_WORKFLOW_REF, which is
// OWNER/REPO/.github/workflows/FILE@REF), with GitHub Actions' issuer.
func GitHubWorkflowIdentity(serverURL, workflowRef string) Identity {
	if serverURL == "" {
		serverURL = "https://github.com"
	}
	return Identity{Subject: strings.TrimSuffix(serverURL, "/") + "/" + workflowRef, Issuer: GitHubActionsIssuer}
}

// LoadTrustedRoot reads a Sigstore trusted_root.json (the Fulcio CAs,
// Rekor and CT log keys keyless verification checks against; for the
// public-good instance it is in sigstore's TUF repository, which cosign
// caches under ~/.sigstore/root).
func LoadTrustedRoot(path string) (root.TrustedMaterial, error) {
	tr, err := root.NewTrustedRootFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Sigstore trusted root %s: %w", path, err)
	}
	return tr, nil
}
