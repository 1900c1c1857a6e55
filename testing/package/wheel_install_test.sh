#!/usr/bin/env bash
# Installs the built wheel into a fresh virtualenv (torch visible through system site
# packages) and checks it from a directory outside the repository.
set -euo pipefail
python_bin="$1"
wheel="$(readlink -f "$2")"
venv="$TEST_TMPDIR/venv"
"$python_bin" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --no-index --no-deps "$wheel"
cd "$TEST_TMPDIR"

"$venv/bin/python" - <<'PY'
import importlib.metadata as md, os, subprocess, sys
import torch_xxnpu
from torch_xxnpu import _C
where = os.path.dirname(torch_xxnpu.__file__)
assert "site-packages" in where, where
assert torch_xxnpu.__version__ == md.version("torch_xxnpu"), torch_xxnpu.__version__
eps = [e for e in md.entry_points(group="torch.backends") if e.name == "torch_xxnpu"]
assert eps and eps[0].value == "torch_xxnpu:_autoload", eps
reqs = md.requires("torch_xxnpu")
assert any(r.replace(" ", "").startswith("torch==2.13") for r in reqs), reqs
# Debian's abseil ships inside the wheel and is the copy the extension loads; the only
# libraries left unresolved are torch's own, which `import torch` has loaded.
ldd = subprocess.run(["ldd", _C.__file__], capture_output=True, text=True, check=True).stdout
absl = [l for l in ldd.splitlines() if "libabsl_" in l]
assert all(os.path.join(where, "_libs") in l for l in absl), "\n".join(absl)
missing = {l.split()[0] for l in ldd.splitlines() if "not found" in l}
assert missing <= {"libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so"}, missing
print("wheel ok:", where)
PY

# Autoload: a bare `import torch` imports the backend, unless turned off.
"$venv/bin/python" -c "import sys, torch; assert 'torch_xxnpu' in sys.modules, 'not autoloaded'"
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$venv/bin/python" -c \
  "import sys, torch; assert 'torch_xxnpu' not in sys.modules, 'autoload not disabled'"
echo "1 passed, 0 failed"
