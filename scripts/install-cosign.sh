#!/usr/bin/env bash
# Install cosign v3 (unmodified, from the Go module proxy) into the swebuild
# cache, once. The sign package's stack test runs it to prove that what
# swebuild signs is what a consumer's `cosign verify-attestation` accepts.
# Prints the path of the binary on stdout. Safe to call repeatedly: a cached
# binary built from the right module version is reused (read with go version -m).
# Cold, it is a large compile (minutes on a busy 2-core machine).
#   SWEBUILD_CACHE   cache root (default ~/.cache/swebuild); binary in $SWEBUILD_CACHE/bin
#   COSIGN_VERSION   module version (default v3.1.3)
set -euo pipefail

version="${COSIGN_VERSION:-v3.1.3}"
cache="${SWEBUILD_CACHE:-$HOME/.cache/swebuild}"
bindir="$cache/bin"
bin="$bindir/cosign"

installed() {
	[[ -x "$bin" ]] || return 1
	go version -m "$bin" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/sigstore/cosign/v3" { print $3 }' | grep -qx "$version"
}

if installed; then
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "install-cosign: go install github.com/sigstore/cosign/v3/cmd/cosign@$version -> $bindir" >&2
GOBIN="$bindir" GOFLAGS=-mod=mod go install "github.com/sigstore/cosign/v3/cmd/cosign@$version"
installed || { echo "install-cosign: $bin is not cosign $version" >&2; exit 1; }
echo "$bin"
