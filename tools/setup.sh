#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test torch-xxnpu, then configures
# Bazel. Idempotent: a second run checks and does nothing. Needs root for apt (CI and
# these machines run as root).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(bazel-bootstrap bazel-rules-java bazel-platforms libabsl-dev libgtest-dev libgmock-dev
              libbenchmark-dev pkg-config g++ openjdk-17-jdk-headless)
# torch's CPU wheel is pinned: an unpinned torch pulls a multi-GB CUDA build.
# expecttest: torch.testing._internal (OpInfo database, device-generic tests) imports it.
# HolisticTraceAnalysis (testing/profiler:hta_test, torch_xxnpu.profiler.hta) is installed
# without its declared dependencies (they pull jupyterlab: ~2 min against ~35 s), so what
# it imports is listed here, pinned: pandas 2.x (HTA 0.5.0 fails on pandas 3: int8 columns
# it writes wider values into, DataFrame.drop(axis=, columns=), chained in-place fillna),
# plotly, networkx (critical path), psutil, PyYAML.
# hypothesis: the differential fuzzer (python -m torch_xxnpu.testing.fuzz, //testing/ops:fuzz_test);
# test-only like the rest: the wheel's runtime dependency stays torch alone.
PIP_PACKAGES=(torch==2.13.0 pytest numpy expecttest==0.3.0 hypothesis==6.155.2
              pandas==2.3.3 plotly==7.1.0 networkx==3.6.1 psutil==7.2.2 PyYAML==6.0.3)
PIP_NODEPS_PACKAGES=(holistictraceanalysis==0.5.0)
PYTHON="${PYTHON:-python3}"

say() { echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "apt-get not found; install by hand: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" \
    >/tmp/torch_xxnpu_apt.log 2>&1 || { tail -n 20 /tmp/torch_xxnpu_apt.log; die "apt-get install failed"; }
else
  say "Debian packages present"
fi

command -v "$PYTHON" >/dev/null || die "no $PYTHON on PATH (Python 3.11 with pip is expected)"
# Prints the specs (name==version) whose package is missing or at another version.
missing_pip() {
  "$PYTHON" - "$@" <<'PY' || true
import sys, importlib.metadata as md
for spec in sys.argv[1:]:
    name, _, version = spec.partition("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        print(spec); continue
    if version and have.split("+")[0] != version:
        print(spec)
PY
}
# pip_install LABEL [pip options] -- SPECS...: installs the specs that are missing.
pip_install() {
  local label="$1"; shift
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  local need=()
  mapfile -t need < <(missing_pip "$@")
  if ((${#need[@]})); then
    say "installing $label: ${need[*]}"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "${opts[@]}" "${need[@]}" \
      || die "pip install ${need[*]} failed"
  else
    say "$label present"
  fi
}
pip_install "pip packages" -- "${PIP_PACKAGES[@]}"
pip_install "pip packages without their dependencies" --no-deps -- "${PIP_NODEPS_PACKAGES[@]}"

command -v bazel >/dev/null || die "bazel not on PATH after installing bazel-bootstrap"
"$PYTHON" tools/configure.py | sed 's/^/[setup] /'
