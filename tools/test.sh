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
phase "AddressSanitizer: every C++ test, and the Python kernel tests of testing/ops" \
  "(xxnpu_py_test(asan = True)) with libasan preloaded into python"
bazel test --config=ci --config=asan //...
phase_done
# UBSan and TSan run the torch-free tests only (not those tagged `libtorch`): the libtorch
# tests need all of //ops built once more per sanitizer, instrumented, which the 60-minute
# budget has no room for (docs/testing.md, "Cost"); ASan runs them.
phase "UndefinedBehaviorSanitizer: the torch-free tests of //device/... and //distributed/..."
bazel test --config=ci --config=ubsan --build_tests_only \
  --test_tag_filters=-no_sanitizer,-no_ubsan,-benchmark,-libtorch //device/... //distributed/...
phase_done
phase "ThreadSanitizer: the torch-free tests of //device/... and //distributed/..." \
  "(suppressions: tools/tsan.supp)"
bazel test --config=ci --config=tsan --build_tests_only \
  --test_tag_filters=-no_sanitizer,-no_tsan,-benchmark,-libtorch //device/... //distributed/...
phase_done
echo "[test] all passed in $(( $(date +%s) - start )) s"
