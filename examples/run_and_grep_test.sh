#!/usr/bin/env bash
# Runs a program and checks that its output matches every given extended regex.
set -euo pipefail
program="$1"; shift
out="$("$program")"
echo "$out"
for pattern in "$@"; do
  grep -Eq "$pattern" <<<"$out" || { echo "missing from output: $pattern" >&2; exit 1; }
done
echo "1 passed, 0 failed"
