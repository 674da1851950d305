#!/usr/bin/env bash
# scripts/fixture.sh — builds the inputs of the offline fixture (testdata/fixture).
#
#   scripts/fixture.sh rootfs [amd64|arm64|all]
#       debootstrap Debian bookworm (minbase + python3, venv, pytest, setuptools,
#       git) and tar it deterministically to $SWEBUILD_CACHE/rootfs/rootfs-<arch>.tar.
#       Cached: skipped when the tarball exists and its stamp matches. Needs root;
#       arm64 runs its second stage under qemu-aarch64 (binfmt, see stack.sh).
#   scripts/fixture.sh repos DIR
#       creates DIR/<project> (work trees) and DIR/<project>.git (bare mirrors) from
#       testdata/fixture/projects/<project>/history with fixed authors and dates,
#       so commit ids are the same on every machine.
#   scripts/fixture.sh dataset [OUT]
#       regenerates testdata/fixture/dataset.jsonl (or OUT) from the projects.
#   scripts/fixture.sh commits DIR
#       prints "<project> <commit-name> <sha>" for the repos in DIR.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
FIXTURE_DIR=$ROOT_DIR/testdata/fixture
PROJECTS_DIR=$FIXTURE_DIR/projects
CACHE_DIR=${SWEBUILD_CACHE:-$HOME/.cache/swebuild}
ROOTFS_DIR=$CACHE_DIR/rootfs

SUITE=bookworm
VARIANT=minbase
# Same mirror apt uses on this machine (/etc/apt/sources.list.d/debian.sources).
MIRROR=${SWEBUILD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
INCLUDE=python3,python3-venv,python3-pytest,python3-setuptools,python3-wheel,git,patch,ca-certificates

log() { printf 'fixture: %s\n' "$*" >&2; }
die() { printf 'fixture: error: %s\n' "$*" >&2; exit 1; }

# --- rootfs -------------------------------------------------------------------

rootfs_stamp() {
	printf 'suite=%s variant=%s mirror=%s include=%s\n' "$SUITE" "$VARIANT" "$MIRROR" "$INCLUDE"
}

# Undo anything a failed or finished debootstrap left mounted under $1.
unmount_under() {
	local m
	for m in $(awk -v r="$1" '$2 ~ "^"r"/" {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}

build_rootfs() { # arch
	local arch=$1 out stamp work
	out=$ROOTFS_DIR/rootfs-$arch.tar
	stamp=$ROOTFS_DIR/rootfs-$arch.stamp
	if [ -f "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(rootfs_stamp)" ]; then
		log "rootfs $arch cached: $out"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "rootfs needs root (debootstrap)"
	command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/stack.sh packages"
	mkdir -p "$ROOTFS_DIR" "$CACHE_DIR/debs/$arch"
	work=$(mktemp -d "$ROOTFS_DIR/.work-$arch.XXXXXX")
	# shellcheck disable=SC2064
	trap "unmount_under '$work'; rm -rf '$work'" EXIT
	local target=$work/root
	log "debootstrap $SUITE $arch into $target (amd64 ~1-2 min, arm64 under QEMU ~7 min)"
	if [ "$arch" = "$(dpkg --print-architecture)" ]; then
		debootstrap --variant="$VARIANT" --arch="$arch" --include="$INCLUDE" \
			--cache-dir="$CACHE_DIR/debs/$arch" \
			"$SUITE" "$target" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
			{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap $arch failed"; }
	else
		local qemu
		case "$arch" in
		arm64) qemu=qemu-aarch64-static ;;
		*) die "unsupported arch $arch" ;;
		esac
		command -v "$qemu" >/dev/null || die "$qemu missing: run scripts/stack.sh packages"
		head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null | grep -qx enabled ||
			die "qemu-aarch64 binfmt not enabled: run scripts/stack.sh up first"
		debootstrap --foreign --variant="$VARIANT" --arch="$arch" --include="$INCLUDE" \
			--cache-dir="$CACHE_DIR/debs/$arch" \
			"$SUITE" "$target" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
			{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap --foreign $arch failed"; }
		# The binfmt entry has the F flag, but a copy inside the root keeps the
		# second stage working on hosts without it; removed again below.
		cp "$(command -v "$qemu")" "$target/usr/bin/$qemu"
		chroot "$target" /debootstrap/debootstrap --second-stage >>"$work/debootstrap.log" 2>&1 ||
			{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap second stage $arch failed"; }
		rm -f "$target/usr/bin/$qemu"
	fi
	unmount_under "$target"
	clean_rootfs "$target"
	log "writing $out"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
		-C "$target" -cf "$out.tmp" .
	mv "$out.tmp" "$out"
	rootfs_stamp >"$stamp"
	unmount_under "$work"
	rm -rf "$work"
	trap - EXIT
	log "rootfs $arch: $(du -h "$out" | cut -f1) $out"
}

# Drop caches, logs and other per-run files so the tarball is small and stable.
clean_rootfs() { # dir
	local r=$1
	rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old \
		"$r"/var/lib/dpkg/*-old "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/* \
		"$r"/run/* "$r"/debootstrap "$r"/var/cache/ldconfig/aux-cache \
		"$r"/etc/machine-id "$r"/var/lib/dbus/machine-id
	mkdir -p "$r/var/lib/apt/lists/partial" "$r/var/cache/apt/archives/partial"
	: >"$r/etc/machine-id"
}

cmd_rootfs() {
	case "${1:-all}" in
	amd64 | arm64) build_rootfs "$1" ;;
	all) build_rootfs amd64 && build_rootfs arm64 ;;
	*) die "rootfs: unknown arch ${1}" ;;
	esac
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
		"$py" - "$PROJECTS_DIR" "$tmp/repos" "$tmp/dataset.jsonl" <<'EOF'
# Builds SWE-bench-style records from each project's instances.json and the
# replayed repositories: patch = non-test changes base..fix, test_patch = the
# changes under tests/, both as `git diff` without index lines (as in SWE-bench).
import json, os, re, subprocess, sys

projects_dir, repos_dir, out = sys.argv[1:4]
INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+( [0-7]{6})?$")

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

records = []
for project in sorted(os.listdir(projects_dir)):
    spec_path = os.path.join(projects_dir, project, "instances.json")
    if not os.path.isfile(spec_path):
        continue
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    repo = os.path.join(repos_dir, project)
    commits = {}
    with open(os.path.join(repos_dir, project + ".commits"), encoding="utf-8") as f:
        for line in f:
            name, sha = line.split()
            commits[name] = sha
    def sha(name, where):
        if name not in commits:
            sys.exit(f"{spec_path}: {where}: unknown commit {name!r}")
        return commits[name]
    for i, inst in enumerate(spec["instances"]):
        where = f"instances[{i}]"
        base, fix = sha(inst["base"], where + ".base"), sha(inst["fix"], where + ".fix")
        patch = diff(repo, base, fix, ".", ":(exclude)tests")
        test_patch = diff(repo, base, fix, "tests")
        if not patch or not test_patch:
            sys.exit(f"{spec_path}: {where}: empty patch or test_patch between {inst['base']} and {inst['fix']}")
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
            "FAIL_TO_PASS": json.dumps(inst["FAIL_TO_PASS"]),
            "PASS_TO_PASS": json.dumps(inst["PASS_TO_PASS"]),
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

case "${1:-}" in
rootfs) shift; cmd_rootfs "$@" ;;
repos) shift; cmd_repos "$@" ;;
commits) shift; cmd_commits "$@" ;;
dataset) shift; cmd_dataset "$@" ;;
*)
	echo "usage: $0 rootfs [amd64|arm64|all] | repos DIR | dataset [OUT] | commits DIR" >&2
	exit 2
	;;
esac
