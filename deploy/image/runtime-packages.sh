#!/usr/bin/env bash
# The Debian packages that hold the shared libraries the given binaries
# load (ldd, then dpkg -S), one a line: what the image's second stage
# installs, so its list never drifts from what the build linked.
#
#   deploy/image/runtime-packages.sh BINARY...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

owner() { # the package owning a library path, trying its merged-/usr twins
    local p="$1" r c
    r="$(readlink -f "$p")"
    for c in "$p" "$r" "/usr$p" "/usr$r" "${p#/usr}" "${r#/usr}"; do
        dpkg-query -S "$c" 2>/dev/null | head -n 1 | cut -d: -f1 && return 0
    done
    echo "runtime-packages: no package owns $p" >&2
    return 1
}

libs="$(for b in "$@"; do
    ldd "$b" | awk '/=> \// { print $3 } /^[[:space:]]*\/.*ld-linux/ { print $1 }'
done | sort -u)"
[ -n "$libs" ] || { echo "runtime-packages: ldd found no libraries" >&2; exit 1; }
for l in $libs; do owner "$l"; done | sort -u
