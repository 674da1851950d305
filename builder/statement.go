package builder

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
)

// The verification statement
//
// An instance image that Options.Verify passed is exported with what the
// check found on it: Options.Attest makes the statement (an in-toto
// statement whose subject is the image manifest just exported, the digest
// the check's solve produced), and the builder attaches it as an OCI 1.1
// artifact where it put the image, as it does the SBOM: a referrer of the
// image in the push repository (attest.Referrers: the referrers API, else
// the sha256-<hex> fallback tag and a write-once attachment tag) and an
// entry beside the image in the OCI layout. The node's record names the
// artifact (core.Image.Verification), so publish carries exactly the
// statement of the build it publishes, wherever it runs (the nightly's
// merge job publishes the shards' records).

// AttestFunc returns the in-toto statement (its predicate type and bytes)
// of what Options.Verify found on the instance image of instanceID on
// platform, now exported: name names the image (the push repository, or
// its key when it was only written into an OCI layout) and subject
// describes its manifest. A nil statement attaches nothing.
type AttestFunc func(instanceID string, platform core.Platform, name string, subject v1.Descriptor) (predicateType string, statement []byte, err error)

// finishStatement attaches the verification statement of a verified
// instance image where it was exported. An error fails the node: a
// verified image whose statement is missing must not reach publish as if
// it carried one.
func (s *bkSolver) finishStatement(ctx context.Context, cb *chainBuild, resp *bkclient.SolveResponse, out *Outcome, log io.Writer) error {
	if s.attest == nil || !cb.verifies() || out.Verified == nil || !*out.Verified {
		return nil
	}
	if s.push == "" && s.layout == nil {
		return nil // nothing exported: nowhere to attach it
	}
	n := cb.node()
	start := time.Now()
	subject, err := pushedSubject(resp, out)
	if err != nil {
		return fmt.Errorf("verification statement: %w", err)
	}
	name := n.Key
	if s.push != "" {
		name = s.push
	}
	pt, stmt, err := s.attest(n.InstanceID, n.Platform, name, subject)
	if err != nil {
		return fmt.Errorf("verification statement: %w", err)
	}
	if stmt == nil {
		return nil
	}
	a, err := attest.StatementArtifact(subject, pt, stmt)
	if err != nil {
		return fmt.Errorf("verification statement: %w", err)
	}
	if s.layout != nil {
		if err := s.layout.putArtifact(ctx, a); err != nil {
			return fmt.Errorf("writing the verification statement into the layout: %w", err)
		}
	}
	if s.push != "" {
		repo, err := s.referrers.Client.ParseRepository(s.push)
		if err != nil {
			return fmt.Errorf("attaching the verification statement: %w", err)
		}
		if _, err := s.referrers.AttachOnce(ctx, repo, a); err != nil {
			return fmt.Errorf("attaching the verification statement: %w", err)
		}
	}
	out.Verification, out.VerificationSize = a.Descriptor.Digest.String(), a.Descriptor.Size
	fmt.Fprintf(log, "verification statement of %s: %d bytes, attached as %s in %.2fs\n", n.ID(), len(stmt), out.Verification, time.Since(start).Seconds())
	return nil
}

// setupReferrers makes the registry client the builder attaches referrers
// (SBOMs, verification statements) to pushed images with, when images are
// pushed and something will be attached.
func (s *bkSolver) setupReferrers(opts Options, want bool) error {
	if opts.Push == "" || !want || s.referrers != nil {
		return nil
	}
	c, err := s.client()
	if err != nil {
		return fmt.Errorf("registry client for attachments: %w", err)
	}
	s.referrers = &attest.Referrers{Client: c}
	return nil
}
