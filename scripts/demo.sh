#!/usr/bin/env bash
# scripts/demo.sh — the main job on the offline fixture (`make demo`):
# plan, then build every fixture instance for linux/amd64 and linux/arm64 with
# BuildKit (arm64 under QEMU on an x86 host), verify each gold patch on its
# image before pushing, push by digest to the local registry, publish one
# multi-arch index per instance, and print the summary. Then check every image
# independently with skopeo.
#
# Needs the stack and the fixture rootfs (make stack fixture). Environment:
#   SWEBUILD_REGISTRY (default 127.0.0.1:5000), BUILDKIT_HOST,
#   DEMO_REPO (default $SWEBUILD_REGISTRY/swebuild-demo), DEMO_DIR (default runs/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}
registry=${SWEBUILD_REGISTRY:-127.0.0.1:5000}
repo=${DEMO_REPO:-$registry/swebuild-demo}
dir=${DEMO_DIR:-runs/demo}
bin=${SWEBUILD_BIN:-bin/swebuild}
dataset=testdata/fixture/dataset.jsonl
specs=testdata/fixture/specs.json

log() { printf '\ndemo: %s\n' "$*" >&2; }

mkdir -p "$dir"
# The fixture profile bind-mounts the projects' git mirrors (never copied into
# an image) and ADDs the rootfs tarball; both reach the build as context dirs.
if [ ! -d "$dir/context/mirror" ]; then
	rm -rf "$dir/context.tmp"
	scripts/fixture.sh repos "$dir/context.tmp/mirror" >&2
	mv "$dir/context.tmp" "$dir/context"
fi

log "plan"
"$bin" plan --dataset "$dataset" --specs "$specs" --platform linux/amd64,linux/arm64

log "build --verify --push $repo (linux/amd64 native, linux/arm64 emulated)"
start=$(date +%s.%N)
status=0
"$bin" build --dataset "$dataset" --specs "$specs" \
	--platform linux/amd64,linux/arm64 \
	--context-dir "$cache/rootfs" --context-dir "$dir/context" \
	--verify --log-parser parse_log_pytest --push "$repo/build" \
	--progress "${DEMO_PROGRESS:-plain}" \
	--metadata-file "$dir/metadata.jsonl" --run-dir "$dir/build" || status=$?
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN { printf "demo: build wall time %.1f s\n", b - a }' >&2
if [ "$status" -ne 0 ]; then
	log "build failed (exit $status); see $dir/build"
	exit "$status"
fi

log "publish $repo"
"$bin" publish --metadata-file "$dir/metadata.jsonl" --repo "$repo" --ledger "$dir/ledger.jsonl" --require-verified

log "check with skopeo: one manifest per allowed platform, none for x86-only on arm64"
python3 - "$dir/metadata.jsonl" <<'PY'
import json, subprocess, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
bad = 0
for r in rows:
    if r["kind"] != "instance":
        continue
    ref = r.get("ref")
    if not ref:
        continue
    out = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "docker://" + ref],
                         capture_output=True, text=True)
    ok = out.returncode == 0
    bad += not ok
    print(f'{r.get("instance_id",""):24} {r.get("platform",""):12} {"ok" if ok else "MISSING"}  {ref}')
sys.exit(1 if bad else 0)
PY
