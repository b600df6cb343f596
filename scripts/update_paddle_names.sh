#!/usr/bin/env bash
# Rewrites the table of Paddle names in docs/program.md from the one the frontend uses (the
# table a failing LanguageTest.PaddleNameTableAgreesWithTheLayersAndTheDocs writes out).
# Usage: scripts/update_paddle_names.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
TMPDIR="$fresh" "$build_dir/bin/fleet_unit_tests" \
  --gtest_filter='LanguageTest.PaddleNameTableAgreesWithTheLayersAndTheDocs' >/dev/null || true
[[ -f "$fresh/paddle_names.md" ]] || { echo "docs/program.md is up to date"; exit 0; }
/usr/bin/python3 - "$fresh/paddle_names.md" <<'PY'
import sys
table = open(sys.argv[1]).read()
path = "docs/program.md"
doc = open(path).read()
begin, end = "<!-- paddle-names:begin -->\n", "<!-- paddle-names:end -->"
b, e = doc.index(begin) + len(begin), doc.index(end)
open(path, "w").write(doc[:b] + table + doc[e:])
print("updated", path)
PY
