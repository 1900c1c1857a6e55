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
echo "[test] C++ tests under AddressSanitizer (Python tests are tagged no_sanitizer)"
bazel test --config=ci --config=asan //...
echo "[test] all passed in $(( $(date +%s) - start )) s"
