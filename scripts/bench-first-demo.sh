#!/usr/bin/env bash
# scripts/bench-first-demo.sh — time a first `make demo` as on a fresh machine,
# without touching the machine's own stack or caches: a clone of this
# repository, a private stack (its own BuildKit state, so nothing is cached;
# its own registry on 127.0.0.1:5099), an empty SWEBUILD_CACHE (buildkitd is
# compiled, the .debs downloaded), an empty Go build cache and an empty Go
# module cache (every module is downloaded from the Go proxy).
#
# --fresh-packages also purges the Debian packages the stack installs that a
# fresh machine lacks (and apt's download cache), so the run installs them
# again as a fresh machine does. It changes this machine: the packages come
# back at the end of the run (the demo installs them), but the machine's own
# stack must be started again (make stack).
#
#   scripts/bench-first-demo.sh [--fresh-packages] [WORKDIR]
#
# WORKDIR must be missing or empty (it is never emptied: nothing here removes
# a path); without it a new directory from mktemp -d is used.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
fresh_packages=false
if [ "${1:-}" = --fresh-packages ]; then
	fresh_packages=true
	shift
fi
if [ -n "${1:-}" ]; then
	F=$1
	if [ -e "$F" ] && [ -n "$(ls -A "$F" 2>/dev/null)" ]; then
		echo "first-demo: WORKDIR $F is not empty; give a missing or empty directory (or none for a new mktemp -d one)" >&2
		exit 2
	fi
	mkdir -p "$F" || exit 1
else
	F=$(mktemp -d -t swebuild-first-demo.XXXXXX) || exit 1
fi
if $fresh_packages; then
	# What the stack installs beyond a fresh machine's packages (scripts/stack.sh PACKAGES).
	"$repo/scripts/stack.sh" down >/dev/null 2>&1
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 purge -y -q --autoremove \
		runc docker-registry qemu-user-static binfmt-support debootstrap mmdebstrap skopeo python3-pytest >"$F/purge.log" 2>&1 ||
		{ echo "first-demo: purging the stack's packages failed, see $F/purge.log" >&2; exit 1; }
	apt-get clean
	echo "first-demo: purged the stack's packages and apt's cache"
fi
export SWEBUILD_CACHE=$F/cache SWEBUILD_RUN=$F/run SWEBUILD_STATE=$F/state SWEBUILD_REGISTRY_ADDR=127.0.0.1:5099
export BUILDKIT_HOST=unix://$F/run/buildkitd.sock SWEBUILD_REGISTRY=127.0.0.1:5099 GOCACHE=$F/gocache GOMODCACHE=$F/gomodcache
# The private stack's login registry and its login (the demo's last step),
# beside the machine's own on 5001.
export SWEBUILD_AUTH_REGISTRY_ADDR=127.0.0.1:5098 SWEBUILD_AUTH_REGISTRY=127.0.0.1:5098 DOCKER_CONFIG=$F/state/docker-config
git clone -q "$repo" "$F/repo" && cd "$F/repo" || exit 1
echo "first-demo: load $(cut -d' ' -f1-3 /proc/loadavg); log in $F/demo.log"
start=$(date +%s)
# Each log line starts with the seconds since the start (bash's printf
# clock, no process per line), written as it comes so a running bench can be
# followed.
set -o pipefail
make demo 2>&1 | while IFS= read -r line || [ -n "$line" ]; do
	printf -v now '%(%s)T' -1
	printf '%4d %s\n' $((now - start)) "$line"
done >"$F/demo.log"
rc=$?
echo "first-demo: make demo rc=$rc, wall $(($(date +%s) - start)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -A40 'wall time per step' "$F/demo.log"
scripts/stack.sh down >/dev/null 2>&1
exit $rc
