#!/usr/bin/env bash
# scripts/bench-render.sh — the whole `swebuild render` process over SWE-bench
# Verified, both arches, --pins none (load 9.5 MB of JSONL, 1,000 renders,
# 7,000 files in 1,501 directories), timed with /usr/bin/time: median and best
# wall, user and system CPU, peak RSS over N runs. Then the same tree written
# by internal/benchtools/writefloor (same paths and sizes, nothing loaded or
# rendered): the floor that file creation and process start-up put under any
# renderer on this machine.
#
#   scripts/bench-render.sh [--runs N] [--dataset FILE] [--out-base DIR]
#
# Output goes to a tmpfs (/dev/shm) when there is one, as the issue's figures
# assume; on a disk file system journaling dominates (ext4 here: ~0.6 s for
# the writes alone).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=9
dataset=${SWEBUILD_SHARED:-../shared/swebench-reference}/datasets/SWE-bench_Verified/test.jsonl
base=
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--dataset) dataset=$2; shift 2 ;;
	--out-base) base=$2; shift 2 ;;
	*) echo "bench-render: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -f "$dataset" ] || { echo "bench-render: no dataset at $dataset" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-render: /usr/bin/time missing (apt-get install -y time)" >&2; exit 1; }
if [ -z "$base" ]; then
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; else base=${TMPDIR:-/tmp}; fi
fi
work=$(mktemp -d "$base/swebuild-bench-render.XXXXXX")
trap 'rm -rf "$work"' EXIT

go build -ldflags "-X main.version=$(git rev-parse --short HEAD 2>/dev/null || echo dev)" -o bin/swebuild ./cmd/swebuild
go build -o bin/writefloor ./internal/benchtools/writefloor

# measure NAME CMD...: runs CMD (which writes $work/out) $runs times and
# prints the median and best of each figure.
measure() {
	local name=$1 i
	shift
	: >"$work/times"
	for ((i = 0; i < runs; i++)); do
		rm -rf "$work/out"
		/usr/bin/time -f '%e %U %S %M' -a -o "$work/times" "$@" >/dev/null
	done
	sort -n -k1,1 "$work/times" | awk -v name="$name" -v n="$runs" '
		{ w[NR] = $1; u[NR] = $2; s[NR] = $3; m[NR] = $4 }
		END {
			mid = int((n + 1) / 2)
			printf "%-16s median wall %.2f s (user %.2f s, sys %.2f s, peak RSS %.0f MiB); best wall %.2f s\n",
				name, w[mid], u[mid], s[mid], m[mid] / 1024, w[1]
		}'
}

echo "bench-render: $runs runs each, output under $base ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
measure "swebuild render" bin/swebuild render --dataset "$dataset" --arch all --pins none --out "$work/out"
find "$work/out" -type f -printf '%P %s\n' >"$work/list"
echo "                 ($(wc -l <"$work/list") files in $(find "$work/out" -type d | wc -l) directories)"
measure "write floor" bin/writefloor -list "$work/list" -out "$work/out"
echo "targets (issue 2): whole process <= 0.10 s wall, <= 60 MiB peak RSS"
