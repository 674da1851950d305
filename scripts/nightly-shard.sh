#!/usr/bin/env bash
# scripts/nightly-shard.sh — one build shard of the nightly, shared by
# .github/workflows/nightly.yml and scripts/nightly-local.sh.
#
#   nightly-shard.sh free-disk   remove preinstalled toolchains a hosted runner
#                                does not need (~14 GB free is too little)
#   nightly-shard.sh envs        the env stage: build and push by digest the base
#                                and env images of env job ENV_JOB of PLAN
#                                (`swebuild ci envs`); records in OUT/envs.jsonl
#   nightly-shard.sh build       build, verify and push by digest every instance
#                                of the shard, one at a time, pruning BuildKit's
#                                cache down to KEEP_STORAGE_MB after each image;
#                                with PLAN, each starts FROM its env's digest
#                                (`swebuild ci contexts`: ENVS_DIR, the env jobs'
#                                records, or the env the plan reuses)
#
# Environment for build:
#   DATASET        dataset file
#   PLATFORM       linux/amd64 or linux/arm64
#   IDS / IDS_FILE the shard's ids (comma-separated) or a file of ids
#   REPO           registry repository prefix; images are pushed by digest to
#                  PUSH_REPO (default $REPO/build-cache)
#   OUT            output directory: meta/<id>.jsonl (build records, the shard's
#                  result for `swebuild ci merge`) and logs/<id>.log
#   BUILDKIT_HOST  BuildKit address (scripts/stack.sh env)
#   SWEBUILD       swebuild binary (default bin/swebuild)
#   KEEP_STORAGE_MB BuildKit cache kept between images (default 6000; "none":
#                  no prune, as scripts/nightly-local.sh runs on a shared stack)
#   SPECS          extra specs file (a data-defined profile), passed as --specs
#   PINS           the pin rules (--pins: default, default,-ID, default,FILE), if set
#   BUILDER_ID     the provenance's runDetails.builder.id (--builder-id; the
#                  workflow sets its run's URL); default: swebuild's own
#   CONTEXT_DIRS   colon-separated directories of context files the profile
#                  names (rootfs tarballs, the fixture's git mirrors)
#   QEMU           "true" when the runner's arch differs from PLATFORM: the
#                  matching qemu-user-static binfmt handler is enabled first
#   PLAN           the plan (`ci matrix --plan-out`); ENV_JOB (envs) the env job,
#                  ENVS_DIR (build) the env jobs' records, if any ran
#   VERIFY_FLAGS   how build verifies (default --verify); empty builds unverified
#                  images, which the merge then refuses to index
# Exit status 1 when any instance failed (the merge decides what that means).
set -euo pipefail

log() { printf 'nightly-shard: %s\n' "$*" >&2; }
die() { printf 'nightly-shard: error: %s\n' "$*" >&2; exit 2; }

free_disk() {
	df -h / >&2
	local d
	for d in /usr/share/dotnet /usr/local/lib/android /opt/ghc /usr/local/.ghcup /opt/hostedtoolcache/CodeQL; do
		if [ -d "$d" ]; then
			log "removing $d"
			sudo rm -rf "$d"
		fi
	done
	df -h / >&2
}

find_buildctl() {
	local c
	for c in "${SWEBUILD_CACHE:-$HOME/.cache/swebuild}"/bin/buildkit-*/buildctl; do
		if [ -x "$c" ]; then
			echo "$c"
			return
		fi
	done
	command -v buildctl || true
}

enable_qemu() {
	local arch
	case "$PLATFORM" in
	linux/amd64) arch=x86_64 ;;
	linux/arm64) arch=aarch64 ;;
	*) die "no QEMU handler known for $PLATFORM" ;;
	esac
	if [ -e "/proc/sys/fs/binfmt_misc/qemu-$arch" ]; then
		return
	fi
	log "enabling QEMU for $PLATFORM (qemu-$arch)"
	if ! command -v update-binfmts >/dev/null || [ ! -e "/usr/libexec/qemu-binfmt/$arch-binfmt-P" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static binfmt-support >&2
	fi
	update-binfmts --enable "qemu-$arch"
}

context_dir_args() {
	local d dirs
	IFS=: read -r -a dirs <<<"${CONTEXT_DIRS:-}"
	for d in "${dirs[@]}"; do
		if [ -n "$d" ]; then
			printf -- '--context-dir\n%s\n' "$d"
		fi
	done
}

build_envs() {
	: "${DATASET:?DATASET is required}" "${PLATFORM:?PLATFORM is required}" "${REPO:?REPO is required}" "${OUT:?OUT is required}"
	: "${PLAN:?PLAN is required}" "${ENV_JOB:?ENV_JOB is required}"
	local swebuild=${SWEBUILD:-bin/swebuild}
	local push_repo=${PUSH_REPO:-$REPO/build-cache}
	local extra=()
	if [ -n "${SPECS:-}" ]; then
		extra+=(--specs "$SPECS")
	fi
	if [ -n "${PINS:-}" ]; then
		extra+=(--pins "$PINS")
	fi
	local cd_args
	mapfile -t cd_args < <(context_dir_args)
	extra+=("${cd_args[@]}")
	if [ -n "${BUILDER_ID:-}" ]; then
		extra+=(--builder-id "$BUILDER_ID")
	fi
	[ -x "$swebuild" ] || die "$swebuild not found (make build)"
	if [ "${QEMU:-false}" = true ]; then
		enable_qemu
	fi
	mkdir -p "$OUT"
	log "$PLATFORM: env job $ENV_JOB, pushing by digest to $push_repo"
	if "$swebuild" ci envs --dataset "$DATASET" --plan "$PLAN" --job "$ENV_JOB" --push "$push_repo" \
		--metadata-file "$OUT/envs.jsonl" --run-dir "$OUT/runs" --progress plain "${extra[@]}" >"$OUT/envs.log" 2>&1; then
		log "env job $ENV_JOB: ok ($(grep -c '"kind":"env"' "$OUT/envs.jsonl") env records)"
	else
		log "env job $ENV_JOB FAILED (log: $OUT/envs.log); last lines:"
		tail -n 20 "$OUT/envs.log" >&2 || true
		return 1
	fi
}

build_shard() {
	: "${DATASET:?DATASET is required}" "${PLATFORM:?PLATFORM is required}" "${REPO:?REPO is required}" "${OUT:?OUT is required}"
	local swebuild=${SWEBUILD:-bin/swebuild}
	local push_repo=${PUSH_REPO:-$REPO/build-cache}
	local keep=${KEEP_STORAGE_MB:-6000}
	local extra=()
	if [ -n "${SPECS:-}" ]; then
		extra+=(--specs "$SPECS")
	fi
	if [ -n "${PINS:-}" ]; then
		extra+=(--pins "$PINS")
	fi
	local d dirs
	IFS=: read -r -a dirs <<<"${CONTEXT_DIRS:-}"
	for d in "${dirs[@]}"; do
		if [ -n "$d" ]; then
			extra+=(--context-dir "$d")
		fi
	done
	local verify
	read -r -a verify <<<"${VERIFY_FLAGS---verify}"
	extra+=("${verify[@]}")
	if [ -n "${BUILDER_ID:-}" ]; then
		extra+=(--builder-id "$BUILDER_ID")
	fi
	[ -x "$swebuild" ] || die "$swebuild not found (make build)"
	if [ "${QEMU:-false}" = true ]; then
		enable_qemu
	fi
	local src=(--ids "${IDS:-}")
	if [ -n "${IDS_FILE:-}" ]; then
		src=(--ids-file "$IDS_FILE")
	fi
	local ids
	mapfile -t ids < <("$swebuild" ci ids "${src[@]}")
	[ "${#ids[@]}" -gt 0 ] || die "no instance ids for this shard"
	local buildctl
	buildctl=$(find_buildctl)
	mkdir -p "$OUT/meta" "$OUT/logs"
	log "$PLATFORM: ${#ids[@]} instances, pushing by digest to $push_repo"
	local id failed=0 n=0
	for id in "${ids[@]}"; do
		n=$((n + 1))
		local logf="$OUT/logs/$id.log"
		local bind=()
		if [ -n "${PLAN:-}" ]; then
			local envs_args=() ctx
			if [ -n "${ENVS_DIR:-}" ] && [ -d "$ENVS_DIR" ]; then
				envs_args=(--envs "$ENVS_DIR")
			fi
			if ! ctx=$("$swebuild" ci contexts --plan "$PLAN" "${envs_args[@]}" --platform "$PLATFORM" --instance "$id" \
				--failure-record "$OUT/meta/$id.jsonl" 2>"$logf"); then
				failed=$((failed + 1))
				log "[$n/${#ids[@]}] FAILED $id: its env image is not available: $(cat "$logf")"
				continue
			fi
			if [ -n "$ctx" ]; then
				bind=(--build-context "$ctx")
			fi
		fi
		if "$swebuild" build --dataset "$DATASET" --instance "$id" --platform "$PLATFORM" \
			--push "$push_repo" --metadata-file "$OUT/meta/$id.jsonl" --run-dir "$OUT/runs/$id" \
			--progress plain "${bind[@]}" "${extra[@]}" >"$logf" 2>&1; then
			log "[$n/${#ids[@]}] ok $id"
		else
			failed=$((failed + 1))
			log "[$n/${#ids[@]}] FAILED $id (log: $logf); last lines:"
			tail -n 20 "$logf" >&2 || true
		fi
		if [ "$keep" != none ] && [ -n "$buildctl" ] && [ -n "${BUILDKIT_HOST:-}" ]; then
			"$buildctl" --addr "$BUILDKIT_HOST" prune --keep-storage "$keep" >/dev/null ||
				log "warning: prune failed after $id"
		fi
	done
	log "$PLATFORM: $((${#ids[@]} - failed)) built and verified, $failed failed"
	[ "$failed" -eq 0 ]
}

case "${1:-}" in
free-disk) free_disk ;;
build) build_shard ;;
envs) build_envs ;;
*)
	sed -n '2,41p' "$0" >&2
	exit 2
	;;
esac
