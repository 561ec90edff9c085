#!/usr/bin/env bash
# Regenerate the README's configuration reference from the config tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin/stratad}
python3 - "$bin" <<'PY'
import subprocess, sys
doc = subprocess.run([sys.argv[1], "--print-config-doc"], check=True, stdout=subprocess.PIPE).stdout.decode()
text = open("README.md").read()
begin, end = "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->\n"
a, b = text.index(begin) + len(begin), text.index(end)
open("README.md", "w").write(text[:a] + doc + text[b:])
PY
