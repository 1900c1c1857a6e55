#!/usr/bin/env bash
# Passes when the genquery output ($1: somepath from every library of _C.so to
# //device:driver) is empty, i.e. only final binaries link the driver.
set -euo pipefail
if [[ -s "$1" ]]; then
  echo "FAIL: a library above the driver seam depends on the driver; one path:" >&2
  cat "$1" >&2
  echo "Depend on //device:runtime_api instead (docs/porting.md)." >&2
  exit 1
fi
echo "PASS: no library above the seam depends on //device:driver"
