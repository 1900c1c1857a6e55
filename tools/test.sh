#!/usr/bin/env bash
# The README's test command: set up a fresh machine if needed, then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

start=$(date +%s)
echo "[test] layout: //:all_tests reaches every test, no lower layer depends on //python"
tools/check_layout.sh
echo "[test] bazel test //... (every layer's suite, the wheel install, the embedding example)"
bazel test --config=ci //...
# The sanitizer phases (docs/testing.md, "Sanitizers"). Each phase is timed: CI's budget
# is 60 minutes cold on a 2-core machine.
phase() { echo "[test] $*"; phase_start=$(date +%s); }
phase_done() { echo "[test] ... $(( $(date +%s) - phase_start )) s"; }
phase "AddressSanitizer: every C++ test, and the Python kernel tests (ops_test," \
  "native_ops_test, llm_ops_test) with libasan preloaded into python"
bazel test --config=ci --config=asan //...
phase_done
phase "UndefinedBehaviorSanitizer: //device/... and //distributed/..."
bazel test --config=ci --config=ubsan //device/... //distributed/...
phase_done
phase "ThreadSanitizer: //device/... and //distributed/... (suppressions: tools/tsan.supp)"
bazel test --config=ci --config=tsan //device/... //distributed/...
phase_done
echo "[test] all passed in $(( $(date +%s) - start )) s"
