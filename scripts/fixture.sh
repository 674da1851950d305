#!/usr/bin/env bash
# scripts/fixture.sh — builds the inputs of the offline fixture (testdata/fixture).
#
#   scripts/fixture.sh rootfs [amd64|arm64|all] [py|js|all]
#       makes the base image inputs: Debian bookworm (its required packages, as
#       debootstrap's minbase, plus each flavour's toolchain: py = python3 with
#       venv, pytest, setuptools, wheel; js = nodejs; both git and patch) as a
#       deterministic tarball $SWEBUILD_CACHE/rootfs/rootfs-<arch>.tar (py) or
#       rootfs-js-<arch>.tar (js). The packages are unpacked on the host (mmdebstrap
#       --variant=extract, no maintainer scripts), then configured from the host;
#       the only programs of the target run are ldconfig and a smoke test (under
#       qemu-aarch64 for arm64). Cached: skipped when the tarball exists and its
#       stamp matches. Needs root.
#   scripts/fixture.sh repos DIR
#       creates DIR/<project> (work trees) and DIR/<project>.git (bare mirrors) from
#       testdata/fixture/projects/<project>/history with fixed authors and dates,
#       so commit ids are the same on every machine.
#   scripts/fixture.sh context
#       prints the build context directory holding the mirrors under mirror/
#       (as repos makes them), made once per version of the fixture (a hash of
#       its projects and of the functions making them) in
#       $SWEBUILD_CACHE/fixture-context/
#       and shared by every later build: BuildKit keys a local context by its
#       directory, so builds from the same directory (the demo's, every test's)
#       share the daemon's cache, where fresh mirrors elsewhere never hit it.
#   scripts/fixture.sh dataset [OUT]
#       regenerates testdata/fixture/dataset.jsonl (or OUT) from the projects.
#   scripts/fixture.sh commits DIR
#       prints "<project> <commit-name> <sha>" for the repos in DIR.
#   scripts/fixture.sh taskrepo [OUT]
#       regenerates testdata/fixture/taskrepo (or OUT), the fixture as an upstream
#       v5 task repo: sweb.yaml + tasks/<id>/{task.yaml, tests.json, gold.patch,
#       test.patch, problem_statement.md, hints.md, eval.sh, Dockerfile,
#       repo.bundle}, from dataset.jsonl, specs.json and the projects. Each flat
#       Dockerfile COPYs its task's git bundle (history up to base_commit only)
#       and starts FROM swebuild-fixture-base-<py|js>-${TARGETARCH}, a name the
#       build binds to the fixture base image pushed by digest (--build-context).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=lib/progress.sh
. "$SCRIPT_DIR/lib/progress.sh"
FIXTURE_DIR=$ROOT_DIR/testdata/fixture
PROJECTS_DIR=$FIXTURE_DIR/projects
CACHE_DIR=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}
ROOTFS_DIR=$CACHE_DIR/rootfs

SUITE=bookworm
# Same mirror apt uses on this machine (/etc/apt/sources.list.d/debian.sources).
MIRROR=${SWEBUILD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What each rootfs flavour adds to Debian's required packages (the set
# debootstrap --variant=minbase installs).
ROOTFS_FLAVOURS=(py js)
declare -A ROOTFS_PACKAGES=(
	[py]="python3,python3-venv,python3-pytest,python3-setuptools,python3-wheel,git,patch"
	[js]="nodejs,git,patch"
)
# Left out of the tree as in Debian's -slim images (debuerreotype's slimify
# list): documentation except copyright files, man and info pages, translations.
# Deleted after unpacking (mmdebstrap's own filter runs a Python process per
# package: several times slower), and written to /etc/dpkg/dpkg.cfg.d/ so that
# later installs leave them out too.
ROOTFS_PATH_FILTER=(
	path-exclude=/usr/share/doc/*
	path-include=/usr/share/doc/*/copyright
	path-exclude=/usr/share/man/*
	path-exclude=/usr/share/groff/*
	path-exclude=/usr/share/info/*
	path-exclude=/usr/share/lintian/*
	path-exclude=/usr/share/linda/*
	path-exclude=/usr/share/locale/*
)

log() { printf 'fixture: %s\n' "$*" >&2; }
die() { printf 'fixture: error: %s\n' "$*" >&2; exit 1; }

# --- rootfs -------------------------------------------------------------------

# rootfs_name FLAVOUR ARCH: the tarball's base name (the py flavour keeps the
# name the Python profile and the tests have always used).
rootfs_name() {
	case "$1" in
	py) printf 'rootfs-%s' "$2" ;;
	*) printf 'rootfs-%s-%s' "$1" "$2" ;;
	esac
}

rootfs_packages() {
	[ -n "${ROOTFS_PACKAGES[$1]:-}" ] || die "rootfs: unknown flavour $1 (want one of ${ROOTFS_FLAVOURS[*]})"
	printf '%s' "${ROOTFS_PACKAGES[$1]}"
}

# The stamp names every input of the tarball, including the code below, so an
# edit of any step rebuilds it once.
rootfs_stamp() { # flavour arch
	{
		printf 'suite=%s mirror=%s flavour=%s arch=%s packages=%s filter=%s\n' \
			"$SUITE" "$MIRROR" "$1" "$2" "$(rootfs_packages "$1")" "${ROOTFS_PATH_FILTER[*]}"
		declare -f in_target build_rootfs unpack_rootfs slim_rootfs configure_rootfs write_dpkg_status \
			compile_python smoke_test_rootfs clean_rootfs write_rootfs_tar
	} | sha256sum | cut -d' ' -f1
}

# Undo anything a failed run left mounted under $1.
unmount_under() {
	local m
	for m in $(awk -v r="$1" '$2 ~ "^"r"/" {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}

# in_target ROOT CMD...: runs a program of the target (natively, or through the
# binfmt QEMU entry for a foreign arch) with a clean environment.
in_target() {
	local root=$1
	shift
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

build_rootfs() { # flavour arch
	local flavour=$1 arch=$2 name out stamp work
	name=$(rootfs_name "$flavour" "$arch")
	out=$ROOTFS_DIR/$name.tar
	stamp=$ROOTFS_DIR/$name.stamp
	if [ -f "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(rootfs_stamp "$flavour" "$arch")" ]; then
		log "rootfs $flavour $arch cached: $out"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "rootfs needs root (unpacking packages with their owners, chroot)"
	command -v mmdebstrap >/dev/null || die "mmdebstrap missing: run scripts/stack.sh packages"
	if [ "$arch" != "$(dpkg --print-architecture)" ]; then
		case "$arch" in
		arm64) head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null | grep -qx enabled ||
			die "qemu-aarch64 binfmt not enabled (needed for ldconfig of the arm64 tree): run scripts/stack.sh up first" ;;
		*) die "unsupported arch $arch" ;;
		esac
	fi
	mkdir -p "$ROOTFS_DIR" "$CACHE_DIR/debs/$arch"
	work=$(mktemp -d "$ROOTFS_DIR/.work-$name.XXXXXX")
	# shellcheck disable=SC2064
	trap "unmount_under '$work'; rm -rf '$work'" EXIT
	local target=$work/root
	# Each step's wall and CPU time (its processes included) goes to the log.
	local TIMEFORMAT="%R s wall, %U s user + %S s sys CPU"
	{ time unpack_rootfs "$flavour" "$arch" "$target" "$work" 2>&3; } 3>&2 2>"$work/time"
	log "rootfs $flavour $arch: unpacked $(wc -l <"$work/packages") packages: $(cat "$work/time")"
	{ time {
		configure_rootfs "$target" "$work" "$CACHE_DIR/debs/$arch"
		smoke_test_rootfs "$flavour" "$target"
		clean_rootfs "$target"
	} 2>&3; } 3>&2 2>"$work/time"
	log "rootfs $flavour $arch: configured: $(cat "$work/time")"
	{ time write_rootfs_tar "$target" "$out" 2>&3; } 3>&2 2>"$work/time"
	log "rootfs $flavour $arch: $(du -h "$out" | cut -f1) $out: $(cat "$work/time")"
	rootfs_stamp "$flavour" "$arch" >"$stamp"
	unmount_under "$work"
	rm -rf "$work"
	trap - EXIT
}

# unpack_rootfs FLAVOUR ARCH TARGET WORK: resolves the package set with apt (as
# mmdebstrap does) and unpacks every package into TARGET with dpkg-deb and tar,
# running none of their maintainer scripts. The .debs are cached per arch in
# $CACHE_DIR/debs/<arch> (hard-linked in and out of the tree). Writes the list
# of unpacked packages ("name version arch" per line) to WORK/packages.
unpack_rootfs() {
	local flavour=$1 arch=$2 target=$3 work=$4 cache
	cache=$CACHE_DIR/debs/$arch
	# The extract hook records what apt chose, from the same apt configuration
	# and dpkg status the download step used.
	cat >"$work/list-packages" <<-'EOF'
		#!/bin/sh
		set -eu
		APT_CONFIG=$MMDEBSTRAP_APT_CONFIG apt-get install --simulate --yes -q \
			--no-install-recommends "$@" |
			awk '/^Inst / && match($0, /\([^ ]+ /) { v = substr($0, RSTART + 1, RLENGTH - 2)
				if (match($0, /\[[a-z0-9]+\]\)/)) print $2, v, substr($0, RSTART + 1, RLENGTH - 3) }' |
			LC_ALL=C sort >"$FIXTURE_PACKAGES_OUT"
	EOF
	chmod +x "$work/list-packages"
	# The setup hook puts the cached .debs where apt looks for them: hard links
	# when the cache is on the same file system, else copies.
	cat >"$work/link-debs" <<-'EOF'
		#!/bin/sh
		set -eu
		mkdir -p "$1/var/cache/apt/archives"
		for deb in "$FIXTURE_DEB_CACHE"/*.deb; do
			[ -e "$deb" ] || continue
			ln "$deb" "$1/var/cache/apt/archives/" 2>/dev/null || cp -p "$deb" "$1/var/cache/apt/archives/"
		done
	EOF
	chmod +x "$work/link-debs"
	# usr-is-merged by name: the merged-/usr hook records a placeholder of it
	# that would otherwise satisfy init-system-helpers' dependency.
	local pkgs
	pkgs=usr-is-merged,$(rootfs_packages "$flavour")
	# The system PATH: mmdebstrap's helpers must not meet a pyenv or other
	# interpreter shims first.
	PATH=/usr/sbin:/usr/bin:/sbin:/bin FIXTURE_PACKAGES_OUT=$work/packages FIXTURE_DEB_CACHE=$cache \
		mmdebstrap --variant=extract --mode=root --format=directory --architectures="$arch" \
		--include='?priority(required)' --include="$pkgs" \
		--setup-hook=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh \
		--setup-hook="$work/link-debs" \
		--extract-hook="\"$work/list-packages\" '?priority(required)' ${pkgs//,/ }" \
		--skip=download/empty --skip=cleanup/apt/cache \
		"$SUITE" "$target" "$MIRROR" >"$work/mmdebstrap.log" 2>&1 ||
		{ tail -n 30 "$work/mmdebstrap.log" >&2; die "mmdebstrap ($arch, $pkgs) failed; log above"; }
	[ -s "$work/packages" ] || die "mmdebstrap: no package list recorded"
	local deb
	for deb in "$target"/var/cache/apt/archives/*.deb; do
		[ -e "$cache/${deb##*/}" ] || mv "$deb" "$cache/"
	done
	rm -rf "$target"/var/cache/apt/archives/*.deb
	slim_rootfs "$target"
}

# slim_rootfs ROOT: applies ROOTFS_PATH_FILTER to the unpacked tree (dpkg's
# semantics: a path is left out when the last matching rule excludes it) and
# records it for dpkg.
slim_rootfs() {
	local r=$1 rule
	(
		cd "$r"
		find usr/share/doc -mindepth 1 ! -type d ! -path "usr/share/doc/*/copyright" -delete
		find usr/share/doc -depth -mindepth 1 -type d -empty -delete
		rm -rf usr/share/man/* usr/share/groff/* usr/share/info/* usr/share/lintian/* \
			usr/share/linda/* usr/share/locale/*
	)
	mkdir -p "$r/etc/dpkg/dpkg.cfg.d"
	for rule in "${ROOTFS_PATH_FILTER[@]}"; do
		printf '%s\n' "$rule"
	done >"$r/etc/dpkg/dpkg.cfg.d/swebuild-fixture-slim"
}

# configure_rootfs ROOT WORK DEBS: the effects of the maintainer scripts the images
# rely on, done from the host. Everything else those scripts do (systemd units,
# debconf, man-db, initramfs, ...) is of no use in a build container.
configure_rootfs() {
	local r=$1 work=$2 debs=$3 f
	# base-passwd, then passwd's "shadowconfig on": accounts from the masters,
	# passwords moved to shadow files (no password-change date, so the bytes
	# do not depend on the day).
	awk -F: -v OFS=: '{ $2 = "x"; print }' "$r/usr/share/base-passwd/passwd.master" >"$r/etc/passwd"
	awk -F: -v OFS=: '{ $2 = "x"; print }' "$r/usr/share/base-passwd/group.master" >"$r/etc/group"
	awk -F: '{ print $1 ":*::0:99999:7:::" }' "$r/usr/share/base-passwd/passwd.master" >"$r/etc/shadow"
	awk -F: '{ print $1 ":*::" }' "$r/usr/share/base-passwd/group.master" >"$r/etc/gshadow"
	chmod 0644 "$r/etc/passwd" "$r/etc/group"
	chmod 0640 "$r/etc/shadow" "$r/etc/gshadow"
	chgrp 42 "$r/etc/shadow" "$r/etc/gshadow" # shadow
	# libc-bin: the name service switch; base-files and readline-common: the
	# first-install defaults; login and libpam-modules: empty files.
	cp -p "$r/usr/share/libc-bin/nsswitch.conf" "$r/etc/nsswitch.conf"
	for f in base-files/dot.profile:root/.profile base-files/dot.bashrc:root/.bashrc \
		base-files/profile:etc/profile base-files/motd:etc/motd readline/inputrc:etc/inputrc; do
		[ -e "$r/${f#*:}" ] || [ ! -e "$r/usr/share/${f%%:*}" ] || cp -p "$r/usr/share/${f%%:*}" "$r/${f#*:}"
	done
	for f in etc/environment etc/subuid etc/subgid; do
		[ -e "$r/$f" ] || : >"$r/$f"
	done
	[ -e "$r/etc/dpkg/origins/default" ] || ln -s debian "$r/etc/dpkg/origins/default"
	mkdir -p "$r/mnt" "$r/srv" "$r/opt" "$r/etc/opt" "$r/var/opt" "$r/media" "$r/var/mail" \
		"$r/run/lock" "$r/usr/local/"{share/man,bin,games,lib,include,sbin,src,etc}
	chgrp 8 "$r/var/mail" && chmod 2775 "$r/var/mail" # mail
	chmod 1777 "$r/run/lock" "$r/tmp"
	[ -L "$r/var/spool/mail" ] || ln -s ../mail "$r/var/spool/mail"
	[ -L "$r/var/run" ] || { rmdir "$r/var/run" 2>/dev/null || true; ln -s /run "$r/var/run"; }
	[ -L "$r/var/lock" ] || { rmdir "$r/var/lock" 2>/dev/null || true; ln -s /run/lock "$r/var/lock"; }
	[ -e "$r/usr/local/man" ] || ln -s share/man "$r/usr/local/man"
	# debianutils: the login shells.
	{
		cat "$r/usr/share/debianutils/shells"
		for f in "$r"/usr/share/debianutils/shells.d/*; do
			[ -f "$f" ] && sed -e 'p' -e 's|^/|/usr/|' "$f"
		done
	} | awk '!seen[$0]++' >"$r/etc/shells"
	# tzdata: UTC.
	ln -sfn /usr/share/zoneinfo/Etc/UTC "$r/etc/localtime"
	echo Etc/UTC >"$r/etc/timezone"
	# The alternatives the postinst scripts register that a script may call
	# (update-alternatives is the host's, working on the tree).
	local alt=(update-alternatives --root "$r" --log /dev/null --quiet --install)
	[ -e "$r/usr/bin/mawk" ] && "${alt[@]}" /usr/bin/awk awk /usr/bin/mawk 5 --slave /usr/bin/nawk nawk /usr/bin/mawk
	[ -e "$r/usr/bin/which.debianutils" ] && "${alt[@]}" /usr/bin/which which /usr/bin/which.debianutils 0
	[ -e "$r/usr/bin/more" ] && "${alt[@]}" /usr/bin/pager pager /usr/bin/more 50
	[ -e "$r/usr/sbin/rmt-tar" ] && "${alt[@]}" /usr/sbin/rmt rmt /usr/sbin/rmt-tar 50
	write_dpkg_status "$r" "$work/packages" "$debs"
	# python3.X-minimal: the site directory for local installs.
	for f in "$r"/usr/lib/python3.*/; do
		f=${f%/}
		[ -d "$f" ] && mkdir -p "$r/usr/local/lib/${f##*/}/dist-packages"
	done
	compile_python "$r"
	# libc-bin's trigger: the dynamic loader cache over the multiarch library
	# directories (/etc/ld.so.conf.d). The host's ldconfig does not read
	# foreign-arch libraries, so the target's own (static) ldconfig runs.
	in_target "$r" /sbin/ldconfig
}

# write_dpkg_status ROOT LIST DEBS: dpkg's database says the unpacked packages
# are installed (their control fields, in name order; this replaces the
# placeholder usr-is-merged of mmdebstrap's merged-/usr hook with the real
# one), so dpkg -l and apt see them. Their file lists are not recorded (dpkg -L
# knows no files).
write_dpkg_status() {
	local r=$1 list=$2 debs=$3 name version arch deb
	while read -r name version arch; do
		deb=$debs/${name}_${version//:/%3a}_${arch}.deb
		[ -f "$deb" ] || die "dpkg status: no .deb for $name $version $arch in $debs"
		dpkg-deb -f "$deb" | awk -v st='Status: install ok installed' \
			'NR == 1 && /^Package:/ { print; print st; next } { print }'
		echo
	done <"$list" >"$r/var/lib/dpkg/status"
}

# compile_python ROOT: the byte-code the python3 packages' postinst scripts
# compile, as hash-checked .pyc files (valid whatever the files' mtimes; the
# tarball sets them all to 0). With the host's python3 when it is the target's
# version (same byte-code; 3 s here instead of 38 s under QEMU), else the
# target's own.
compile_python() {
	local r=$1 py dirs=() d
	py=$(readlink "$r/usr/bin/python3" 2>/dev/null) || return 0 # no python in this flavour
	for d in "/usr/lib/$py" /usr/lib/python3/dist-packages; do
		[ -d "$r$d" ] && dirs+=("$d")
	done
	if [ "$(/usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$py" ]; then
		env -i PATH=/usr/bin:/bin PYTHONHASHSEED=0 /usr/bin/python3 -E -s -m compileall -q -j0 \
			--invalidation-mode checked-hash -s "$r" -p / "${dirs[@]/#/$r}" >/dev/null ||
			die "compiling the python files of $r"
	else
		in_target "$r" PYTHONHASHSEED=0 "/usr/bin/$py" -E -s -m compileall -q -j0 \
			--invalidation-mode checked-hash "${dirs[@]}" >/dev/null ||
			die "compiling the python files of $r"
	fi
}

# smoke_test_rootfs FLAVOUR ROOT: what the fixture's images run, run once in
# the tree (one QEMU process tree for arm64).
smoke_test_rootfs() {
	local flavour=$1 r=$2 check
	check='set -eu; id -un; git --version; patch --version | head -n1; echo x | awk "{print}" >/dev/null; which bash >/dev/null; ldconfig -p | grep -q "libc.so.6 "'
	case "$flavour" in
	py) check="$check; python3 -c 'import pytest, venv, setuptools, wheel; print(\"python\", pytest.__version__)'" ;;
	js) check="$check; node --version" ;;
	esac
	in_target "$r" /bin/bash -c "$check" >"$r/../smoke.log" 2>&1 ||
		{ cat "$r/../smoke.log" >&2; die "smoke test of the $flavour rootfs failed"; }
	[ -z "$(find "$r/usr" -newer "$r/../smoke.log" -name '*.pyc' -print -quit)" ] ||
		die "smoke test of the $flavour rootfs wrote .pyc files: the compiled ones are not used"
}

# Drop caches, logs and other per-run files so the tarball is small and stable.
clean_rootfs() { # dir
	local r=$1
	rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old \
		"$r"/var/lib/dpkg/*-old "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/* \
		"$r"/run/* "$r"/var/cache/ldconfig/aux-cache "$r"/root/.cache \
		"$r"/etc/machine-id "$r"/var/lib/dbus/machine-id "$r"/etc/hostname "$r"/etc/resolv.conf
	mkdir -p "$r/var/lib/apt/lists/partial" "$r/var/cache/apt/archives/partial" "$r/run/lock"
	chmod 1777 "$r/run/lock"
	: >"$r/etc/machine-id"
}

write_rootfs_tar() { # dir out
	tar --sort=name --mtime=@0 --numeric-owner \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
		-C "$1" -cf "$2.tmp" .
	mv "$2.tmp" "$2"
}

cmd_rootfs() {
	local arches flavours a f
	case "${1:-all}" in
	amd64 | arm64) arches=("$1") ;;
	all) arches=(amd64 arm64) ;;
	*) die "rootfs: unknown arch ${1} (want amd64, arm64 or all)" ;;
	esac
	case "${2:-all}" in
	all) flavours=("${ROOTFS_FLAVOURS[@]}") ;;
	*) rootfs_packages "$2" >/dev/null && flavours=("$2") ;;
	esac
	# One arch after the other would leave a core idle: unpacking is a
	# dpkg-deb | tar pipe per package. The arches run side by side (each has
	# its own .deb cache); the flavours of one arch share it, so they take
	# turns.
	local pids=() failed=0 p
	for a in "${arches[@]}"; do
		(
			# Unpacking and configuring print nothing for a minute or more
			# (arm64's QEMU runs): a line every 30 s says the build goes on.
			for f in "${flavours[@]}"; do
				progress_start "fixture: rootfs $f $a: building"
				build_rootfs "$f" "$a"
				progress_stop
			done
		) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || failed=1
	done
	[ "$failed" -eq 0 ] || die "rootfs: a build failed (see above)"
}

# --- repositories ---------------------------------------------------------------

# git with no user/system configuration, so nothing on the machine changes ids.
fgit() {
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent \
		LC_ALL=C TZ=UTC git -c init.defaultBranch=main -c core.autocrlf=false \
		-c core.fileMode=true -c commit.gpgSign=false -c tag.gpgSign=false "$@"
}

# make_repo PROJECT DIR: replays PROJECT's history into DIR/PROJECT, mirrors it to
# DIR/PROJECT.git and writes DIR/PROJECT.commits ("<name> <sha>" per line).
make_repo() {
	local project=$1 dir=$2 hist work name date tag subject n=0
	hist=$PROJECTS_DIR/$project/history
	[ -f "$hist/log.tsv" ] || die "$hist/log.tsv: missing"
	work=$dir/$project
	[ ! -e "$work" ] && [ ! -e "$work.git" ] || die "$work or $work.git already exists"
	mkdir -p "$work"
	fgit init -q "$work"
	: >"$dir/$project.commits"
	while IFS=$'\t' read -r name date tag subject; do
		case "$name" in '' | '#'*) continue ;; esac
		n=$((n + 1))
		[ -n "$date" ] && [ -n "$subject" ] && [ -n "$tag" ] ||
			die "$hist/log.tsv: line for commit '$name': want 4 tab-separated fields"
		[ -d "$hist/$name" ] || die "$hist/log.tsv: commit $name: no directory $hist/$name"
		# A commit directory holds the files that commit adds or changes; an
		# optional .delete file lists paths it removes.
		if [ -f "$hist/$name/.delete" ]; then
			while IFS= read -r path; do
				[ -n "$path" ] && fgit -C "$work" rm -q -r -- "$path"
			done <"$hist/$name/.delete"
		fi
		(cd "$hist/$name" && find . -type f ! -name .delete -print0) |
			while IFS= read -r -d '' f; do
				mkdir -p "$work/$(dirname "$f")"
				cp "$hist/$name/$f" "$work/$f"
				chmod 0644 "$work/$f"
			done
		fgit -C "$work" add -A
		GIT_AUTHOR_NAME="Fixture Author" GIT_AUTHOR_EMAIL="author@fixture.invalid" \
			GIT_AUTHOR_DATE="$date" GIT_COMMITTER_NAME="Fixture Committer" \
			GIT_COMMITTER_EMAIL="committer@fixture.invalid" GIT_COMMITTER_DATE="$date" \
			fgit -C "$work" commit -q --allow-empty --no-verify -m "$subject"
		if [ "$tag" != "-" ]; then
			fgit -C "$work" tag "$tag"
		fi
		printf '%s %s\n' "$name" "$(fgit -C "$work" rev-parse HEAD)" >>"$dir/$project.commits"
	done <"$hist/log.tsv"
	[ "$n" -gt 0 ] || die "$hist/log.tsv: no commits"
	fgit clone -q --mirror "$work" "$work.git"
	# The mirror must not point back at the temporary work tree.
	fgit -C "$work.git" remote remove origin 2>/dev/null
}

projects() {
	local d
	for d in "$PROJECTS_DIR"/*/; do
		[ -f "$d/history/log.tsv" ] && basename "$d"
	done
}

cmd_repos() {
	local dir=${1:-}
	[ -n "$dir" ] || die "usage: fixture.sh repos DIR"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	local p
	for p in $(projects); do
		make_repo "$p" "$dir"
		log "repo $dir/$p, mirror $dir/$p.git"
	done
}

cmd_context() {
	local sum dir tmp
	sum=$(
		cd "$ROOT_DIR"
		{
			find testdata/fixture/projects -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
			declare -f fgit make_repo projects cmd_repos
		} | sha256sum | cut -c1-16
	)
	dir=$CACHE_DIR/fixture-context/$sum
	if [ ! -d "$dir/mirror" ]; then
		mkdir -p "$CACHE_DIR/fixture-context"
		tmp=$(mktemp -d "$CACHE_DIR/fixture-context/.tmp-$sum.XXXXXX")
		cmd_repos "$tmp/mirror" >&2
		# Another caller may have made it meanwhile: theirs is kept.
		mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
		[ -d "$dir/mirror" ] || die "context: $dir/mirror not made"
	fi
	printf '%s\n' "$dir"
}

cmd_commits() {
	local dir=${1:-} p
	[ -n "$dir" ] || die "usage: fixture.sh commits DIR"
	for p in $(projects); do
		sed "s/^/$p /" "$dir/$p.commits"
	done
}

# --- dataset -----------------------------------------------------------------

cmd_dataset() {
	local out=${1:-$FIXTURE_DIR/dataset.jsonl} tmp py
	py=${SWEBUILD_PYTHON:-/usr/bin/python3}
	[ -x "$py" ] || die "$py missing (apt-get install python3)"
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	cmd_repos "$tmp/repos" 2>/dev/null
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null LC_ALL=C \
		"$py" - "$PROJECTS_DIR" "$tmp/repos" "$tmp/dataset.jsonl" "$tmp/runs" <<'EOF'
# Builds SWE-bench-style records from each project's instances.json and the
# replayed repositories: patch = non-test changes base..fix, test_patch = the
# changes under the project's test directory (tests/ unless test_dir says
# otherwise), both as `git diff` without index lines (as in SWE-bench).
#
# Labels: a project either lists FAIL_TO_PASS / PASS_TO_PASS per instance
# (checked by running the tests in internal/stacktest), or names a test
# command in labels_from; then the labels are made here by running it on the
# test patch's files in a checkout of base_commit with the test patch, then
# again with the gold patch too: FAIL_TO_PASS = tests that pass only with the
# gold patch, PASS_TO_PASS = tests that pass in both runs. Every test must pass
# with the gold patch. Only the TAP log ("log": "tap") is read, by the rule of
# upstream's parse_log_tap (a stripped line "ok N NAME" / "not ok N NAME").
import json, os, re, shutil, subprocess, sys

projects_dir, repos_dir, out, runs_dir = sys.argv[1:5]
INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+( [0-7]{6})?$")
TAP = re.compile(r"^(ok|not ok) (\d+) (.+)$")

def fail(msg):
    sys.exit("fixture dataset: " + msg)

def diff(repo, base, fix, *paths):
    text = subprocess.run(
        ["git", "-C", repo, "-c", "core.quotepath=off", "diff", "--no-color",
         "--no-ext-diff", "--no-renames", base, fix, "--"] + list(paths),
        check=True, capture_output=True, text=True).stdout
    lines, in_header = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            in_header = True
        elif line.startswith("@@"):
            in_header = False
        if in_header and INDEX.match(line.rstrip("\n")):
            continue
        lines.append(line)
    return "".join(lines)

def patch_files(patch):
    return [l[len("diff --git a/"):].split(" b/", 1)[0]
            for l in patch.splitlines() if l.startswith("diff --git a/")]

def tap_statuses(log, checkout, files):
    """Test name -> "ok" / "not ok", in log order. A test runner's entry for a
    whole file (node 18 reports one, named by the file's absolute path) is not
    a test."""
    whole_files = {"- " + os.path.join(checkout, f) for f in files} | {"- " + f for f in files}
    st = {}
    for line in log.split("\n"):
        m = TAP.match(line.strip())
        if m and m.group(3) not in whole_files:
            st[m.group(3)] = m.group(1)
    return st

def run_tests(where, command, checkout, files):
    st = {}
    for f in files:  # one file at a time: the order of the log is fixed
        env = dict(os.environ, NO_COLOR="1")
        r = subprocess.run(command + [f], cwd=checkout, env=env, capture_output=True, text=True)
        got = tap_statuses(r.stdout, checkout, [f])
        if not got:
            fail(f"{where}: {' '.join(command)} {f} reported no tests (exit {r.returncode}):\n{r.stdout}{r.stderr}")
        st.update(got)
    return st

def make_labels(where, repo, base, patch, test_patch, labels_from, scratch):
    if labels_from.get("log") != "tap":
        fail(f"{where}: labels_from.log: want \"tap\"")
    command = list(labels_from["command"])
    if command[0] == "node" and os.environ.get("SWEBUILD_NODE"):
        command[0] = os.environ["SWEBUILD_NODE"]
    if shutil.which(command[0]) is None:
        fail(f"{where}: labels_from.command: {command[0]} not found (apt-get install nodejs, or set SWEBUILD_NODE)")
    checkout = os.path.join(scratch, "testbed")
    subprocess.run(["git", "clone", "-q", repo, checkout], check=True)
    subprocess.run(["git", "-C", checkout, "checkout", "-q", base], check=True)
    files = patch_files(test_patch)
    def apply(p):
        subprocess.run(["git", "-C", checkout, "apply", "-"], input=p, text=True, check=True)
    apply(test_patch)
    before = run_tests(where + " (test patch)", command, checkout, files)
    apply(patch)
    after = run_tests(where + " (test patch and gold patch)", command, checkout, files)
    failing = [t for t, s in after.items() if s != "ok"]
    if failing:
        fail(f"{where}: with the gold patch these tests fail: {failing}")
    shutil.rmtree(checkout)
    f2p = [t for t in after if before.get(t) != "ok"]
    p2p = [t for t in after if before.get(t) == "ok"]
    if not f2p:
        fail(f"{where}: no test fails without the gold patch")
    return f2p, p2p

records = []
for project in sorted(os.listdir(projects_dir)):
    spec_path = os.path.join(projects_dir, project, "instances.json")
    if not os.path.isfile(spec_path):
        continue
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    repo = os.path.join(repos_dir, project)
    test_dir = spec.get("test_dir", "tests")
    commits = {}
    with open(os.path.join(repos_dir, project + ".commits"), encoding="utf-8") as f:
        for line in f:
            name, sha = line.split()
            commits[name] = sha
    def sha(name, where):
        if name not in commits:
            fail(f"{spec_path}: {where}: unknown commit {name!r}")
        return commits[name]
    for i, inst in enumerate(spec["instances"]):
        where = f"{spec_path}: instances[{i}]"
        base, fix = sha(inst["base"], where + ".base"), sha(inst["fix"], where + ".fix")
        patch = diff(repo, base, fix, ".", ":(exclude)" + test_dir)
        test_patch = diff(repo, base, fix, test_dir)
        if not patch or not test_patch:
            fail(f"{where}: empty patch or test_patch between {inst['base']} and {inst['fix']}")
        if "labels_from" in spec:
            if "FAIL_TO_PASS" in inst or "PASS_TO_PASS" in inst:
                fail(f"{where}: labels are made by running labels_from; do not list them")
            f2p, p2p = make_labels(where, repo, base, patch, test_patch, spec["labels_from"],
                                   os.path.join(runs_dir, f"{project}-{i}"))
        else:
            f2p, p2p = inst["FAIL_TO_PASS"], inst["PASS_TO_PASS"]
        records.append({
            "repo": spec["repo"],
            "instance_id": spec["repo"].replace("/", "__") + "-" + str(inst["number"]),
            "base_commit": base,
            "patch": patch,
            "test_patch": test_patch,
            "problem_statement": inst["problem_statement"],
            "hints_text": inst["hints_text"],
            "created_at": inst["created_at"],
            "version": spec["version"],
            "FAIL_TO_PASS": json.dumps(f2p),
            "PASS_TO_PASS": json.dumps(p2p),
            "environment_setup_commit": sha(spec["environment_setup_commit"], "environment_setup_commit"),
        })
with open(out, "w", encoding="utf-8", newline="\n") as f:
    for r in records:
        f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
EOF
	mkdir -p "$(dirname "$out")"
	mv "$tmp/dataset.jsonl" "$out"
	rm -rf "$tmp"
	trap - EXIT
	log "wrote $out ($(wc -l <"$out") instances)"
}

# --- task repo -------------------------------------------------------------------

cmd_taskrepo() {
	local out=${1:-$FIXTURE_DIR/taskrepo} tmp py
	py=${SWEBUILD_PYTHON:-/usr/bin/python3}
	[ -x "$py" ] || die "$py missing (apt-get install python3)"
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	cmd_repos "$tmp/repos" 2>/dev/null
	GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/nonexistent LC_ALL=C TZ=UTC \
		"$py" - "$FIXTURE_DIR" "$tmp/repos" "$tmp/taskrepo" <<'EOF'
# The fixture's records as an upstream v5 task repo (swebench/task/repo.py):
# one directory per instance, the record's columns as files, a flat
# Dockerfile whose build context is the task directory, and an eval.sh in
# the shape of upstream's task repos: the test command between the markers
# and nothing after the end marker but the reset. The harness that runs it
# (upstream v5's make_test_spec, swebuild verify) makes it record the test
# command's exit status (swebench.harness.utils.record_test_exit_code); a
# script that recorded it already would be recorded twice there, the second
# time as 0.
import hashlib, json, os, subprocess, sys

fixture_dir, repos_dir, out = sys.argv[1:4]
DATASET = "swebuild/fixture"

def fail(msg):
    sys.exit("fixture taskrepo: " + msg)

def git(*args, **kw):
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "pack.threads=1"] + list(args),
                          check=True, capture_output=True, **kw).stdout

specs = json.load(open(os.path.join(fixture_dir, "specs.json"), encoding="utf-8"))
profiles = [(specs["profile"], specs["specs"])] + [(p["profile"], p["specs"]) for p in specs.get("profiles", [])]

def profile_of(repo, version):
    for prof, table in profiles:
        if repo in table and version in table[repo]:
            return prof, table[repo][version]
    fail(f"{repo} {version}: in no profile of specs.json")

def patch_files(patch):
    files, new = [], set()
    cur = None
    for l in patch.splitlines():
        if l.startswith("diff --git a/"):
            cur = l[len("diff --git a/"):].split(" b/", 1)[0]
            files.append(cur)
        elif l == "--- /dev/null" and cur:
            new.add(cur)
    return files, new

def yaml_str(s):
    # task.yaml holds plain one-line strings; JSON quoting is valid YAML
    return json.dumps(s, ensure_ascii=False)

def eval_script(rec, prof, spec):
    base = rec["base_commit"]
    files, new = patch_files(rec["test_patch"])
    old = [f for f in files if f not in new]
    delim = "EOF_" + hashlib.sha256(rec["test_patch"].encode()).hexdigest()[:12]
    activate = prof.get("activate", [])
    lines = ["#!/bin/bash", "set -uxo pipefail", "cd /testbed",
             "git config --global --add safe.directory /testbed", *activate,
             "git status", "git show", f"git -c core.fileMode=false diff {base}"]
    if "install" in spec:
        lines.append(spec["install"])
    reset = []
    if old:
        reset.append(f"git checkout {base} {' '.join(old)}")
    if new:
        reset.append(f"rm -f {' '.join(sorted(new))}")
    lines += reset
    lines += [f"git apply -v - <<'{delim}'", rec["test_patch"].rstrip("\n"), delim,
              ": '>>>>> Start Test Output'", f"{spec['test_cmd']} {' '.join(files)}",
              ": '>>>>> End Test Output'", *reset]
    return "\n".join(lines) + "\n"

def dockerfile(rec, prof, spec):
    flavour = "js" if prof["language"] == "js" else "py"
    lines = [
        f"# {rec['instance_id']}: generated by scripts/fixture.sh taskrepo",
        "# The base is the fixture's Debian rootfs image, which no registry serves: the",
        "# build binds this name to that image, pushed by digest (--build-context",
        f"# swebuild-fixture-base-{flavour}-amd64=docker-image://HOST/REPO@sha256:...).",
        f"FROM swebuild-fixture-base-{flavour}-${{TARGETARCH}}",
        "",
    ]
    for c in prof.get("env_create", []):
        lines.append(f"RUN {c}")
    for a in prof.get("activate", []):
        lines.append(f'RUN echo "{a}" > /root/.bashrc')
    if prof["language"] == "js":
        lines.append("RUN node -v")
    setup = ["git clone -q -o origin /root/repo.bundle /testbed", "chmod -R 777 /testbed", "cd /testbed",
             f"git reset --hard {rec['base_commit']}", "git remote remove origin",
             "git reflog expire --expire=now --all", "git gc --prune=now --quiet"]
    if "install" in spec:
        setup += [a.replace("source ", ". ") for a in prof.get("activate", [])] + [spec["install"]]
    lines += ["", "# The repository at base_commit: a git bundle of its history up to it.",
              "COPY repo.bundle /root/repo.bundle",
              "RUN " + " \\\n    && ".join(setup), "", "WORKDIR /testbed", ""]
    return "\n".join(lines)

def bundle(project, base, dest):
    work = os.path.join(repos_dir, project)
    clone = dest + ".clone"
    git("clone", "-q", "--bare", "--no-tags", work, clone)
    git("-C", clone, "update-ref", "refs/heads/main", base)
    for ref in git("-C", clone, "for-each-ref", "--format=%(refname)", text=True).split():
        if ref != "refs/heads/main":
            git("-C", clone, "update-ref", "-d", ref)
    git("-C", clone, "symbolic-ref", "HEAD", "refs/heads/main")
    git("-C", clone, "bundle", "create", "-q", os.path.abspath(dest), "HEAD", "main")
    subprocess.run(["rm", "-rf", clone], check=True)

os.makedirs(os.path.join(out, "tasks"))
with open(os.path.join(out, "sweb.yaml"), "w", encoding="utf-8") as f:
    f.write(f"datasets:\n- {DATASET}\nsplits:\n- test\n")
with open(os.path.join(fixture_dir, "dataset.jsonl"), encoding="utf-8") as f:
    records = [json.loads(l) for l in f if l.strip()]
for rec in records:
    iid = rec["instance_id"]
    prof, spec = profile_of(rec["repo"], rec["version"])
    d = os.path.join(out, "tasks", iid)
    os.makedirs(d)
    image = "swebench/" + f"sweb.eval.x86_64.{iid}:latest".lower().replace("__", "_1776_")
    meta = {
        "base_commit": rec["base_commit"], "created_at": rec["created_at"], "datasets": [DATASET],
        "environment_setup_commit": rec["environment_setup_commit"], "eval_type": "pass_and_fail",
        "image": image, "instance_id": iid, "log_parser": prof["log_parser"], "repo": rec["repo"],
        "split": "test", "version": rec["version"],
    }
    if iid in specs.get("x86_only", []):
        # swebuild's key (upstream's task repos are x86-only throughout):
        # the dataset path keeps this instance off arm64 (specs.json's
        # x86_only list, the "override" rule), and so does the task repo,
        # as `swebuild render --task-repo-out` writes it.
        meta["x86_only"] = "override"
    with open(os.path.join(d, "task.yaml"), "w", encoding="utf-8") as f:
        for k in sorted(meta):  # sorted keys, as upstream's dump_yaml
            v = meta[k]
            if isinstance(v, list):
                f.write(f"{k}:\n" + "".join(f"- {yaml_str(x)}\n" for x in v))
            else:
                f.write(f"{k}: {yaml_str(v)}\n")
    tests = {"FAIL_TO_PASS": json.loads(rec["FAIL_TO_PASS"]), "PASS_TO_PASS": json.loads(rec["PASS_TO_PASS"])}
    files = {
        "tests.json": json.dumps(tests, indent=2, ensure_ascii=False) + "\n",
        "gold.patch": rec["patch"], "test.patch": rec["test_patch"],
        "problem_statement.md": rec["problem_statement"],
        "eval.sh": eval_script(rec, prof, spec), "Dockerfile": dockerfile(rec, prof, spec),
    }
    if rec.get("hints_text"):
        files["hints.md"] = rec["hints_text"]
    for name, text in files.items():
        with open(os.path.join(d, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    bundle(rec["repo"].split("/", 1)[1], rec["base_commit"], os.path.join(d, "repo.bundle"))
EOF
	rm -rf "$out"
	mkdir -p "$(dirname "$out")"
	mv "$tmp/taskrepo" "$out"
	rm -rf "$tmp"
	trap - EXIT
	log "wrote $out ($(find "$out/tasks" -mindepth 1 -maxdepth 1 -type d | wc -l) tasks)"
}

case "${1:-}" in
rootfs) shift; cmd_rootfs "$@" ;;
taskrepo) shift; cmd_taskrepo "$@" ;;
repos) shift; cmd_repos "$@" ;;
context) shift; cmd_context "$@" ;;
commits) shift; cmd_commits "$@" ;;
dataset) shift; cmd_dataset "$@" ;;
*)
	echo "usage: $0 rootfs [amd64|arm64|all] [py|js|all] | repos DIR | context | dataset [OUT] | commits DIR | taskrepo [OUT]" >&2
	exit 2
	;;
esac
