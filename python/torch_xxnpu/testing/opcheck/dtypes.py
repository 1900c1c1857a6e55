"""dtype names, the ``--dtypes`` argument, and torch.testing.assert_close's default
tolerances by dtype."""
from typing import Optional


# torch.testing.assert_close's defaults (rtol, atol), by dtype name.
DEFAULT_TOL = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtypes(spec: Optional[str]):
    import torch

    if not spec:
        return None
    out = []
    for name in spec.split(","):
        name = name.strip()
        d = getattr(torch, name, None)
        if not isinstance(d, torch.dtype):
            raise SystemExit(f"opcheck: unknown dtype {name!r} (use torch's names: float32, bfloat16, int64, ...)")
        out.append(d)
    return out
