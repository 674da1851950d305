#!/usr/bin/env bash
# scripts/demo.sh — the main job on the offline fixture (`make demo`):
# plan, then build every fixture instance (the Python projects and the
# JavaScript one) for linux/amd64 and linux/arm64 with BuildKit (arm64 under
# QEMU on an x86 host), verify each gold patch on its image before pushing
# (graded by the parser each spec profile names: parse_log_pytest,
# parse_log_tap), push by digest to the local registry, publish one
# multi-arch index per instance, and print the summary. Then check every image
# and index independently with skopeo, and, with skopeo alone, what a
# consumer finds attached to each published per-arch image: the gold check's
# verification statement naming its digest, one provenance and one SBOM
# (scripts/check-attestations.sh), and print how long each step took.
# Then the same for the fixture as an upstream v5 task repo
# (testdata/fixture/taskrepo): one flat Dockerfile per task, built with its
# task directory as the context, the fixture's base images bound by digest to
# the names the Dockerfiles start FROM; verified, pushed, published under
# $DEMO_REPO/taskrepo and checked the same way.
#
# The two builds share the base images and run together: the bases are
# built and pushed first (build --until base, under a minute), then the
# dataset's build (its bases cached) and the task repo's (bound to those
# bases by digest) run side by side on the one BuildKit daemon, each line of
# their output prefixed with its build, so the daemon's cores stay busy while
# one of them waits (a lone QEMU test run, an export, a push).
#
# Last, one instance for both platforms is built, verified (the gold check's
# verdict from the verification cache), pushed and published again through
# the stack's registry that requires a login, with the login only in the
# Docker config (as docker login leaves it), and checked with skopeo.
#
# Needs the stack and the fixture rootfs (make stack fixture). Environment:
#   SWEBUILD_REGISTRY (default 127.0.0.1:5000), BUILDKIT_HOST,
#   DEMO_REPO (default $SWEBUILD_REGISTRY/swebuild-demo), DEMO_DIR (default runs/demo),
#   SWEBUILD_AUTH_REGISTRY and DOCKER_CONFIG (scripts/stack.sh env; the login
#   step is skipped when SWEBUILD_AUTH_REGISTRY is unset),
#   SWEBUILD_SIGNING_KEY (scripts/stack.sh env: the demo's signing key pair,
#   cosign.key beside cosign.pub, made here with `swebuild sign keygen` when missing)
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

# step NAME CMD...: runs CMD and records its wall time for the summary (in
# a job started by alongside, in its steps file, named [job] NAME, read back
# by joined).
times=()
steps_file=
steps_prefix=
# row NAME SECONDS: one line of the summary.
row() { printf '%-40s %7.1f s' "$1" "$2"; }
# since NAME T0: the summary line of NAME, begun at T0 ($EPOCHREALTIME).
since() { row "$1" "$(awk -v a="$2" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')"; }
step() {
	local name=$1 t0=$EPOCHREALTIME rc=0 line
	shift
	"$@" || rc=$?
	line=$(since "$steps_prefix$name" "$t0")
	if [ -n "$steps_file" ]; then
		echo "$line" >>"$steps_file"
	else
		times+=("$line")
	fi
	return "$rc"
}
print_times() {
	printf '\ndemo: wall time per step\n' >&2
	printf '  %s\n' "${times[@]}" >&2
}
trap print_times EXIT

mkdir -p "$dir"
# The fixture profiles bind-mount the projects' git mirrors (never copied into
# an image) and ADD the rootfs tarballs; both reach the build as context dirs.
# The mirrors' directory is made once per machine and version of the fixture
# and shared with the tests (scripts/fixture.sh context): BuildKit keys a
# local context by its directory, so the same directory shares the cache.
mirrors() { context=$(scripts/fixture.sh context); }
step "git mirrors" mirrors

# The signing key pair (cosign.key, cosign.pub; empty password unless
# COSIGN_PASSWORD is set), made once and kept with the stack's state.
signing_key=${SWEBUILD_SIGNING_KEY:-${SWEBUILD_STATE:-/var/lib/swebuild}/signing/cosign.key}
if [ ! -f "$signing_key" ]; then
	step "signing key" "$bin" sign keygen --out "$(dirname "$signing_key")"
fi
# publish and check --digests sign with it; check --require-verified and
# --verify-digests trust only its public half.
export SWEBUILD_SIGNING_KEY=$signing_key
signing_pub=$(dirname "$signing_key")/cosign.pub

log "plan"
step "plan" "$bin" plan --dataset "$dataset" --specs "$specs" --platform linux/amd64,linux/arm64

# The base images first: the task repo's Dockerfiles start FROM them, bound
# by digest (a flat Dockerfile in a task dir cannot reach the rootfs
# tarballs); the dataset's build finds them in the daemon's cache.
log "bases: build --until base --push $repo/build"
step "bases: build, push" "$bin" build --dataset "$dataset" --specs "$specs" --until base \
	--platform linux/amd64,linux/arm64 \
	--context-dir "$cache/rootfs" --context-dir "$context" \
	--push "$repo/build" --progress "${DEMO_PROGRESS:-plain}" \
	--metadata-file "$dir/bases-metadata.jsonl" --run-dir "$dir/bases"

# The task Dockerfiles start FROM swebuild-fixture-base-<py|js>-${TARGETARCH}:
# the base images just pushed (kind "base" in the metadata file), bound to
# those names.
base_contexts() {
	python3 - "$dir/bases-metadata.jsonl" <<'PY'
import json, sys
flavours = {"fixture": "py", "js": "js"}  # sweb.base.<language>.<arch>
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "base" and r.get("ref"):
        flavour = flavours[r["key"].split(".")[2]]
        arch = r["platform"].split("/")[1]
        print(f'--build-context=swebuild-fixture-base-{flavour}-{arch}=docker-image://{r["ref"]}')
PY
}
mapfile -t contexts < <(base_contexts)
[ "${#contexts[@]}" -eq 4 ] || { log "expected 4 fixture base images in $dir/bases-metadata.jsonl, got ${#contexts[@]}"; exit 1; }

taskrepo=testdata/fixture/taskrepo
log "task repo: plan"
step "task repo: plan" "$bin" plan --task-repo "$taskrepo" --specs "$specs" --platform linux/amd64,linux/arm64

# alongside NAME CMD...: starts CMD (a command, or a function of steps) in
# the background, each line of its output prefixed with [NAME]; its wall
# time, the times of the steps it ran and its exit status go to
# $dir/NAME.time, $dir/NAME.steps and $dir/NAME.rc (read back by joined).
alongside() {
	local name=$1
	shift
	(
		t0=$EPOCHREALTIME rc=0
		steps_file=$dir/$name.steps steps_prefix="[$name] "
		: >"$steps_file"
		"$@" 2>&1 | sed -u "s/^/[$name] /" || rc=$?
		awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' >"$dir/$name.time"
		echo "$rc" >"$dir/$name.rc"
	) &
}
# joined NAME=LABEL...: waits for the jobs started by alongside, records
# the steps each one ran or, for a lone command,
# its wall time as the step LABEL, and fails when one of them failed.
joined() {
	local pair name rc=0
	wait
	for pair in "$@"; do
		name=${pair%%=*}
		if [ -s "$dir/$name.steps" ]; then
			mapfile -t -O "${#times[@]}" times <"$dir/$name.steps"
		fi
		times+=("$(row "${pair#*=}" "$(cat "$dir/$name.time")") (alongside)")
		if [ "$(cat "$dir/$name.rc")" -ne 0 ]; then
			log "${pair#*=} failed (exit $(cat "$dir/$name.rc")); see its lines above ([$name]) and $dir"
			rc=1
		fi
	done
	return "$rc"
}

log "build --verify --push, the dataset ($repo/build) and the task repo ($repo/taskrepo-build) together (linux/amd64 native, linux/arm64 emulated)"
rm -f "$dir"/*.rc "$dir"/*.steps
t_builds=$EPOCHREALTIME
alongside dataset "$bin" build --dataset "$dataset" --specs "$specs" \
	--platform linux/amd64,linux/arm64 \
	--context-dir "$cache/rootfs" --context-dir "$context" \
	--verify --push "$repo/build" \
	--progress "${DEMO_PROGRESS:-plain}" \
	--metadata-file "$dir/metadata.jsonl" --run-dir "$dir/dataset-build"
alongside taskrepo "$bin" build --task-repo "$taskrepo" --specs "$specs" "${contexts[@]}" \
	--platform linux/amd64,linux/arm64 --verify --push "$repo/taskrepo-build" \
	--progress "${DEMO_PROGRESS:-plain}" \
	--metadata-file "$dir/taskrepo-metadata.jsonl" --run-dir "$dir/taskrepo-build"
status=0
joined "dataset=build, verify, push" "taskrepo=task repo: build, verify" || status=$?
times+=("$(since "both builds, wall" "$t_builds")")
if [ "$status" -ne 0 ]; then
	exit "$status"
fi

# The three chains after the builds (the dataset's publish and checks, the
# task repo's, and the login registry's build and publish) read and write
# apart, so they run together, their lines prefixed with [dataset],
# [taskrepo] and [login]; each stops at its first failed step.

# check [METADATA REPO]: the images and indexes as skopeo finds them.
check() { # [METADATA REPO]
	python3 - "${1:-$dir/metadata.jsonl}" "${2:-$repo}" <<'PY'
import json, subprocess, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
repo = sys.argv[2]
def inspect(ref):
    out = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "docker://" + ref],
                         capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None
bad = 0
built = {}
for r in rows:
    if r["kind"] != "instance" or not r.get("ref"):
        continue
    built.setdefault(r["instance_id"], set()).add(r["platform"])
    ok = inspect(r["ref"]) is not None
    bad += not ok
    print(f'{r["instance_id"]:24} {r["platform"]:12} {"ok" if ok else "MISSING"}  {r["ref"]}')
# The published index of each instance (the naming rule of manifests: lower
# case, "__" written "_1776_") lists exactly the platforms built for it, and
# beside each image its provenance attestation manifest (as buildx lays it
# out: vnd.docker.reference.type attestation-manifest, naming the image).
for iid, plats in sorted(built.items()):
    ref = f'{repo}/sweb.eval.{iid.lower().replace("__", "_1776_")}:latest'
    index = inspect(ref)
    children = (index or {}).get("manifests", [])
    att = [m for m in children if m.get("annotations", {}).get("vnd.docker.reference.type") == "attestation-manifest"]
    imgs = [m for m in children if m not in att]
    got = sorted(f'{m["platform"]["os"]}/{m["platform"]["architecture"]}' for m in imgs if "platform" in m)
    attested = sorted(m["annotations"].get("vnd.docker.reference.digest", "") for m in att)
    ok = index is not None and got == sorted(plats) and attested == sorted(m["digest"] for m in imgs)
    bad += not ok
    print(f'{iid:24} {"index":12} {"ok" if ok else "WRONG"}  {ref}  {" ".join(got)}  ({len(att)} provenance attestations)')
sys.exit(1 if bad else 0)
PY
}

# cosign itself, unmodified (make cosign installs v3 from the Go module
# proxy; make test-all does): every published per-arch image's verification
# statement verifies with the demo's public key.
cosign_verify() { # METADATA REPO
	local refs ref n=0
	mkdir -p "$dir/cosign-home"
	refs=$(python3 - "$1" "$2" <<'PY'
import json, sys
repo = sys.argv[2]
arch = {"linux/amd64": "x86_64", "linux/arm64": "arm64"}
for line in open(sys.argv[1]):
    r = json.loads(line) if line.strip() else {}
    if r.get("kind") == "instance" and r.get("ref"):
        name = r["instance_id"].lower().replace("__", "_1776_")
        print(f'{repo}/sweb.eval.{arch[r["platform"]]}.{name}@{r["digest"]}')
PY
)
	for ref in $refs; do
		HOME=$dir/cosign-home DOCKER_CONFIG=$dir/cosign-home "$cache/bin/cosign" verify-attestation --key "$signing_pub" \
			--insecure-ignore-tlog=true --type https://in-toto.io/attestation/test-result/v0.1 "$ref" >/dev/null 2>"$dir/cosign.err" ||
			{ cat "$dir/cosign.err" >&2; log "cosign refused $ref"; return 1; }
		n=$((n + 1))
	done
	log "cosign verify-attestation --key $signing_pub: $n image(s) verified"
}

dataset_chain() {
	log "publish $repo"
	step "publish" "$bin" publish --metadata-file "$dir/metadata.jsonl" --repo "$repo" --ledger "$dir/ledger.jsonl" --require-verified || return
	log "check with skopeo: one manifest per allowed platform, none for x86-only on arm64, one index per instance"
	step "skopeo check" check || return
	log "check with skopeo: each published image carries its verification statement, one provenance, one SBOM"
	step "skopeo: attestations" scripts/check-attestations.sh "$dir/metadata.jsonl" "$repo" || return
	log "swebuild check: every image present, each with a statement signed by $signing_pub saying verified"
	step "swebuild check" "$bin" check --dataset "$dataset" --specs "$specs" --repo "$repo" --digests "$dir/digests.jsonl" \
		--require-verified --key "$signing_pub" || return
	step "signed digest catalog" "$bin" check --verify-digests "$dir/digests.jsonl" --key "$signing_pub" || return
	if [ -x "$cache/bin/cosign" ]; then
		step "cosign verify-attestation" cosign_verify "$dir/metadata.jsonl" "$repo" || return
	else
		log "cosign not installed (make cosign): the signatures were checked by swebuild check --require-verified alone"
	fi
}

# The fixture as a task repo (built above, alongside the dataset).
taskrepo_chain() {
	log "task repo: publish $repo/taskrepo"
	step "task repo: publish" "$bin" publish --metadata-file "$dir/taskrepo-metadata.jsonl" --repo "$repo/taskrepo" \
		--ledger "$dir/taskrepo-ledger.jsonl" --require-verified || return
	log "task repo: check with skopeo"
	step "task repo: skopeo check" check "$dir/taskrepo-metadata.jsonl" "$repo/taskrepo" || return
	step "task repo: attestations" scripts/check-attestations.sh "$dir/taskrepo-metadata.jsonl" "$repo/taskrepo" || return
	log "task repo: swebuild check $repo/taskrepo"
	step "task repo: swebuild check" "$bin" check --task-repo "$taskrepo" --specs "$specs" --repo "$repo/taskrepo" \
		--digests "$dir/taskrepo-digests.jsonl" --require-verified --key "$signing_pub" || return
}

# The login registry: build (cached by now: only the pushes run), push and
# publish one instance for both platforms, the credential read from
# $DOCKER_CONFIG/config.json by swebuild for BuildKit's session and for the
# publish alike; $SWEBUILD_REGISTRY_AUTH is emptied so it is the only source.
auth_registry=${SWEBUILD_AUTH_REGISTRY:-}
auth_repo=$auth_registry/swebuild-demo
auth_check() {
	local ref=$auth_repo/sweb.eval.fixture_1776_calc-1:latest got
	got=$(skopeo inspect --raw --tls-verify=false --authfile "${DOCKER_CONFIG:-$HOME/.docker}/config.json" "docker://$ref" |
		python3 -c 'import json, sys; print(" ".join(sorted(m["platform"]["os"] + "/" + m["platform"]["architecture"] for m in json.load(sys.stdin)["manifests"] if m.get("annotations", {}).get("vnd.docker.reference.type") != "attestation-manifest")))')
	echo "$ref: $got"
	[ "$got" = "linux/amd64 linux/arm64" ] || return 1
	# and without the login, the registry refuses
	! skopeo inspect --raw --tls-verify=false --no-creds "docker://$ref" >/dev/null 2>&1
}
login_chain() {
	log "build --verify --push and --publish $auth_repo (login from ${DOCKER_CONFIG:-~/.docker}/config.json)"
	step "login registry: build, publish" env SWEBUILD_REGISTRY_AUTH= "$bin" build --dataset "$dataset" --specs "$specs" \
		--instance fixture__calc-1 --platform linux/amd64,linux/arm64 --verify \
		--context-dir "$cache/rootfs" --context-dir "$context" \
		--push "$auth_repo/build" --publish "$auth_repo" --ledger "$dir/auth-ledger.jsonl" \
		--progress quiet --metadata-file "$dir/auth-metadata.jsonl" --run-dir "$dir/auth-build" || return
	step "login registry: skopeo check" auth_check || return
	step "login registry: attestations" scripts/check-attestations.sh "$dir/auth-metadata.jsonl" "$auth_repo" \
		"${DOCKER_CONFIG:-$HOME/.docker}/config.json" || return
}

t_checks=$EPOCHREALTIME
chains=("dataset=dataset: publish, check" "taskrepo=task repo: publish, check")
alongside dataset dataset_chain
alongside taskrepo taskrepo_chain
if [ -n "$auth_registry" ]; then
	alongside login login_chain
	chains+=("login=login registry")
fi
status=0
joined "${chains[@]}" || status=$?
times+=("$(since "publish and checks, wall" "$t_checks")")
exit "$status"
