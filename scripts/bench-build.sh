#!/usr/bin/env bash
# scripts/bench-build.sh — wall time of `swebuild build` against plain `buildctl`
# building the same rendered Dockerfiles of the same graph (bases, envs,
# instances; both platforms), sequentially and in parallel, warm and
# (optionally) cold cache. Prints one line per run and the ratio
# swebuild / fastest buildctl way for each cache state.
#
#   scripts/bench-build.sh [--cold] [--workers N] [--dataset FILE] [--specs FILE]
#                          [--platform linux/amd64,linux/arm64] [--instance ID]...
#                          [--repos DIR]
#
# --repos DIR: a directory holding the fixture's bare mirrors (DIR/<name>.git),
# bind-mounted into instance builds as the "mirror" context; default: made
# with scripts/fixture.sh repos in the work directory.
#
# Needs the stack (BUILDKIT_HOST, SWEBUILD_REGISTRY: eval "$(scripts/stack.sh env)"),
# the fixture rootfs tarballs ($SWEBUILD_CACHE/rootfs) and jq.
#
# buildctl has no way to hand a parent image to a child other than through a
# registry or an OCI layout, so the buildctl runs push every node by digest to
# $SWEBUILD_REGISTRY/bench/buildctl and pass it to its children as
# --opt context:<parent>=docker-image://...@<digest>; swebuild runs push to
# $SWEBUILD_REGISTRY/bench/swebuild, so both export and push the same images.
# Each buildctl node gets a context directory holding (hard links to) only
# the files its Dockerfile copies, as swebuild sends.
#
# --cold runs `buildctl prune --all` before each cold run: it empties the
# BuildKit cache of the daemon at BUILDKIT_HOST for everyone using it.
set -euo pipefail

ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_DIR=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}
BUILDCTL=${BUILDCTL:-$CACHE_DIR/bin/buildkit-v0.34.2/buildctl}
DATASET=$ROOT_DIR/testdata/fixture/dataset.jsonl
SPECS=$ROOT_DIR/testdata/fixture/specs.json
PLATFORMS=linux/amd64,linux/arm64
WORKERS=2
COLD=0
REPOS=
INSTANCES=()

die() { printf 'bench-build: error: %s\n' "$*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--cold) COLD=1 ;;
	--workers) WORKERS=$2; shift ;;
	--dataset) DATASET=$2; shift ;;
	--specs) SPECS=$2; shift ;;
	--platform) PLATFORMS=$2; shift ;;
	--instance) INSTANCES+=(--instance "$2"); shift ;;
	--repos) REPOS=$2; shift ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done
: "${BUILDKIT_HOST:?set BUILDKIT_HOST (eval \"\$(scripts/stack.sh env)\")}"
: "${SWEBUILD_REGISTRY:?set SWEBUILD_REGISTRY (eval \"\$(scripts/stack.sh env)\")}"
command -v jq >/dev/null || die "jq is required"
[ -x "$BUILDCTL" ] || die "buildctl not found at $BUILDCTL (scripts/stack.sh build)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Context directory for swebuild: mirror -> the bare mirrors.
mkdir -p "$WORK/extra"
if [ -n "$REPOS" ]; then
	ln -s "$(cd "$REPOS" && pwd)" "$WORK/extra/mirror"
else
	"$ROOT_DIR/scripts/fixture.sh" repos "$WORK/extra/mirror" >/dev/null 2>&1
fi

SWEBUILD=$WORK/swebuild
(cd "$ROOT_DIR" && go build -o "$SWEBUILD" ./cmd/swebuild)
GEN=(--dataset "$DATASET" "${INSTANCES[@]}")
[ -f "$SPECS" ] && GEN+=(--specs "$SPECS")
"$SWEBUILD" plan "${GEN[@]}" --platform "$PLATFORMS" --format json >"$WORK/plan.json"
"$SWEBUILD" render "${GEN[@]}" --arch all --out "$WORK/render" >/dev/null

# One line per node: level kind key parent platform arch instance, in plan
# order (bases, envs, instances).
jq -r '.platforms[] | .platform as $p | .nodes[] |
	[(if .kind=="base" then 0 elif .kind=="env" then 1 else 2 end), .kind, .key, (.parent // "-"), $p,
	 (if $p=="linux/amd64" then "x86_64" else "arm64" end), .instances[0]] | @tsv' \
	"$WORK/plan.json" >"$WORK/nodes.tsv"
NODES=$(wc -l <"$WORK/nodes.tsv")

# Context directory per node: only what the Dockerfile copies.
while IFS=$'\t' read -r level kind key parent platform arch inst; do
	src=$WORK/render/$inst/$arch
	ctx=$WORK/ctx/$kind/$arch/$key
	mkdir -p "$ctx"
	cp "$src/Dockerfile.$kind" "$WORK/ctx/$kind/$arch/$key.Dockerfile"
	case $kind in
	base) for f in $(grep -oE '^(ADD|COPY) [^ ]+' "$src/Dockerfile.base" | awk '{print $2}'); do
			f=${f//\$\{TARGETARCH\}/${platform#linux/}}
			ln -f "$CACHE_DIR/rootfs/$f" "$ctx/$f" 2>/dev/null || cp "$CACHE_DIR/rootfs/$f" "$ctx/$f"
		done ;;
	env) cp "$src/setup_env.sh" "$ctx/" ;;
	instance) cp "$src/setup_repo.sh" "$ctx/"
		if grep -q 'source=mirror' "$src/Dockerfile.instance"; then cp -al "$(readlink -f "$WORK/extra/mirror")" "$ctx/mirror"; fi ;;
	esac
done <"$WORK/nodes.tsv"

ctxname() { local k=${1%:latest}; printf '%s' "$k"; }

# buildctl_node LINE: builds one node, pushes it by digest, records its digest.
buildctl_node() {
	local level kind key parent platform arch inst
	IFS=$'\t' read -r level kind key parent platform arch inst <<<"$1"
	local dir=$WORK/ctx/$kind/$arch md=$WORK/md/$arch.$key.json opts=()
	if [ "$parent" != "-" ]; then
		local pd
		pd=$(jq -r '."containerimage.digest"' "$WORK/md/$arch.$parent.json")
		opts+=(--opt "context:$(ctxname "$parent")=docker-image://$SWEBUILD_REGISTRY/bench/buildctl@$pd")
	fi
	"$BUILDCTL" --addr "$BUILDKIT_HOST" build --progress quiet --frontend dockerfile.v0 \
		--local "context=$dir/$key" --local "dockerfile=$dir" --opt "filename=$key.Dockerfile" \
		--opt "platform=$platform" "${opts[@]}" \
		--output "type=image,name=$SWEBUILD_REGISTRY/bench/buildctl,push=true,push-by-digest=true,registry.insecure=true" \
		--metadata-file "$md" >"$WORK/logs/$arch.$key.log" 2>&1 || { echo "buildctl failed: $key ($platform), see log:" >&2; tail -20 "$WORK/logs/$arch.$key.log" >&2; return 1; }
}
export -f buildctl_node ctxname
export WORK BUILDCTL BUILDKIT_HOST SWEBUILD_REGISTRY

now() { date +%s.%N; }
prune() {
	[ "$COLD" = 1 ] || return 0
	"$BUILDCTL" --addr "$BUILDKIT_HOST" prune --all >/dev/null
}

run_buildctl_seq() {
	rm -rf "$WORK/md" "$WORK/logs"; mkdir -p "$WORK/md" "$WORK/logs"
	while IFS= read -r line; do buildctl_node "$line"; done <"$WORK/nodes.tsv"
}
run_buildctl_par() { # level by level, $WORKERS at a time
	rm -rf "$WORK/md" "$WORK/logs"; mkdir -p "$WORK/md" "$WORK/logs"
	for level in 0 1 2; do
		awk -F'\t' -v l=$level '$1==l' "$WORK/nodes.tsv" | tr '\n' '\0' |
			xargs -0 -r -P "$WORKERS" -I{} bash -c 'buildctl_node "$1"' _ {}
	done
}
run_swebuild() { # workers
	"$SWEBUILD" build "${GEN[@]}" --platform "$PLATFORMS" --workers "$1" --progress quiet \
		--push "$SWEBUILD_REGISTRY/bench/swebuild" --run-dir "$WORK/run" \
		--context-dir "$WORK/extra" --context-dir "$CACHE_DIR/rootfs" >"$WORK/swebuild.out" 2>&1 || { cat "$WORK/swebuild.out" >&2; return 1; }
}

declare -A T
timeit() { # name cmd...
	local name=$1; shift
	local t0 t1
	t0=$(now); "$@"; t1=$(now)
	T[$name]=$(echo "$t1 - $t0" | bc -l)
	printf '%-28s %8.2fs\n' "$name" "${T[$name]}"
}

echo "graph: $NODES nodes ($PLATFORMS), workers=$WORKERS, buildkit=$BUILDKIT_HOST"
STATES=(warm)
[ "$COLD" = 1 ] && STATES=(cold warm)
for state in "${STATES[@]}"; do
	# Warm runs follow a first build of the same graph by the same tool.
	if [ "$state" = warm ]; then run_buildctl_seq; run_swebuild "$WORKERS"; fi
	[ "$state" = cold ] && prune; timeit "$state buildctl sequential" run_buildctl_seq
	[ "$state" = cold ] && prune; timeit "$state buildctl parallel" run_buildctl_par
	[ "$state" = cold ] && prune; timeit "$state swebuild workers=1" run_swebuild 1
	[ "$state" = cold ] && prune; timeit "$state swebuild workers=$WORKERS" run_swebuild "$WORKERS"
	best=${T["$state buildctl sequential"]}
	if (($(echo "${T["$state buildctl parallel"]} < $best" | bc -l))); then best=${T["$state buildctl parallel"]}; fi
	sw=${T["$state swebuild workers=$WORKERS"]}
	ratio=$(echo "$sw / $best" | bc -l)
	verdict=ok; (($(echo "$ratio > 1.05" | bc -l))) && verdict="ABOVE TARGET"
	printf '%s: swebuild %.2fs / fastest buildctl %.2fs = %.3fx (target <= 1.05x: %s)\n' "$state" "$sw" "$best" "$ratio" "$verdict"
done
