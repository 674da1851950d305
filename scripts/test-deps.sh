#!/usr/bin/env bash
# scripts/test-deps.sh — tools only the tests need, beyond the stack:
# Debian's chromium (the sizes HTML screenshot test), shellcheck (actionlint
# runs it on workflow scripts), jq and bc (scripts/bench-build.sh), iproute2
# (publish's private-address test makes a network namespace with ip(8)), nodejs
# (the fixture's JavaScript project: scripts/fixture.sh dataset makes its
# labels by running its tests, internal/stacktest re-checks them) and
# actionlint (a Go module, cached). cosign v3 is make test-all's (make cosign:
# the sign package's thorough stack test runs the unmodified cosign
# verify-attestation; a cold compile takes minutes). The registry tests need no htpasswd: their
# bcrypt entries are made in Go.
# Idempotent; needs root for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=()
for p in chromium shellcheck jq bc iproute2 nodejs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || pkgs+=("$p")
done
if [ "${#pkgs[@]}" -gt 0 ]; then
	echo "test-deps: installing ${pkgs[*]}" >&2
	apt-get -o DPkg::Lock::Timeout=600 update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${pkgs[@]}" >&2
fi
scripts/install-actionlint.sh >/dev/null
