#!/usr/bin/env bash
# Install actionlint (a Go module) into the swebuild cache, once.
# Prints the path of the binary on stdout. Safe to call repeatedly: a cached
# binary of the right version is reused.
#   SWEBUILD_CACHE   cache root (default ~/.cache/swebuild); binary in $SWEBUILD_CACHE/bin
#   ACTIONLINT_VERSION  module version (default v1.7.12)
set -euo pipefail

version="${ACTIONLINT_VERSION:-v1.7.12}"
cache="${SWEBUILD_CACHE:-$HOME/.cache/swebuild}"
bindir="$cache/bin"
bin="$bindir/actionlint"

if [[ -x "$bin" ]] && [[ "$("$bin" -version 2>/dev/null | head -n1)" == "$version" ]]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "install-actionlint: go install github.com/rhysd/actionlint/cmd/actionlint@$version -> $bindir" >&2
GOBIN="$bindir" GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$version"
"$bin" -version >&2
echo "$bin"
