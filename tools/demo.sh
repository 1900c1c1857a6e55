#!/usr/bin/env bash
# The README's main command: set up, build the wheel, install it into a virtualenv, and
# run the seed's profiling example on xxnpu (table printed, trace and report written
# under ./logs/).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

echo "[demo] building the wheel"
bazel build --config=opt //python:wheel
wheel=$(ls bazel-bin/python/torch_xxnpu-*.whl)

venv=.venv
PYTHON="${PYTHON:-python3}"
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$venv"
echo "[demo] installing $(basename "$wheel") into $venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"

"$venv/bin/python" examples/seed_profile.py
