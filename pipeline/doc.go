// Package pipeline composes swebuild's stages once, for the CLI and the
// nightly alike: load (dataset, spec tables, extra profiles, pins) -> plan ->
// build (BuildKit) -> verify (gold patch) -> publish (per-arch names and one
// index per instance). Each swebuild subcommand turns its flags into one
// options value and makes one call here; nothing in cmd/swebuild holds
// cross-stage wiring (ko's pkg/commands/resolver.go is the model).
//
// The stages themselves live in their own packages (dataset, builder/spec,
// builder/render, builder/plan, pins, builder, verify, grading, publish);
// this package only connects them, and it reads no environment variable:
// the caller passes addresses, directories and credentials in the options.
package pipeline
