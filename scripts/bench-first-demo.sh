#!/usr/bin/env bash
# scripts/bench-first-demo.sh — time a first `make demo` as on a fresh machine,
# without touching the machine's own stack or caches: a clone of this
# repository, a private stack (its own BuildKit state, so nothing is cached;
# its own registry on 127.0.0.1:5099), an empty SWEBUILD_CACHE (buildkitd is
# compiled, the .debs downloaded) and an empty Go build cache. The Go module
# cache is the machine's (a fresh machine also downloads the modules).
#
#   scripts/bench-first-demo.sh [WORKDIR]   (default /tmp/swebuild-first-demo; removed first)
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
F=${1:-/tmp/swebuild-first-demo}
rm -rf "$F" && mkdir -p "$F"
export SWEBUILD_CACHE=$F/cache SWEBUILD_RUN=$F/run SWEBUILD_STATE=$F/state SWEBUILD_REGISTRY_ADDR=127.0.0.1:5099
export BUILDKIT_HOST=unix://$F/run/buildkitd.sock SWEBUILD_REGISTRY=127.0.0.1:5099 GOCACHE=$F/gocache
git clone -q "$repo" "$F/repo" && cd "$F/repo" || exit 1
echo "first-demo: load $(cut -d' ' -f1-3 /proc/loadavg); log in $F/demo.log"
start=$(date +%s)
make demo >"$F/demo.log" 2>&1
rc=$?
echo "first-demo: make demo rc=$rc, wall $(($(date +%s) - start)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -A6 'wall time per step' "$F/demo.log"
scripts/stack.sh down >/dev/null 2>&1
exit $rc
