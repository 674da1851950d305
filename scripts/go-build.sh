#!/usr/bin/env bash
# scripts/go-build.sh — `go build` with the one set of flags swebuild (make
# build) and BuildKit's buildkitd and buildctl (scripts/stack.sh build) are
# built with: static (CGO_ENABLED=0), -trimpath, BuildKit's release tags, and
# no DWARF (-dwarf=false for every package, -s -w for the link; stack traces
# keep their file:line). With the same flags the Go build cache holds the
# packages they share (BuildKit's client, gRPC, containerd, OpenTelemetry)
# once (scripts/stack.sh builds buildkitd and buildctl as tools of swebuild's
# module, so their dependency versions are swebuild's too). Measured on the
# idle 2-core VM, empty build cache:
#   buildkitd + buildctl  254 s (two builds, buildctl without the tags, DWARF)
#                      -> 222-233 s (one build, these flags; 429-450 CPU s)
#   swebuild after them   127 s (cgo, DWARF; buildkitd built in its own module)
#                      -> 39 s (these flags) -> 25 s (buildkitd a tool of this module)
# A cold compile is minutes of silence, so every 30 s a line says how long it
# has run and how many packages it compiled (GO_BUILD_LABEL names it; `go
# build -v` lists them; downloads and errors are printed as they come).
#
#   scripts/go-build.sh LDFLAGS go-build-arguments...   e.g.
#   scripts/go-build.sh "-X main.version=v1" -o bin/swebuild ./cmd/swebuild
set -euo pipefail
# shellcheck source=lib/progress.sh
. "$(dirname "$0")/lib/progress.sh"
ldflags=$1
shift
CGO_ENABLED=0 go build -v -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" \
	-tags "osusergo netgo static_build seccomp" "$@" 2>&1 | progress_go_build "${GO_BUILD_LABEL:-go build}"
