#!/usr/bin/env bash
# scripts/stack.sh — the local build stack swebuild uses: BuildKit (buildkitd, oci
# worker, runc, overlayfs), a plain-HTTP registry on 127.0.0.1:5000 with no login,
# and a second one on 127.0.0.1:5001 that requires one (htpasswd; its login is
# in a Docker config.json, as `docker login` writes it).
#
#   scripts/stack.sh up       install packages, build buildkitd/buildctl, enable
#                             qemu-aarch64 binfmt, start the daemons that are not
#                             running (idempotent)
#   scripts/stack.sh down     stop the daemons by pid file
#   scripts/stack.sh status   report each daemon; exit 1 unless all are ready
#   scripts/stack.sh env      print the exports the tests and swebuild read
#   scripts/stack.sh build    only build/cache buildkitd and buildctl
#   scripts/stack.sh packages only install the Debian packages
#   scripts/stack.sh binfmt   install the packages and enable qemu-aarch64 binfmt
#
# Environment: SWEBUILD_CACHE (default ~/.cache/swebuild) holds the compiled
# BuildKit binaries under bin/buildkit-<version>/; SWEBUILD_RUN (default
# /run/swebuild) the pid files, logs, configs and socket; SWEBUILD_STATE (default
# /var/lib/swebuild) the BuildKit root and registry storage; SWEBUILD_REGISTRY_ADDR
# (default 127.0.0.1:5000) the registry listen address, SWEBUILD_AUTH_REGISTRY_ADDR
# (default 127.0.0.1:5001) the login registry's. The overrides exist so a second,
# throw-away stack can be tested beside the shared one. Must run as root.
#
# The login registry: user "swebuild", a random password made once and kept in
# $SWEBUILD_STATE/registry-auth-login/password (0600), its bcrypt line in the
# htpasswd file there, and $SWEBUILD_STATE/docker-config/config.json holding the
# login as `docker login` writes it (`env` prints DOCKER_CONFIG=that directory).
#
# Verified in this sandbox (Debian 12, cgroup v1, no CAP_SYS_RESOURCE): rootful
# runc with BuildKit's default (non-privileged) capability set works with no
# extra flags; the oci worker picks host networking ("using host network as the
# default"), so RUN steps need no CNI and work without internet. Privileged RUN
# steps (--security=insecure) would fail here. buildctl debug workers lists
# linux/amd64 and linux/arm64 (arm64 RUN steps run through qemu-aarch64 binfmt,
# registered with the F flag).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(dirname "$SCRIPT_DIR")
BUILDKIT_VERSION=v0.34.2
BUILDKIT_MODULE=github.com/moby/buildkit
CACHE_DIR=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}
BIN_DIR=$CACHE_DIR/bin/buildkit-$BUILDKIT_VERSION
RUN_DIR=${SWEBUILD_RUN:-/run/swebuild}
STATE_DIR=${SWEBUILD_STATE:-/var/lib/swebuild}
BUILDKIT_ROOT=$STATE_DIR/buildkit
REGISTRY_ROOT=$STATE_DIR/registry
BUILDKIT_ADDR=unix://$RUN_DIR/buildkitd.sock
REGISTRY_ADDR=${SWEBUILD_REGISTRY_ADDR:-127.0.0.1:5000}
REGISTRY_BIN=/usr/bin/docker-registry
AUTH_REGISTRY_ADDR=${SWEBUILD_AUTH_REGISTRY_ADDR:-127.0.0.1:5001}
AUTH_REGISTRY_ROOT=$STATE_DIR/registry-auth
AUTH_LOGIN_DIR=$STATE_DIR/registry-auth-login
AUTH_USER=swebuild
DOCKER_CONFIG_DIR=$STATE_DIR/docker-config
# Debian packages the stack and the fixture need on the host.
PACKAGES=(runc docker-registry qemu-user-static binfmt-support debootstrap mmdebstrap skopeo
	git curl ca-certificates python3 python3-pytest python3-setuptools)

log() { printf 'stack: %s\n' "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (BuildKit's oci worker runs runc rootful)"
}

# --- packages -------------------------------------------------------------

missing_packages() {
	local p
	for p in "${PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			printf '%s\n' "$p"
		fi
	done
}

install_packages() {
	local missing
	missing=$(missing_packages)
	if [ -z "$missing" ]; then
		return 0
	fi
	log "installing: $(echo $missing)"
	# Other tools on the machine may hold the dpkg lock for a while; wait for it.
	apt-get -o DPkg::Lock::Timeout=600 update -q >&2 || die "apt-get update failed"
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
		--no-install-recommends $missing >&2 || die "apt-get install failed"
	stop_packaged_registry
}

# Debian's docker-registry package ships its own service (config with auth,
# port 5000). We run our own registry, so the packaged one must not run.
stop_packaged_registry() {
	if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
		systemctl disable --now docker-registry >/dev/null 2>&1 || true
	elif [ -x /etc/init.d/docker-registry ]; then
		/etc/init.d/docker-registry stop >/dev/null 2>&1 || true
	fi
	local pid
	for pid in $(pgrep -x docker-registry 2>/dev/null || true); do
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '/etc/docker/registry/config.yml'; then
			log "stopping the packaged docker-registry (pid $pid)"
			kill "$pid" 2>/dev/null || true
		fi
	done
}

# --- BuildKit binaries ----------------------------------------------------

build_buildkit() {
	if [ -x "$BIN_DIR/buildkitd" ] && [ -x "$BIN_DIR/buildctl" ]; then
		return 0
	fi
	# One build at a time: a second caller waits, then finds the binaries.
	mkdir -p "$BIN_DIR"
	exec 8>"$BIN_DIR/.lock"
	flock 8
	if [ -x "$BIN_DIR/buildkitd" ] && [ -x "$BIN_DIR/buildctl" ]; then
		flock -u 8
		return 0
	fi
	command -v go >/dev/null 2>&1 || die "go is required to build BuildKit $BUILDKIT_VERSION"
	# buildkitd and buildctl are tools of swebuild's module (go.mod's tool
	# block): the daemon is the BuildKit version swebuild's client library
	# is, and they are compiled with the same dependency versions and flags
	# (scripts/go-build.sh), so the packages they share with swebuild are
	# compiled once (swebuild then compiles in 25 s instead of 39 s).
	local want tmp ldflags
	want=$(cd "$ROOT_DIR" && GOWORK=off go list -m -f '{{.Version}}' "$BUILDKIT_MODULE") ||
		die "reading the $BUILDKIT_MODULE version from $ROOT_DIR/go.mod failed"
	[ "$want" = "$BUILDKIT_VERSION" ] ||
		die "go.mod requires $BUILDKIT_MODULE $want but this script runs $BUILDKIT_VERSION: change both"
	tmp=$(mktemp -d "$BIN_DIR/.build.XXXXXX")
	ldflags="-X $BUILDKIT_MODULE/version.Version=$BUILDKIT_VERSION -X $BUILDKIT_MODULE/version.Package=$BUILDKIT_MODULE"
	log "building buildkitd and buildctl $BUILDKIT_VERSION (a few minutes cold)"
	(
		cd "$ROOT_DIR"
		export GOWORK=off
		"$SCRIPT_DIR/go-build.sh" "$ldflags" -o "$tmp/" "$BUILDKIT_MODULE/cmd/buildkitd" "$BUILDKIT_MODULE/cmd/buildctl"
	) >&2 || { rm -rf "$tmp"; die "building BuildKit failed"; }
	mv "$tmp/buildkitd" "$tmp/buildctl" "$BIN_DIR/"
	rmdir "$tmp"
	flock -u 8
	log "cached in $BIN_DIR"
}

# --- binfmt -----------------------------------------------------------------

enable_binfmt() {
	local bm=/proc/sys/fs/binfmt_misc
	if [ ! -e "$bm/register" ]; then
		mount -t binfmt_misc binfmt_misc "$bm" || die "cannot mount binfmt_misc on $bm"
	fi
	update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
	if ! head -n1 "$bm/qemu-aarch64" 2>/dev/null | grep -qx enabled; then
		# update-binfmts only knows formats whose package was configured while
		# binfmt_misc was mounted; import them again then retry.
		update-binfmts --import qemu-aarch64 >/dev/null 2>&1 || true
		update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
	fi
	head -n1 "$bm/qemu-aarch64" 2>/dev/null | grep -qx enabled ||
		die "qemu-aarch64 binfmt handler is not enabled ($bm/qemu-aarch64)"
	# F (fix binary) makes the interpreter usable inside containers' mount namespaces.
	grep -q '^flags: .*F' "$bm/qemu-aarch64" ||
		log "warning: qemu-aarch64 binfmt lacks the F flag; arm64 RUN steps may fail"
}

# --- daemons ------------------------------------------------------------------

pid_alive() { # pidfile
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

buildkit_ready() {
	"$BIN_DIR/buildctl" --addr "$BUILDKIT_ADDR" debug workers >/dev/null 2>&1
}

registry_ready() {
	curl -fsS -o /dev/null --max-time 2 "http://$REGISTRY_ADDR/v2/" 2>/dev/null
}

# The login registry is ready when /v2/ asks for a login and takes ours (the
# password goes to curl on stdin, never in argv).
auth_registry_ready() {
	local code
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 "http://$AUTH_REGISTRY_ADDR/v2/" 2>/dev/null) || return 1
	[ "$code" = 401 ] || return 1
	printf 'user = "%s:%s"\n' "$AUTH_USER" "$(cat "$AUTH_LOGIN_DIR/password")" |
		curl -fsS -o /dev/null --max-time 2 -K - "http://$AUTH_REGISTRY_ADDR/v2/" 2>/dev/null
}

wait_for() { # name seconds check-function pidfile log
	local name=$1 secs=$2 check=$3 pidfile=$4 logf=$5 i
	for ((i = 0; i < secs * 10; i++)); do
		if $check; then
			return 0
		fi
		if ! pid_alive "$pidfile"; then
			tail -n 20 "$logf" >&2 || true
			die "$name exited during start-up (log: $logf)"
		fi
		sleep 0.1
	done
	tail -n 20 "$logf" >&2 || true
	die "$name not ready after ${secs}s (log: $logf)"
}

write_buildkitd_config() {
	cat >"$RUN_DIR/buildkitd.toml" <<EOF
# written by scripts/stack.sh
root = "$BUILDKIT_ROOT"

[grpc]
  address = ["$BUILDKIT_ADDR"]

[worker.oci]
  enabled = true
  snapshotter = "overlayfs"
  binary = "runc"

[worker.containerd]
  enabled = false

# the local registry speaks plain HTTP
[registry."$REGISTRY_ADDR"]
  http = true
  insecure = true

[registry."localhost:5000"]
  http = true
  insecure = true

# the login registry speaks plain HTTP too (loopback only)
[registry."$AUTH_REGISTRY_ADDR"]
  http = true
  insecure = true
EOF
}

# make_auth_login makes, once, the login registry's password and its htpasswd
# line (bcrypt at the lowest cost: distribution checks it on every request),
# and writes the Docker config holding the login.
make_auth_login() {
	mkdir -p "$AUTH_LOGIN_DIR" "$DOCKER_CONFIG_DIR"
	chmod 700 "$AUTH_LOGIN_DIR" "$DOCKER_CONFIG_DIR"
	if [ ! -s "$AUTH_LOGIN_DIR/password" ]; then
		(umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=\n' >"$AUTH_LOGIN_DIR/password")
	fi
	local pw hash
	pw=$(cat "$AUTH_LOGIN_DIR/password")
	if [ ! -s "$AUTH_LOGIN_DIR/htpasswd" ]; then
		if command -v htpasswd >/dev/null 2>&1; then
			hash=$(printf '%s\n' "$pw" | htpasswd -niBC 4 "$AUTH_USER" | head -n1 | cut -d: -f2-)
		else
			hash=$(PW=$pw python3 -W ignore -c 'import crypt, os; print(crypt.crypt(os.environ["PW"], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))')
		fi
		case $hash in '$2'*) ;; *) die "could not hash the login registry's password (needs htpasswd or python3's crypt)" ;; esac
		(umask 077; printf '%s:%s\n' "$AUTH_USER" "$hash" >"$AUTH_LOGIN_DIR/htpasswd")
	fi
	(umask 077; printf '{\n  "auths": {\n    "%s": {"auth": "%s"}\n  }\n}\n' \
		"$AUTH_REGISTRY_ADDR" "$(printf '%s:%s' "$AUTH_USER" "$pw" | base64 -w0)" >"$DOCKER_CONFIG_DIR/config.json")
}

write_auth_registry_config() {
	cat >"$RUN_DIR/registry-auth.yml" <<EOF
# written by scripts/stack.sh: htpasswd login, filesystem storage, deletes allowed
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $AUTH_REGISTRY_ROOT
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
auth:
  htpasswd:
    realm: swebuild-auth
    path: $AUTH_LOGIN_DIR/htpasswd
http:
  addr: $AUTH_REGISTRY_ADDR
  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

write_registry_config() {
	cat >"$RUN_DIR/registry.yml" <<EOF
# written by scripts/stack.sh: no auth, filesystem storage, deletes allowed
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $REGISTRY_ROOT
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: $REGISTRY_ADDR
  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

start_buildkitd() {
	local pidfile=$RUN_DIR/buildkitd.pid logf=$RUN_DIR/buildkitd.log
	if pid_alive "$pidfile" && buildkit_ready; then
		log "buildkitd already running (pid $(cat "$pidfile"))"
		if ! grep -qF "[registry.\"$AUTH_REGISTRY_ADDR\"]" "$RUN_DIR/buildkitd.toml" 2>/dev/null; then
			# Not restarted under others' builds: BuildKit talks plain
			# HTTP to loopback hosts it has no entry for; the next start
			# writes the entry.
			log "note: buildkitd's config predates the login registry $AUTH_REGISTRY_ADDR (loopback: plain HTTP anyway); its next start adds it"
		fi
		return 0
	fi
	if pid_alive "$pidfile"; then
		# Alive but not answering: give a starting daemon a moment first.
		wait_for buildkitd 30 buildkit_ready "$pidfile" "$logf"
		return 0
	fi
	mkdir -p "$BUILDKIT_ROOT"
	rm -f "$RUN_DIR/buildkitd.sock"
	write_buildkitd_config
	# 8>&- 9>&-: the daemons must not inherit (and hold forever) the script's locks.
	setsid "$BIN_DIR/buildkitd" --config "$RUN_DIR/buildkitd.toml" \
		--oci-worker=true --containerd-worker=false \
		--oci-worker-snapshotter=overlayfs \
		--oci-worker-platform linux/amd64 --oci-worker-platform linux/arm64 \
		</dev/null >>"$logf" 2>&1 8>&- 9>&- &
	echo $! >"$pidfile"
	wait_for buildkitd 60 buildkit_ready "$pidfile" "$logf"
	log "buildkitd ready at $BUILDKIT_ADDR (pid $(cat "$pidfile"))"
}

start_registry() {
	local pidfile=$RUN_DIR/registry.pid logf=$RUN_DIR/registry.log
	if pid_alive "$pidfile" && registry_ready; then
		log "registry already running (pid $(cat "$pidfile"))"
		return 0
	fi
	if pid_alive "$pidfile"; then
		wait_for registry 30 registry_ready "$pidfile" "$logf"
		return 0
	fi
	stop_packaged_registry
	if registry_ready; then
		die "something else already answers on $REGISTRY_ADDR; free the port first"
	fi
	mkdir -p "$REGISTRY_ROOT"
	write_registry_config
	# Distribution 2.8 rebuilds its URL router (compiling its route regexps)
	# for every request; most of its CPU per request is garbage collection of
	# that. GOGC=400 halves it (see internal/regtest.RegistryGOGC).
	GOGC=${REGISTRY_GOGC:-400} setsid "$REGISTRY_BIN" serve "$RUN_DIR/registry.yml" </dev/null >>"$logf" 2>&1 8>&- 9>&- &
	echo $! >"$pidfile"
	wait_for registry 30 registry_ready "$pidfile" "$logf"
	log "registry ready at http://$REGISTRY_ADDR (pid $(cat "$pidfile"))"
}

start_auth_registry() {
	local pidfile=$RUN_DIR/registry-auth.pid logf=$RUN_DIR/registry-auth.log
	make_auth_login
	if pid_alive "$pidfile" && auth_registry_ready; then
		log "login registry already running (pid $(cat "$pidfile"))"
		return 0
	fi
	if pid_alive "$pidfile"; then
		wait_for "login registry" 30 auth_registry_ready "$pidfile" "$logf"
		return 0
	fi
	if curl -sS -o /dev/null --max-time 2 "http://$AUTH_REGISTRY_ADDR/v2/" 2>/dev/null; then
		die "something else already answers on $AUTH_REGISTRY_ADDR; free the port first"
	fi
	mkdir -p "$AUTH_REGISTRY_ROOT"
	write_auth_registry_config
	GOGC=${REGISTRY_GOGC:-400} setsid "$REGISTRY_BIN" serve "$RUN_DIR/registry-auth.yml" </dev/null >>"$logf" 2>&1 8>&- 9>&- &
	echo $! >"$pidfile"
	wait_for "login registry" 30 auth_registry_ready "$pidfile" "$logf"
	log "login registry ready at http://$AUTH_REGISTRY_ADDR (pid $(cat "$pidfile"), login in $DOCKER_CONFIG_DIR/config.json)"
}

stop_daemon() { # name pidfile
	local name=$1 pidfile=$2 pid i
	if ! pid_alive "$pidfile"; then
		rm -f "$pidfile"
		log "$name not running"
		return 0
	fi
	pid=$(cat "$pidfile")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$name (pid $pid) did not stop in 10s; sending SIGKILL"
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
	log "$name stopped"
}

# --- commands -----------------------------------------------------------------

# Serialise up/down so concurrent callers do not start two daemons.
lock_stack() {
	mkdir -p "$RUN_DIR"
	exec 9>"$RUN_DIR/stack.flock"
	flock 9
}

cmd_up() {
	require_root
	lock_stack
	install_packages
	build_buildkit
	enable_binfmt
	mkdir -p "$RUN_DIR" "$STATE_DIR"
	start_registry
	start_auth_registry
	start_buildkitd
	if ! "$BIN_DIR/buildctl" --addr "$BUILDKIT_ADDR" debug workers | grep -q 'linux/arm64'; then
		die "buildkitd workers do not list linux/arm64 (see buildctl --addr $BUILDKIT_ADDR debug workers)"
	fi
}

cmd_down() {
	require_root
	lock_stack
	stop_daemon buildkitd "$RUN_DIR/buildkitd.pid"
	stop_daemon registry "$RUN_DIR/registry.pid"
	stop_daemon "login registry" "$RUN_DIR/registry-auth.pid"
}

cmd_status() {
	local rc=0
	if pid_alive "$RUN_DIR/buildkitd.pid" && buildkit_ready; then
		echo "buildkitd: running (pid $(cat "$RUN_DIR/buildkitd.pid"), $BUILDKIT_ADDR)"
		"$BIN_DIR/buildctl" --addr "$BUILDKIT_ADDR" debug workers | sed 's/^/  /'
	else
		echo "buildkitd: not running"
		rc=1
	fi
	if pid_alive "$RUN_DIR/registry.pid" && registry_ready; then
		echo "registry: running (pid $(cat "$RUN_DIR/registry.pid"), http://$REGISTRY_ADDR)"
	else
		echo "registry: not running"
		rc=1
	fi
	if pid_alive "$RUN_DIR/registry-auth.pid" && auth_registry_ready; then
		echo "login registry: running (pid $(cat "$RUN_DIR/registry-auth.pid"), http://$AUTH_REGISTRY_ADDR, login in $DOCKER_CONFIG_DIR/config.json)"
	else
		echo "login registry: not running"
		rc=1
	fi
	if head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null | grep -qx enabled; then
		echo "binfmt qemu-aarch64: enabled"
	else
		echo "binfmt qemu-aarch64: not enabled"
		rc=1
	fi
	return $rc
}

cmd_env() {
	echo "export BUILDKIT_HOST=$BUILDKIT_ADDR"
	echo "export SWEBUILD_REGISTRY=$REGISTRY_ADDR"
	echo "export SWEBUILD_AUTH_REGISTRY=$AUTH_REGISTRY_ADDR"
	echo "export DOCKER_CONFIG=$DOCKER_CONFIG_DIR"
	echo "export PATH=$BIN_DIR:\$PATH"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
build) build_buildkit ;;
packages) require_root; install_packages ;;
binfmt) require_root; install_packages; enable_binfmt ;;
*)
	echo "usage: $0 up|down|status|env|build|packages|binfmt" >&2
	exit 2
	;;
esac
