package pipeline

import (
	"fmt"

	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/verify"
)

// PublishVerification reads a verify summary file (verify --summary) into
// the gold results a publish run attaches to each per-arch image, as
// verifier's.
func PublishVerification(path, verifier string) (*publish.VerificationSource, error) {
	sum, err := verify.ReadSummary(path)
	if err != nil {
		return nil, err
	}
	verdicts, err := sum.Verdicts()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &publish.VerificationSource{Verdicts: verdicts, Verifier: verifier}, nil
}
