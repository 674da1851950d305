package dataset

import (
	"fmt"

	"github.com/distribution/reference"
)

// Upstream SWE-bench v5's eval types (swebench.harness.constants.EvalType):
// the values a record's eval_type may hold.
const (
	EvalTypePassAndFail = "pass_and_fail"
	EvalTypeFailOnly    = "fail_only"
)

// checkEvalType returns why t is not one of upstream's eval types, or "".
func checkEvalType(t string) string {
	switch t {
	case EvalTypePassAndFail, EvalTypeFailOnly:
		return ""
	}
	return fmt.Sprintf("%s is not an eval type (want %q or %q)", quoteShort(t), EvalTypePassAndFail, EvalTypeFailOnly)
}

// checkImage returns why s is not an image reference as Docker (and
// upstream's docker client) reads one, e.g.
// "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", or "".
func checkImage(s string) string {
	if _, err := reference.ParseNormalizedNamed(s); err != nil {
		return fmt.Sprintf("%s is not an image reference: %v", quoteShort(s), err)
	}
	return ""
}
