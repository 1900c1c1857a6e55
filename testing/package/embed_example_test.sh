#!/usr/bin/env bash
# Builds and runs examples/embed, a separate Bazel workspace that depends on our
# targets through local_repository, the way a C++ user embeds torch-xxnpu.
set -euo pipefail
python_bin="$1"
# This script is a symlink into the source tree (testing/package/); the example is
# examples/embed at the root.
embed_dir="$(dirname "$(readlink -f "$0")")/../../examples/embed"
# The outer build's disk cache (tools/configure.py passes it) keeps this fast after the
# first run; without it the nested build starts cold.
cache="${XXNPU_BAZEL_DISK_CACHE:-$TEST_TMPDIR/disk_cache}"
export HOME="$TEST_TMPDIR"
cd "$embed_dir"
out="$(bazel --batch --output_user_root="$TEST_TMPDIR/bazel_root" run \
  --symlink_prefix=/ --nosandbox_debug --noshow_progress \
  --repo_env=PYTHON_BIN_PATH="$python_bin" --disk_cache="$cache" \
  //:embed 2>"$TEST_TMPDIR/bazel.log")" || { cat "$TEST_TMPDIR/bazel.log"; exit 1; }
echo "$out"
grep -q "^embed: device runtime ok" <<<"$out"
echo "1 passed, 0 failed"
