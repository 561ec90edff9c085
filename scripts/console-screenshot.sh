#!/usr/bin/env bash
# A PNG of the admin listener's console page, for a reviewer to look at:
# headless Chromium (Debian's chromium, installed by scripts/deps.sh test)
# loads the page, lets its script read /v1/status, and saves the window.
#
#   scripts/console-screenshot.sh [URL] [OUT.png]
#
# URL defaults to http://127.0.0.1:9644/ (admin.listeners=http://127.0.0.1:9644),
# OUT to console.png; the window is 1280x1024.
set -euo pipefail
url=${1:-http://127.0.0.1:9644/}
out=${2:-console.png}
command -v chromium >/dev/null || { echo "console-screenshot: chromium is missing (scripts/deps.sh test)" >&2; exit 1; }
profile=$(mktemp -d "${TMPDIR:-/tmp}/strata-console.XXXXXX")
trap 'rm -rf "$profile"' EXIT
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --user-data-dir="$profile" --window-size=1280,1024 --virtual-time-budget=8000 \
  --screenshot="$out" "$url" >/dev/null 2>&1
[ -s "$out" ] || { echo "console-screenshot: chromium wrote no $out" >&2; exit 1; }
echo "console-screenshot: $out"
