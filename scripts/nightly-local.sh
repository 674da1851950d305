#!/usr/bin/env bash
# scripts/nightly-local.sh — rehearse .github/workflows/nightly.yml on this
# machine, against the local stack (scripts/stack.sh) and the offline fixture
# dataset: prepare -> env stage (base and env images once per platform, pushed
# by digest) -> instance shards (built FROM those digests) -> merge (sizes,
# drift, publish) -> summary, the same commands in the same order as the workflow.
# Ends by counting, from the records, how often each env was built tonight.
#
#   scripts/nightly-local.sh [--break-gold ID] [--force] [--shards N] [--state DIR]
#   scripts/nightly-local.sh --scenario breaking-dependency|breaking-together
#
#   --break-gold ID  replace ID's gold patch with one that cannot apply; the run
#                    rebuilds everything (--force) and must fail naming ID
#   --force          ignore what the registry already has
#   --shards N       shards per platform (default 2)
#   --env-shards N   env jobs per platform at most (default 1)
#   --state DIR      keeps the ledger and the env ledger between runs (default
#                    .nightly-local); a second run right after a good one
#                    skips every image and every env
#   --scenario NAME  two nights on a fresh state and repository with a package
#                    index of the fixture's own (internal/pyindex): night 1 with
#                    its first releases, night 2 after a release that breaks
#                    calc's tests (breaking-dependency: one package;
#                    breaking-together: two only together); night 2 repairs
#                    (swebuild ci repair) and the script prints the repository,
#                    the proposal and what the repair found (docs/nightly.md)
# Environment: DATASET (default testdata/fixture/dataset.jsonl), SPECS (default
# testdata/fixture/specs.json with the fixture dataset), PLATFORMS (default
# linux/amd64,linux/arm64), MAX_GROWTH (default 10), MAX_DRIFT (default 0), MAX_UNRECORDED (default
# 0: published digests that changed with nothing recorded), VERIFY_FLAGS (default --verify when
# `swebuild build` has it), PINS (the --pins of every step; default: default), REPAIR (default true:
# run `swebuild ci repair` when a shard failed).
# Exit status: that of the summary step (1 on any regression or failure).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\nnightly-local: == %s\n' "$*" >&2; }
die() { printf 'nightly-local: error: %s\n' "$*" >&2; exit 2; }

# run_scenario NAME: two nights of the fixture with a package index of its own
# (internal/pyindex): a fresh state directory and repository, night 1 with the
# index's first releases, night 2 after the release; then what the repair found
# and, for a proposal, the check that applying it (--pins default,FILE) plans
# nothing to build (every image at the spec key the repaired night published).
run_scenario() {
	local name=$1 root stamp rc1=0 rc2=0
	SWEBUILD=${SWEBUILD:-$PWD/bin/swebuild}
	case "$name" in
	breaking-dependency | breaking-together) ;;
	*) die "--scenario $name: want breaking-dependency or breaking-together" ;;
	esac
	if [ -z "${BUILDKIT_HOST:-}" ] || [ -z "${SWEBUILD_REGISTRY:-}" ]; then
		scripts/stack.sh status >/dev/null 2>&1 || die "the local stack is not running: scripts/stack.sh up"
		eval "$(scripts/stack.sh env)"
	fi
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	root=${SCENARIO_DIR:-.nightly-scenario}/$name-$stamp
	case "$root" in /*) ;; *) root=$PWD/$root ;; esac
	local repo=${REPO:-$SWEBUILD_REGISTRY/swebuild-scenario/$name-$(printf '%s' "$stamp" | tr 'A-Z' 'a-z')}
	mkdir -p "$root/state"
	log "scenario $name: package index and specs ($root/index)"
	go run ./internal/pyindex/cmd/fixture-index --scenario "$name" --specs testdata/fixture/specs.json --out "$root/index"
	cat "$root/index/scenario.txt" >&2
	# The fixture's git mirrors, the machine's one copy (scripts/fixture.sh
	# context) shared with the tests and the demo: BuildKit keys a local
	# context by its directory, so the images the scenario does not change
	# (textutil's, semver's) are cache hits instead of rebuilds.
	log "scenario $name: fixture git mirrors"
	local context
	context=$(scripts/fixture.sh context)
	local rootfs=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}/rootfs
	local night
	for night in 1 2; do
		log "scenario $name: night $night"
		local begin=$SECONDS
		REPO=$repo SPECS=$root/index/specs.json DATASET=testdata/fixture/dataset.jsonl \
			CONTEXT_DIRS="$rootfs:$context:$root/index/night$night" \
			MAX_DRIFT=${MAX_DRIFT:--1} "$PWD/scripts/nightly-local.sh" --state "$root/state" --shards "${SCENARIO_SHARDS:-1}" \
			>"$root/night$night.log" 2>&1 || eval "rc$night=\$?"
		printf 'night%s_seconds=%s\n' "$night" "$((SECONDS - begin))" >>"$root/scenario.env"
		printf 'night%s_run=%s\n' "$night" "$(ls -d "$root/state"/run-* | tail -n 1)" >>"$root/scenario.env"
		printf 'night%s_exit=%s\n' "$night" "$(eval echo "\$rc$night")" >>"$root/scenario.env"
		tail -n 30 "$root/night$night.log" >&2
	done
	local run2
	run2=$(ls -d "$root/state"/run-* | tail -n 1)
	local proposal="$run2/repair/proposal.json"
	printf 'repository=%s\nstate=%s\n' "$repo" "$root/state" >>"$root/scenario.env"
	log "scenario $name: what night 2's repair found"
	if [ -f "$run2/repair/report.md" ]; then cat "$run2/repair/report.md"; else echo "(no repair ran: $run2/repair/report.md missing)"; fi
	if [ -f "$proposal" ]; then
		printf 'proposal=%s\n' "$proposal" >>"$root/scenario.env"
		log "scenario $name: applying the proposal (--pins default,$proposal) plans nothing to build"
		"$SWEBUILD" ci matrix --dataset testdata/fixture/dataset.jsonl --specs "$root/index/specs.json" \
			--context-dir "$rootfs" --context-dir "$context" --context-dir "$root/index/night2" \
			--pins "default,$proposal" --platform "${PLATFORMS:-linux/amd64,linux/arm64}" --shards 1 \
			--skip-existing "$repo" --ledger "$root/state/ledger.jsonl" --env-ledger "$root/state/envs.jsonl" \
			--plan-out "$root/applied-plan.json" --ids-dir "$root/applied-ids" --github-output "$root/applied-output" >/dev/null
		python3 - "$root/applied-plan.json" "$root/scenario.env" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
build = sum(c["to_build"] for c in plan["counts"])
wanted = sum(c["wanted"] for c in plan["counts"])
envs = [e for e in plan.get("envs", []) if e["action"] == "build"]
print(f"with the proposal applied: {build} of {wanted} images to build, {len(envs)} env images to build")
with open(sys.argv[2], "a") as f:
    f.write(f"applied_to_build={build}\napplied_envs_to_build={len(envs)}\n")
PY
	fi
	printf '\nrepository: %s\n' "$repo"
	if [ -f "$proposal" ]; then printf 'proposal:   %s\n' "$proposal"; else printf 'proposal:   none (no single package explains it: last night'"'"'s images kept)\n'; fi
	printf 'report:     %s\nsummary:    %s\nnights:     %s, %s (exit %s, %s)\n' "$run2/repair/report.json" "$run2/summary.md" \
		"$root/night1.log" "$root/night2.log" "$rc1" "$rc2"
	[ "$rc1" -eq 0 ] || return "$rc1"
	return 0
}

break_gold=""
scenario=""
force=false
shards=2
env_shards=1
state=.nightly-local
while [ $# -gt 0 ]; do
	case "$1" in
	--break-gold) break_gold=${2:?--break-gold needs an instance id}; force=true; shift 2 ;;
	--force) force=true; shift ;;
	--shards) shards=${2:?--shards needs a number}; shift 2 ;;
	--env-shards) env_shards=${2:?--env-shards needs a number}; shift 2 ;;
	--state) state=${2:?--state needs a directory}; shift 2 ;;
	--scenario) scenario=${2:?--scenario needs a name}; shift 2 ;;
	-h | --help) sed -n '2,34p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done

if [ -n "$scenario" ]; then
	run_scenario "$scenario"
	exit $?
fi

DATASET=${DATASET:-testdata/fixture/dataset.jsonl}
if [ -z "${SPECS+set}" ] && [ "$DATASET" = testdata/fixture/dataset.jsonl ]; then
	SPECS=testdata/fixture/specs.json
fi
SPECS=${SPECS:-}
export SPECS
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
MAX_GROWTH=${MAX_GROWTH:-10}
MAX_DRIFT=${MAX_DRIFT:-0}
SWEBUILD=$PWD/bin/swebuild
export SWEBUILD

# The stack: BuildKit and the registry.
if [ -z "${BUILDKIT_HOST:-}" ] || [ -z "${SWEBUILD_REGISTRY:-}" ]; then
	scripts/stack.sh status >/dev/null 2>&1 || die "the local stack is not running: scripts/stack.sh up"
	eval "$(scripts/stack.sh env)"
fi
REPO=${REPO:-$SWEBUILD_REGISTRY/swebench}
export REPO BUILDKIT_HOST
# publish signs every statement it attaches (on GitHub Actions keylessly;
# here with the stack's key pair, made once as make demo makes it).
SWEBUILD_SIGNING_KEY=${SWEBUILD_SIGNING_KEY:-${SWEBUILD_STATE:-/var/lib/swebuild}/signing/cosign.key}
if [ ! -f "$SWEBUILD_SIGNING_KEY" ]; then
	"$SWEBUILD" sign keygen --out "$(dirname "$SWEBUILD_SIGNING_KEY")" >&2
fi
export SWEBUILD_SIGNING_KEY
[ -f "$DATASET" ] || die "$DATASET not found (scripts/fixture.sh makes the fixture dataset)"

run="$state/run-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run/plan" "$run/shards" "$run/envs" "$state"
ledger="$state/ledger.jsonl"
env_ledger="$state/envs.jsonl"

if [ -n "$break_gold" ]; then
	python3 - "$DATASET" "$run/dataset.jsonl" "$break_gold" <<'PY'
import json, sys
src, dst, target = sys.argv[1:4]
found = False
with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
    for line in f:
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("instance_id") == target:
            rec["patch"] = ("diff --git a/no/such/file.py b/no/such/file.py\n"
                            "--- a/no/such/file.py\n+++ b/no/such/file.py\n"
                            "@@ -1 +1 @@\n-broken\n+gold\n")
            found = True
        out.write(json.dumps(rec) + "\n")
if not found:
    sys.exit(f"--break-gold: {target} is not in {src}")
PY
	DATASET="$run/dataset.jsonl"
fi
export DATASET

log "build swebuild"
make -s build
if [ -z "${VERIFY_FLAGS+set}" ]; then
	if "$SWEBUILD" build --help 2>&1 | grep -q -- '--verify'; then
		VERIFY_FLAGS=--verify
	else
		printf 'nightly-local: warning: swebuild build has no --verify yet: images are built unverified and the merge will not index them\n' >&2
		VERIFY_FLAGS=
	fi
fi
export VERIFY_FLAGS
# The local stack's BuildKit cache is the user's (and on a shared machine,
# everyone's): the shards do not prune it as a hosted runner's shards do.
export KEEP_STORAGE_MB=${KEEP_STORAGE_MB:-none}
specs_args=()
if [ -n "$SPECS" ]; then specs_args=(--specs "$SPECS"); fi
if [ "$SPECS" = testdata/fixture/specs.json ] && [ -z "${CONTEXT_DIRS:-}" ]; then
	# The fixture profile bind-mounts local git mirrors and ADDs the rootfs
	# tarballs (scripts/fixture.sh rootfs makes those). The mirrors are the
	# machine's one copy (scripts/fixture.sh context), shared with the demo
	# and the tests: BuildKit keys a local context by its directory.
	log "fixture git mirrors"
	CONTEXT_DIRS="${SWEBUILD_CACHE:-$HOME/.cache/swebuild}/rootfs:$(scripts/fixture.sh context)"
fi
export CONTEXT_DIRS="${CONTEXT_DIRS:-}"

context_args=()
IFS=: read -r -a context_list <<<"$CONTEXT_DIRS"
for d in "${context_list[@]}"; do
	if [ -n "$d" ]; then context_args+=(--context-dir "$d"); fi
done

log "prepare: plan, skip what the registry has, shard"
"$SWEBUILD" ci matrix --dataset "$DATASET" "${specs_args[@]}" "${context_args[@]}" --platform "$PLATFORMS" --shards "$shards" \
	--skip-existing "$REPO" --ledger "$ledger" --force="$force" \
	--env-ledger "$env_ledger" --env-shards "$env_shards" ${PINS:+--pins "$PINS"} \
	--runner "linux/amd64=local@$(uname -m | sed 's/x86_64/linux\/amd64/;s/aarch64/linux\/arm64/')" \
	--runner "linux/arm64=local@$(uname -m | sed 's/x86_64/linux\/amd64/;s/aarch64/linux\/arm64/')" \
	--plan-out "$run/plan/plan.json" --ids-dir "$run/plan/ids" \
	--github-output "$run/github-output" >"$run/matrix.json"

runner_arch=$(uname -m | sed 's/x86_64/linux\/amd64/;s/aarch64/linux\/arm64/')
# Last night's env images, for the repair (the env stage appends tonight's).
if [ -f "$env_ledger" ]; then cp "$env_ledger" "$run/envs-before.jsonl"; else : >"$run/envs-before.jsonl"; fi
log "env stage"
env_rc=0
while IFS='|' read -r name platform count; do
	[ -n "$name" ] || continue
	log "env job $name ($platform, $count env images)"
	qemu=false
	[ "$platform" = "$runner_arch" ] || qemu=true
	PLATFORM=$platform PLAN="$run/plan/plan.json" ENV_JOB=$name QEMU=$qemu OUT="$run/envs/$name" \
		scripts/nightly-shard.sh envs || env_rc=1
	# The env ledger keeps what was built, for the next run to reuse.
	if [ -f "$run/envs/$name/envs.jsonl" ]; then
		cat "$run/envs/$name/envs.jsonl" >>"$env_ledger"
	fi
done < <(python3 -c '
import json, sys
out = {}
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("=")
    out[k] = v
for j in json.loads(out.get("envs_matrix") or "{\"include\":[]}")["include"]:
    print("|".join([j["name"], j["platform"], str(j["count"])]))
' "$run/github-output")
[ "$env_rc" -eq 0 ] || printf 'nightly-local: an env job failed; its instances fail in their shards\n' >&2

log "build shards"
shard_rc=0
while IFS='|' read -r name platform ids ids_file qemu; do
	[ -n "$name" ] || continue
	log "shard $name ($platform, qemu=$qemu)"
	idsf=""
	if [ -n "$ids_file" ]; then idsf="$run/plan/ids/$ids_file"; fi
	PLATFORM=$platform IDS=$ids IDS_FILE=$idsf QEMU=$qemu OUT="$run/shards/$name" \
		PLAN="$run/plan/plan.json" ENVS_DIR="$run/envs" \
		scripts/nightly-shard.sh build || shard_rc=1
done < <(python3 -c '
import json, sys
for j in json.load(open(sys.argv[1]))["include"]:
    print("|".join([j["name"], j["platform"], j.get("ids", ""), j.get("ids_file", ""), str(j["qemu"]).lower()]))
' "$run/matrix.json")
[ "$shard_rc" -eq 0 ] || printf 'nightly-local: some shard reported failures; the merge decides\n' >&2

# The repair: an env rebuilt tonight whose gold patches failed on images that
# passed last night is bisected to the package that broke it; the images
# rebuilt with the rule holding it back are verified and merged in place of
# the broken ones, the rule proposed (repair/proposal.json).
repair_results=()
repair_args=()
if [ "$shard_rc" -ne 0 ] && [ "${REPAIR:-true}" = true ]; then
	log "repair ($run/repair)"
	repair_begin=$SECONDS
	pins_args=()
	if [ -n "${PINS:-}" ]; then pins_args=(--pins "$PINS"); fi
	if "$SWEBUILD" ci repair --dataset "$DATASET" "${specs_args[@]}" "${context_args[@]}" "${pins_args[@]}" \
		--plan "$run/plan/plan.json" --results "$run/shards" --envs "$run/envs" --env-ledger "$run/envs-before.jsonl" \
		--push "$REPO/build-cache" --out "$run/repair" --progress plain 2>"$run/repair.log"; then
		repair_results=(--results "$run/repair/records.jsonl")
		repair_args=(--repair "$run/repair/report.md")
		cat "$run/repair/envs.jsonl" >>"$env_ledger"
	else
		printf 'nightly-local: the repair failed (log: %s); last lines:\n' "$run/repair.log" >&2
		tail -n 20 "$run/repair.log" >&2 || true
	fi
	printf 'nightly-local: the repair took %s s\n' "$((SECONDS - repair_begin))" >&2
fi

log "merge"
"$SWEBUILD" ci merge --plan "$run/plan/plan.json" --results "$run/shards" "${repair_results[@]}" \
	--out "$run/merge.json" --publish-metadata "$run/publish.jsonl" --fail-on-regression=false \
	--github-output "$run/merge-output"

sizes_failed=false
sizes_args=()
if grep -qx 'indexed=0' "$run/merge-output"; then
	log "sizes: nothing to index, skipped"
else
	log "sizes against what is published"
	sizes_args=(--sizes "$run/sizes.md")
	"$SWEBUILD" sizes --images "$run/publish.jsonl" --against "$REPO" --dataset "$DATASET" \
		--platform "$PLATFORMS" --max-growth "$MAX_GROWTH" --format md -o "$run/sizes.md" || sizes_failed=true
fi

drift_failed=false
drift_args=()
if ! grep -qx 'indexed=0' "$run/merge-output"; then
	log "environment drift against what is published"
	drift_args=(--drift "$run/drift.md")
	# The first night has no ledger yet: no digest of REPO was recorded.
	drift_ledger=()
	if [ -f "$ledger" ]; then drift_ledger=(--ledger "$ledger"); fi
	"$SWEBUILD" drift --images "$REPO" --against "$run/publish.jsonl" --dataset "$DATASET" \
		--specs "$SPECS" --max-drift "$MAX_DRIFT" "${drift_ledger[@]}" --max-unrecorded "${MAX_UNRECORDED:-0}" \
		--format md -o "$run/drift.md" || drift_failed=true
fi

log "publish indexes"
publish_rc=0
"$SWEBUILD" publish --metadata-file "$run/publish.jsonl" --repo "$REPO" --ledger "$ledger" --require-verified || publish_rc=$?

# What a consumer finds attached to each image published tonight, with
# skopeo alone: the shard's verification statement naming its digest, one
# provenance (builder id set), one SBOM.
attest_rc=0
if grep -qx 'indexed=0' "$run/merge-output"; then
	log "attestations: nothing indexed tonight"
else
	log "attestations of the published images, with skopeo alone ($run/attestations.txt)"
	scripts/check-attestations.sh "$run/publish.jsonl" "$REPO" >"$run/attestations.txt" || attest_rc=$?
	cat "$run/attestations.txt"
fi

# The receipts a consumer checks (docs/consume.md): every image the dataset
# calls for carries a statement signed by the night's key saying verified
# (swebuild check --require-verified), and the signed digest catalog of
# what REPO holds ($run/digests.jsonl and .sigstore.json).
receipts_rc=0
signing_pub=$(dirname "$SWEBUILD_SIGNING_KEY")/cosign.pub
log "receipts: check --require-verified --key $signing_pub, signed digest catalog $run/digests.jsonl"
"$SWEBUILD" check --dataset "$DATASET" "${specs_args[@]}" --repo "$REPO" --platform "$PLATFORMS" \
	--require-verified --key "$signing_pub" --digests "$run/digests.jsonl" >"$run/receipts.txt" 2>&1 || receipts_rc=$?
tail -n 4 "$run/receipts.txt"

log "env builds tonight ($run/env-counts.txt)"
envs_once=0
python3 - "$run" >"$run/env-counts.txt" <<'PY' || envs_once=$?
import collections, glob, json, os, sys
run = sys.argv[1]
def records(pattern):
    for path in sorted(glob.glob(os.path.join(run, pattern), recursive=True)):
        for line in open(path, encoding="utf-8"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed shard
            yield path, rec
plan = json.load(open(os.path.join(run, "plan", "plan.json")))
built = collections.Counter()
for _, r in records("envs/*/envs.jsonl"):
    if r["kind"] in ("base", "env") and r.get("status") == "built":
        built[(r["kind"], r["key"], r["platform"])] += 1
in_shards = collections.Counter()
shard_instances = 0
for _, r in records("shards/**/meta/*.jsonl"):
    if r["kind"] in ("base", "env"):
        in_shards[(r["kind"], r["key"], r["platform"])] += 1
    elif r["kind"] == "instance" and r.get("status") == "built":
        shard_instances += 1
reused = [e for e in plan.get("envs", []) if e["action"] == "existing"]
print(f"env stage: {sum(1 for k in built if k[0] == 'env')} env and {sum(1 for k in built if k[0] == 'base')} base images built")
for (kind, key, plat), n in sorted(built.items()):
    print(f"  {kind} {key} {plat}: built {n} time(s) tonight")
for e in reused:
    print(f"  env {e['key']} {e['platform']}: reused {e['ref']}")
print(f"instance shards: {shard_instances} instance images built, {sum(in_shards.values())} base/env records in their metadata")
for (kind, key, plat), n in sorted(in_shards.items()):
    print(f"  BUILT IN A SHARD: {kind} {key} {plat} x{n}")
bad = [k for k, n in built.items() if n > 1] + list(in_shards)
print("each env built at most once tonight: " + ("no" if bad else "yes"))
sys.exit(1 if bad else 0)
PY
cat "$run/env-counts.txt"

log "summary ($run/summary.md)"
summary_rc=0
"$SWEBUILD" ci summary --merge "$run/merge.json" "${sizes_args[@]}" --sizes-failed="$sizes_failed" \
	"${drift_args[@]}" --drift-failed="$drift_failed" "${repair_args[@]}" -o "$run/summary.md" || summary_rc=$?
cat "$run/summary.md"
if [ "$envs_once" -ne 0 ]; then
	printf 'nightly-local: an env was built more than once, or inside an instance shard\n' >&2
	exit 1
fi
if [ "$publish_rc" -ne 0 ]; then
	printf 'nightly-local: publish failed (exit %s)\n' "$publish_rc" >&2
	exit 1
fi
if [ "$attest_rc" -ne 0 ]; then
	printf 'nightly-local: a published image lacks its verification statement, or has more than one provenance or SBOM (%s)\n' "$run/attestations.txt" >&2
	exit 1
fi
if [ "$receipts_rc" -ne 0 ]; then
	printf 'nightly-local: an image the dataset calls for is missing or lacks a signed statement saying verified (%s)\n' "$run/receipts.txt" >&2
	exit 1
fi
exit "$summary_rc"
