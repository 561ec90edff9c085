#!/usr/bin/env bash
# Regenerate the configuration references from the config tables: the
# README's (every key, from stratad) and objectstore/README.md's (the object
# store's keys, from os_config_doc).  Run after a build; the tests compare
# both.  Usage: scripts/gen-docs.sh [BUILD_BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
python3 - "$bin" <<'PY'
import subprocess, sys
bin_dir = sys.argv[1]

def splice(path, begin, end, doc):
    text = open(path).read()
    a, b = text.index(begin) + len(begin), text.index(end)
    open(path, "w").write(text[:a] + doc + text[b:])

def run(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout.decode()

splice("README.md", "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->\n",
       run(bin_dir + "/stratad", "--print-config-doc"))
splice("objectstore/README.md", "<!-- config:begin -->\n", "<!-- config:end -->",
       run(bin_dir + "/os_config_doc"))
PY
