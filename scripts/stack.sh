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
#   scripts/stack.sh pool up N [PLATFORM]   start N more buildkitds for PLATFORM
#                             (default linux/amd64; linux/arm64 runs under QEMU),
#                             each with its own state, socket, pid file and log; with
#                             POOL_TLS=1 each listens on tcp://127.0.0.1 with mutual
#                             TLS (a CA and certificates made with openssl)
#   scripts/stack.sh pool down|status|file  stop / list the pool's daemons / print a
#                             pool file for swebuild build --pool
#   scripts/stack.sh docker up|down|status|env
#                             Debian's dockerd (docker.io, with its containerd and
#                             runc) on its own socket $SWEBUILD_RUN/docker.sock and
#                             data-root $SWEBUILD_STATE/docker, for `swebuild verify
#                             --engine docker` and its tests; separate from `up`
#                             and `down`, and it leaves any other dockerd alone
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
# The demo's signing key pair (cosign.key/cosign.pub, made by scripts/demo.sh with
# `swebuild sign keygen`); `env` names both.
SIGNING_DIR=${SWEBUILD_SIGNING_DIR:-$STATE_DIR/signing}
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
		GO_BUILD_LABEL="stack: compiling buildkitd and buildctl" \
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

# pid_alive PIDFILE: the file's process lives and is one of this stack's
# daemons: its command line names $RUN_DIR (each daemon's config, socket or
# exec-root is there). A machine that stopped without `down` (a CI job's end
# kills every process) leaves pid files behind, and their pids are given to
# other processes later: a bare `kill -0` took such a process for the daemon,
# waited for it to answer, and `down` would have signalled it.
pid_alive() { # pidfile
	local pid
	pid=$(pid_in "$1") || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$RUN_DIR/"
}

# pid_in PIDFILE prints the pid the file holds, or fails.
pid_in() {
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1" 2>/dev/null) || return 1
	case $pid in '' | *[!0-9]*) return 1 ;; esac
	echo "$pid"
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
		# The process just started: until it execs, its command line is
		# still this script's, so only whether it lives is asked here.
		if ! kill -0 "$(pid_in "$pidfile")" 2>/dev/null; then
			tail -n 20 "$logf" >&2 || true
			die "$name exited during start-up (log: $logf)"
		fi
		sleep 0.1
	done
	tail -n 20 "$logf" >&2 || true
	die "$name not ready after ${secs}s (log: $logf)"
}

# spawn_daemon NAME SECONDS CHECK PIDFILE LOG COMMAND...: starts COMMAND in a
# session of its own (stdin /dev/null, output appended to LOG), writes its pid
# to PIDFILE and waits for CHECK as wait_for does.
spawn_daemon() {
	local name=$1 secs=$2 check=$3 pidfile=$4 logf=$5
	shift 5
	# 8>&- 9>&-: the daemons must not inherit (and hold forever) the script's locks.
	setsid "$@" </dev/null >>"$logf" 2>&1 8>&- 9>&- &
	echo $! >"$pidfile"
	wait_for "$name" "$secs" "$check" "$pidfile" "$logf"
}

# buildkitd_config WRITER ROOT [GRPC_ADDR]: what every buildkitd's config here
# says (the stack's and the pool's): its root, its address unless given by
# flag, the oci worker on runc and overlayfs, the local registry as plain HTTP.
buildkitd_config() {
	local writer=$1 root=$2 grpc=${3:-}
	printf '# written by %s\nroot = "%s"\n\n' "$writer" "$root"
	if [ -n "$grpc" ]; then
		printf '[grpc]\n  address = ["%s"]\n\n' "$grpc"
	fi
	cat <<EOF
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
EOF
}

write_buildkitd_config() {
	{
		buildkitd_config scripts/stack.sh "$BUILDKIT_ROOT" "$BUILDKIT_ADDR"
		cat <<EOF

[registry."localhost:5000"]
  http = true
  insecure = true

# the login registry speaks plain HTTP too (loopback only)
[registry."$AUTH_REGISTRY_ADDR"]
  http = true
  insecure = true
EOF
	} >"$RUN_DIR/buildkitd.toml"
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

# registry_config ROOT ADDR [HTPASSWD]: a config for Debian's registry:
# filesystem storage under ROOT, deletes allowed, listening on ADDR; with
# HTPASSWD, a login checked against that file.
registry_config() {
	local root=$1 addr=$2 htpasswd=${3:-}
	if [ -n "$htpasswd" ]; then
		echo "# written by scripts/stack.sh: htpasswd login, filesystem storage, deletes allowed"
	else
		echo "# written by scripts/stack.sh: no auth, filesystem storage, deletes allowed"
	fi
	cat <<EOF
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $root
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
EOF
	if [ -n "$htpasswd" ]; then
		printf 'auth:\n  htpasswd:\n    realm: swebuild-auth\n    path: %s\n' "$htpasswd"
	fi
	cat <<EOF
http:
  addr: $addr
  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

write_auth_registry_config() {
	registry_config "$AUTH_REGISTRY_ROOT" "$AUTH_REGISTRY_ADDR" "$AUTH_LOGIN_DIR/htpasswd" >"$RUN_DIR/registry-auth.yml"
}

write_registry_config() {
	registry_config "$REGISTRY_ROOT" "$REGISTRY_ADDR" >"$RUN_DIR/registry.yml"
}

# OTEL_NOTE: every buildkitd gets a tracing socket (--otel-socket-path) of its
# own. The default, /run/buildkit/otel-grpc.sock, is one path for all daemons
# on the host: a daemon starting removes and recreates it, one stopping
# removes it. BuildKit bind-mounts its socket at /dev/otel-grpc.sock in every
# container, and swebuild verify mounts a file over it; when the socket's
# host path is removed, the kernel detaches every mount stacked on it in all
# mount namespaces, so another daemon starting or stopping uncovered the
# socket in the verify runs this daemon had going (an infrastructure error,
# more often under QEMU where the wrapper takes longer to reach its check).
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
		if ! tr '\0' ' ' <"/proc/$(cat "$pidfile")/cmdline" 2>/dev/null | grep -q -- --otel-socket-path; then
			# Its tracing socket is buildkitd's default, shared with every
			# other daemon on the host: one of them starting or stopping
			# removes it, which uncovers it in running verify containers.
			log "note: buildkitd predates its own --otel-socket-path (shares /run/buildkit/otel-grpc.sock with other daemons; verify runs may then end as an infrastructure error); its next start uses $RUN_DIR/otel-grpc.sock"
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
	# --otel-socket-path: a tracing socket of its own, see OTEL_NOTE.
	spawn_daemon buildkitd 60 buildkit_ready "$pidfile" "$logf" \
		"$BIN_DIR/buildkitd" --config "$RUN_DIR/buildkitd.toml" \
		--otel-socket-path "$RUN_DIR/otel-grpc.sock" \
		--oci-worker=true --containerd-worker=false \
		--oci-worker-snapshotter=overlayfs \
		--oci-worker-platform linux/amd64 --oci-worker-platform linux/arm64
	log "buildkitd ready at $BUILDKIT_ADDR (pid $(cat "$pidfile"))"
}

# serve_registry NAME FILE ADDR ROOT WRITE_CONFIG READY TAKEN [NOTE]: starts
# Debian's registry as NAME on ADDR with storage under ROOT, its pid file, log
# and config $RUN_DIR/FILE.{pid,log,yml} (written by WRITE_CONFIG), unless it
# runs already (READY succeeds); TAKEN succeeding means something else holds
# ADDR. NOTE is added to the ready line.
serve_registry() {
	local name=$1 file=$2 addr=$3 root=$4 write_config=$5 ready=$6 taken=$7 note=${8:-}
	local pidfile=$RUN_DIR/$file.pid logf=$RUN_DIR/$file.log
	if pid_alive "$pidfile" && $ready; then
		log "$name already running (pid $(cat "$pidfile"))"
		return 0
	fi
	if pid_alive "$pidfile"; then
		wait_for "$name" 30 "$ready" "$pidfile" "$logf"
		return 0
	fi
	if $taken; then
		die "something else already answers on $addr; free the port first"
	fi
	mkdir -p "$root"
	$write_config
	# Distribution 2.8 rebuilds its URL router (compiling its route regexps)
	# for every request; most of its CPU per request is garbage collection of
	# that. GOGC=400 halves it (see internal/regtest.RegistryGOGC).
	spawn_daemon "$name" 30 "$ready" "$pidfile" "$logf" \
		env GOGC="${REGISTRY_GOGC:-400}" "$REGISTRY_BIN" serve "$RUN_DIR/$file.yml"
	log "$name ready at http://$addr (pid $(cat "$pidfile")$note)"
}

# registry_taken stops Debian's packaged registry service (it would take the
# port), then asks whether anything still answers on the registry's address.
registry_taken() {
	stop_packaged_registry
	registry_ready
}

# auth_registry_taken: anything answering HTTP on the login registry's address.
auth_registry_taken() {
	curl -sS -o /dev/null --max-time 2 "http://$AUTH_REGISTRY_ADDR/v2/" 2>/dev/null
}

start_registry() {
	serve_registry registry registry "$REGISTRY_ADDR" "$REGISTRY_ROOT" write_registry_config registry_ready registry_taken
}

start_auth_registry() {
	make_auth_login
	serve_registry "login registry" registry-auth "$AUTH_REGISTRY_ADDR" "$AUTH_REGISTRY_ROOT" \
		write_auth_registry_config auth_registry_ready auth_registry_taken ", login in $DOCKER_CONFIG_DIR/config.json"
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

# daemon_status NAME PIDFILE WHERE CHECK...: prints "NAME: running (pid P,
# WHERE)" when PIDFILE's process lives and CHECK... succeeds, else "NAME: not
# running" and returns 1.
daemon_status() {
	local name=$1 pidfile=$2 where=$3
	shift 3
	if pid_alive "$pidfile" && "$@"; then
		echo "$name: running (pid $(cat "$pidfile"), $where)"
		return 0
	fi
	echo "$name: not running"
	return 1
}

cmd_status() {
	local rc=0
	if daemon_status buildkitd "$RUN_DIR/buildkitd.pid" "$BUILDKIT_ADDR" buildkit_ready; then
		"$BIN_DIR/buildctl" --addr "$BUILDKIT_ADDR" debug workers | sed 's/^/  /'
	else
		rc=1
	fi
	daemon_status registry "$RUN_DIR/registry.pid" "http://$REGISTRY_ADDR" registry_ready || rc=1
	daemon_status "login registry" "$RUN_DIR/registry-auth.pid" \
		"http://$AUTH_REGISTRY_ADDR, login in $DOCKER_CONFIG_DIR/config.json" auth_registry_ready || rc=1
	if head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null | grep -qx enabled; then
		echo "binfmt qemu-aarch64: enabled"
	else
		echo "binfmt qemu-aarch64: not enabled"
		rc=1
	fi
	return $rc
}

# --- Docker Engine (verify --engine docker) -----------------------------------
#
# Debian's docker.io 20.10 (API 1.41) on its own socket, data-root and
# exec-root, with its own containerd (dockerd starts one under the exec-root
# when none is given) and its own daemon.json, so it shares nothing with a
# dockerd the machine may run. No bridge and no iptables rules: verify runs
# its containers with network none. The stack's registry is plain HTTP on
# loopback, which dockerd allows insecure by default; it is named with
# --insecure-registry too, for a non-loopback SWEBUILD_REGISTRY_ADDR.
DOCKER_PACKAGES=(docker.io containerd runc)
DOCKER_ADDR=unix://$RUN_DIR/docker.sock
DOCKER_ROOT=$STATE_DIR/docker

docker_ready() {
	curl -fsS -o /dev/null --max-time 2 --unix-socket "$RUN_DIR/docker.sock" http://localhost/_ping 2>/dev/null
}

docker_up() {
	require_root
	lock_stack
	local p missing=()
	for p in "${DOCKER_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing: ${missing[*]}"
		apt-get -o DPkg::Lock::Timeout=600 update -q >&2 || die "apt-get update failed"
		# policy-rc.d (exit 101) keeps the package from starting the
		# system's own dockerd where there is no policy already.
		DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get -o DPkg::Lock::Timeout=600 install -y -q \
			--no-install-recommends "${missing[@]}" >&2 || die "apt-get install failed"
	fi
	local pidfile=$RUN_DIR/dockerd.pid logf=$RUN_DIR/dockerd.log
	if pid_alive "$pidfile" && docker_ready; then
		log "dockerd already running (pid $(cat "$pidfile"))"
		return 0
	fi
	if pid_alive "$pidfile"; then
		wait_for dockerd 60 docker_ready "$pidfile" "$logf"
		return 0
	fi
	mkdir -p "$DOCKER_ROOT" "$RUN_DIR/docker-exec"
	rm -f "$RUN_DIR/docker.sock"
	# dockerd keeps its containerd's pid in the exec-root and, when that pid
	# lives, waits for that containerd rather than starting one. After a
	# machine stopped without `docker down` the pid may belong to another
	# process by now; dockerd then timed out ("timeout waiting for containerd
	# to start", CI at d56f6c9). A containerd of ours still running is kept.
	local cpid=$RUN_DIR/docker-exec/containerd/containerd.pid
	if [ -f "$cpid" ] && ! pid_alive "$cpid"; then
		log "removing a stale containerd pid file ($cpid: pid $(cat "$cpid" 2>/dev/null) is not our containerd)"
		rm -f "$cpid"
	fi
	echo '{}' >"$RUN_DIR/docker-daemon.json"
	# dockerd writes its own pid file; the one we read is setsid's child.
	setsid /usr/sbin/dockerd --host "$DOCKER_ADDR" --data-root "$DOCKER_ROOT" \
		--exec-root "$RUN_DIR/docker-exec" --pidfile "$RUN_DIR/docker-exec/dockerd.pid" \
		--config-file "$RUN_DIR/docker-daemon.json" \
		--bridge=none --iptables=false --ip6tables=false --ip-masq=false \
		--insecure-registry "$REGISTRY_ADDR" \
		</dev/null >>"$logf" 2>&1 8>&- 9>&- &
	echo $! >"$pidfile"
	wait_for dockerd 60 docker_ready "$pidfile" "$logf"
	log "dockerd ready at $DOCKER_ADDR (pid $(cat "$pidfile"), data-root $DOCKER_ROOT)"
}

docker_status() {
	if pid_alive "$RUN_DIR/dockerd.pid" && docker_ready; then
		echo "dockerd: running (pid $(cat "$RUN_DIR/dockerd.pid"), $DOCKER_ADDR)"
		return 0
	fi
	echo "dockerd: not running"
	return 1
}

cmd_docker() {
	case "${1:-}" in
	up) docker_up ;;
	down) require_root; lock_stack; stop_daemon dockerd "$RUN_DIR/dockerd.pid" ;;
	status) docker_status ;;
	env) echo "export SWEBUILD_DOCKER_HOST=$DOCKER_ADDR" ;;
	*)
		echo "usage: $0 docker up|down|status|env" >&2
		exit 2
		;;
	esac
}

cmd_env() {
	echo "export BUILDKIT_HOST=$BUILDKIT_ADDR"
	echo "export SWEBUILD_REGISTRY=$REGISTRY_ADDR"
	echo "export SWEBUILD_AUTH_REGISTRY=$AUTH_REGISTRY_ADDR"
	echo "export DOCKER_CONFIG=$DOCKER_CONFIG_DIR"
	echo "export SWEBUILD_SIGNING_KEY=$SIGNING_DIR/cosign.key"
	echo "export SWEBUILD_SIGNING_PUB=$SIGNING_DIR/cosign.pub"
	echo "export PATH=$BIN_DIR:\$PATH"
}

# --- pool: extra daemons for swebuild build --builder/--pool ---------------------
# The pool never touches the stack's own buildkitd or registries: each pool daemon
# has its state in $STATE_DIR/pool/NAME, its socket, pid file, log and config in
# $RUN_DIR/pool/, and is named ARCH-K (amd64-1, arm64-1, ...).

POOL_RUN=$RUN_DIR/pool
POOL_STATE=$STATE_DIR/pool
POOL_PORT_BASE=${SWEBUILD_POOL_PORT_BASE:-12400}

pool_names() {
	local f
	for f in "$POOL_RUN"/*.pid; do
		[ -e "$f" ] || continue
		basename "$f" .pid
	done
}

# pool_addr NAME: the daemon's address (from its .addr file).
pool_addr() { cat "$POOL_RUN/$1.addr"; }

# pool_client_flags NAME: buildctl's TLS flags for a tcp daemon.
pool_client_flags() {
	case "$(pool_addr "$1")" in
	tcp://*) echo "--tlscacert $POOL_RUN/tls/ca.pem --tlscert $POOL_RUN/tls/client.pem --tlskey $POOL_RUN/tls/client-key.pem --tlsservername localhost" ;;
	esac
}

pool_ready() { # NAME
	# shellcheck disable=SC2046
	"$BIN_DIR/buildctl" --addr "$(pool_addr "$1")" $(pool_client_flags "$1") debug workers >/dev/null 2>&1
}

# pool_tls makes a CA, a server certificate for localhost and 127.0.0.1 and a
# client certificate once, in $POOL_RUN/tls.
pool_tls() {
	local d=$POOL_RUN/tls
	[ -f "$d/client.pem" ] && return 0
	mkdir -p "$d"
	(
		cd "$d"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
			-subj "/CN=swebuild pool CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
			-keyout server-key.pem -out server.csr 2>/dev/null
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 \
			-extfile server.ext -out server.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=swebuild client" \
			-keyout client-key.pem -out client.csr 2>/dev/null
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 \
			-extfile client.ext -out client.pem 2>/dev/null
		chmod 600 ./*-key.pem
	) || die "making the pool's TLS material in $d failed"
}

pool_write_config() { # NAME
	buildkitd_config "scripts/stack.sh pool up" "$POOL_STATE/$1" >"$POOL_RUN/$1.toml"
}

pool_up() { # N [PLATFORM]
	local n=${1:-} platform=${2:-linux/amd64} arch k=0 i name addr pidfile logf port
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "pool up: N must be a positive number (got '$n')"
	case "$platform" in
	linux/amd64) arch=amd64 ;;
	linux/arm64) arch=arm64 ;;
	*) die "pool up: platform $platform (want linux/amd64 or linux/arm64)" ;;
	esac
	require_root
	lock_stack
	build_buildkit
	if [ "$arch" = arm64 ]; then enable_binfmt; fi
	mkdir -p "$POOL_RUN" "$POOL_STATE"
	if [ "${POOL_TLS:-0}" = 1 ]; then pool_tls; fi
	for ((i = 0; i < n; i++)); do
		while :; do
			k=$((k + 1))
			name=$arch-$k
			[ -e "$POOL_RUN/$name.pid" ] || break
		done
		local tlsflags=()
		if [ "${POOL_TLS:-0}" = 1 ]; then
			port=$POOL_PORT_BASE
			while grep -qsx "tcp://127.0.0.1:$port" "$POOL_RUN"/*.addr; do port=$((port + 1)); done
			addr=tcp://127.0.0.1:$port
			tlsflags=(--tlscert "$POOL_RUN/tls/server.pem" --tlskey "$POOL_RUN/tls/server-key.pem" --tlscacert "$POOL_RUN/tls/ca.pem")
		else
			addr=unix://$POOL_RUN/$name.sock
			rm -f "$POOL_RUN/$name.sock"
		fi
		echo "$addr" >"$POOL_RUN/$name.addr"
		pool_write_config "$name"
		pidfile=$POOL_RUN/$name.pid logf=$POOL_RUN/$name.log
		# --otel-socket-path: a tracing socket of its own, see OTEL_NOTE.
		POOL_CHECK_NAME=$name spawn_daemon "$name" 60 pool_check "$pidfile" "$logf" \
			"$BIN_DIR/buildkitd" --config "$POOL_RUN/$name.toml" --addr "$addr" "${tlsflags[@]}" \
			--otel-socket-path "$POOL_RUN/$name.otel.sock" \
			--oci-worker=true --containerd-worker=false --oci-worker-snapshotter=overlayfs \
			--oci-worker-platform "$platform"
		log "pool: $name ready at $addr ($platform, pid $(cat "$pidfile"))"
	done
}

pool_check() { pool_ready "$POOL_CHECK_NAME"; }

pool_down() {
	require_root
	lock_stack
	local name
	for name in $(pool_names); do
		stop_daemon "$name" "$POOL_RUN/$name.pid"
		rm -f "$POOL_RUN/$name.addr" "$POOL_RUN/$name.sock" "$POOL_RUN/$name.otel.sock"
	done
}

pool_status() {
	local name rc=0
	for name in $(pool_names); do
		if pid_alive "$POOL_RUN/$name.pid" && pool_ready "$name"; then
			echo "$name: running (pid $(cat "$POOL_RUN/$name.pid"), $(pool_addr "$name"))"
		else
			echo "$name: not running ($(pool_addr "$name"))"
			rc=1
		fi
	done
	return $rc
}

# pool_file prints one PLATFORM=ADDR line per pool daemon, with the TLS
# material as query parameters for tcp daemons (swebuild build --pool FILE).
pool_file() {
	local name addr
	echo "# swebuild build --pool FILE: the daemons of scripts/stack.sh pool"
	for name in $(pool_names); do
		addr=$(pool_addr "$name")
		case "$addr" in
		tcp://*) addr="$addr?tlscacert=$POOL_RUN/tls/ca.pem&tlscert=$POOL_RUN/tls/client.pem&tlskey=$POOL_RUN/tls/client-key.pem&tlsservername=localhost" ;;
		esac
		echo "linux/${name%-*}=$addr"
	done
}

cmd_pool() {
	case "${1:-}" in
	up) shift; pool_up "$@" ;;
	down) pool_down ;;
	status) pool_status ;;
	file) pool_file ;;
	*) echo "usage: $0 pool up N [PLATFORM] | pool down | pool status | pool file" >&2; exit 2 ;;
	esac
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
build) build_buildkit ;;
packages) require_root; install_packages ;;
binfmt) require_root; install_packages; enable_binfmt ;;
pool) shift; cmd_pool "$@" ;;
docker) cmd_docker "${2:-}" ;;
*)
	echo "usage: $0 up|down|status|env|build|packages|binfmt|pool|docker" >&2
	exit 2
	;;
esac
