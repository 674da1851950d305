#!/usr/bin/env bash
# Render the `swebuild sizes --format html` report of a small real image set
# (pushed by the test into a throwaway docker-registry) in headless Chromium
# and keep the PNG, so the chart can be looked at, not only written.
#
#   scripts/sizes-screenshot.sh [OUT.png]     (default: sizes-report.png)
#
# Needs: apt-get install -y chromium skopeo docker-registry
set -euo pipefail
out=${1:-sizes-report.png}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."
SWEBUILD_SIZES_SCREENSHOT=$out go test -count=1 -run '^TestHTMLScreenshot$' -v ./sizes | grep -E '^(---|ok|FAIL|\s+html_test)' || true
test -s "$out" || { echo "no screenshot written" >&2; exit 1; }
echo "screenshot: $out (page: ${out%.*}.html)"
