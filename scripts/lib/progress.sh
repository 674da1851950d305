# scripts/lib/progress.sh — progress lines for the long silent steps of the
# scripts (sourced by fixture.sh and go-build.sh): a first run on a fresh
# machine spends minutes in steps that print nothing (the BuildKit compile,
# unpacking the rootfs packages, QEMU runs).

# progress_start LABEL: from now on, every ${PROGRESS_EVERY:-30} seconds,
# prints "LABEL: N s" on stderr until progress_stop, or until the shell that
# started it is gone (a step that died). One at a time per shell.
progress_start() {
	local label=$1 t0=$EPOCHSECONDS parent=$BASHPID
	progress_stop
	(
		trap 'exit 0' TERM
		while sleep "${PROGRESS_EVERY:-30}"; do
			kill -0 "$parent" 2>/dev/null || exit 0
			printf '%s: %d s\n' "$label" $((EPOCHSECONDS - t0)) >&2
		done
	) &
	PROGRESS_PID=$!
}

# progress_stop: ends the lines progress_start began.
progress_stop() {
	if [ -n "${PROGRESS_PID:-}" ]; then
		kill "$PROGRESS_PID" 2>/dev/null || true
		wait "$PROGRESS_PID" 2>/dev/null || true
		PROGRESS_PID=
	fi
}

# progress_go_build LABEL: reads `go build -v` output on stdin; prints the
# lines that are not a compiled package's import path (downloads, errors) as
# they come, and every ${PROGRESS_EVERY:-30} seconds "LABEL: N s, M packages
# compiled", then the total at the end.
progress_go_build() {
	local label=$1 t0=$EPOCHSECONDS last=$EPOCHSECONDS n=0 line rc
	while :; do
		if IFS= read -r -t "${PROGRESS_EVERY:-30}" line; then
			if [[ $line =~ ^[A-Za-z0-9._~/+-]+$ ]]; then
				n=$((n + 1))
			else
				printf '%s\n' "$line" >&2
			fi
		else
			rc=$?
			[ "$rc" -gt 128 ] || break # not a timeout: the end of the output
		fi
		if [ $((EPOCHSECONDS - last)) -ge "${PROGRESS_EVERY:-30}" ]; then
			printf '%s: %d s, %d packages compiled\n' "$label" $((EPOCHSECONDS - t0)) "$n" >&2
			last=$EPOCHSECONDS
		fi
	done
	[ "$n" -eq 0 ] || printf '%s: %d packages compiled in %d s\n' "$label" "$n" $((EPOCHSECONDS - t0)) >&2
}
