// Package verification holds what verify found on the images it ran, in
// the form the publishing side needs it: the settings every run of a
// verify run shared, and one gold verdict per per-arch image with the bytes
// a verification statement is made of (report.json, eval.sh).
//
// Pure types, no I/O and no BuildKit: verify produces them (verify.Summary
// holds Settings, verify.VerdictOf reads a result's files into a Verdict),
// attest makes the in-toto statement of a Verdict, and the pipeline and
// publish attach it. publish sits beside the runner, not above it.
package verification

import (
	"strings"

	"github.com/swebuild/swebuild/core"
)

// Settings are what every run of a verify run shared, as a verification
// statement records them.
type Settings struct {
	// Grading is the grading rules asked for: v5, v4.1, or auto (v5 for
	// records with log_parser, else v4.1).
	Grading        string `json:"grading"`
	TimeoutSeconds int64  `json:"timeout_seconds"`
	MaxOutput      int64  `json:"max_output"`
	// Network is the containers' network: none.
	Network string `json:"network"`
	Repeat  int    `json:"repeat"`
}

// Verdict is verify's gold result on one per-arch image: what a
// verification statement says of it.
type Verdict struct {
	InstanceID string
	Platform   core.Platform
	// Image is the reference the runs used, pinned by digest when verify
	// was given one (REPO@sha256:...); empty when the runs used the solved
	// image inside the build, before its digest existed (the builder binds
	// it to the digest it exports from that solve).
	Image string
	// GoldResolved: every gold run resolved. ControlUnresolved: the
	// control run (no patch) came out unresolved; nil when none ran.
	GoldResolved      bool
	ControlUnresolved *bool
	// Failure is verify's failure class ("" when it passed); FlakyTests
	// the labelled tests whose result differed between runs.
	Failure    string
	FlakyTests []string
	// Rules are the grading rules the gold run was graded by (v5 or v4.1;
	// "" when not recorded: Settings.Grading then says what was asked).
	Rules string
	// Runs is how many gold runs there were (0 for a cached result).
	Runs int
	// Cached: nothing ran; the verdict came from the verification cache.
	Cached bool
	// Report is the gold run's report.json (upstream's format).
	Report []byte
	// EvalScript is the eval.sh the runs were given; nil when unknown (a
	// cached result keeps none).
	EvalScript []byte
	// Settings are the run's shared settings (nil: not recorded).
	Settings *Settings
}

// Digest is the image digest the verdict is bound to (sha256:...), from
// Image; "" when Image names none.
func (v Verdict) Digest() string {
	_, dg, ok := strings.Cut(v.Image, "@")
	if !ok {
		return ""
	}
	return dg
}

// GradingVersion names upstream's release of the grading rules rules.
func GradingVersion(rules string) string {
	switch rules {
	case "v5":
		return "SWE-bench 5.0.2"
	case "v4.1":
		return "SWE-bench 4.1.0"
	case "auto":
		return "SWE-bench 5.0.2 for records with log_parser, else 4.1.0"
	}
	return ""
}
