"""Which ops the fuzzer drives: the OpInfo ops whose aten op has an xxnpu kernel (the
dispatcher's PrivateUse1 registrations) and the torch.ops.xxnpu custom ops, each with
the dtypes and probes that apply to it."""
import fnmatch
from typing import Dict, List, Optional

from torch_xxnpu.testing.opcheck.cases import load_cases
from torch_xxnpu.testing.opcheck.dtypes import dtype_name

# Their results are not a function of their inputs (memory left as it was, random draws).
NONDETERMINISTIC = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_",
                    "bernoulli", "normal", "normal.in_place", "normal.number_mean", "uniform", "as_strided",
                    "as_strided.partial_views"}
# Ops whose integer arguments index into the input: out-of-range and negative values.
INDEX_OPS = {"gather", "scatter", "scatter_add", "index_add", "index_select", "index_copy", "index_fill",
             "index_put", "take", "take_along_dim", "put", "nn.functional.embedding", "masked_select",
             "repeat_interleave", "xxnpu::reshape_and_cache", "xxnpu::paged_attention", "xxnpu::rotary_embedding",
             "xxnpu::rotary_embedding_"}
# The dtypes fuzzed (the op's CPU-supported ones among these): complex and quantized are out of scope.
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool")

BASE_PROBES = ["values", "layout", "extremes", "mixed_dtype", "mixed_device"]
OUT_PROBES = ["out_dtype", "out_shape", "out_device", "out_alias", "out_overlap"]
ALL_PROBES = BASE_PROBES + ["shapes", "inplace", "index_range"] + OUT_PROBES


class Target:
    def __init__(self, name: str, kind: str, dtypes: List[str], probes: List[str]):
        self.name, self.kind, self.dtypes, self.probes = name, kind, dtypes, probes

    def to_json(self):
        return {"op": self.name, "kind": self.kind, "dtypes": self.dtypes, "probes": self.probes}


def load_all_cases(with_opinfo: bool = True):
    return load_cases(["xxnpu"], with_opinfo=with_opinfo)


def native_aten_names() -> set:
    """aten op names (no overload) with an xxnpu kernel, from the dispatcher itself."""
    import torch

    names = set()
    for r in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        ns, _, rest = r.partition("::")
        if ns == "aten":
            names.add(rest.split(".")[0])
    return names


def find_targets(cases, ops: Optional[str] = None, probes: Optional[str] = None,
                 dtypes_filter: Optional[str] = None) -> List[Target]:
    import torch

    native = native_aten_names()
    regs = set(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    want = [w.strip() for w in ops.split(",") if w.strip()] if ops else None
    want_probes = [p.strip() for p in probes.split(",") if p.strip()] if probes else None
    out = []
    for name in sorted(cases):
        c = cases[name]
        if want is not None and not any(fnmatch.fnmatchcase(name, w) or (c.kind == "opinfo" and c.op.name == w)
                                        for w in want):
            continue
        if c.kind == "opinfo":
            base = c.aten_name.split(".")[-1]
            if name in NONDETERMINISTIC or not (base in native or base + "_" in native or base.rstrip("_") in native):
                continue
            dtypes = [dtype_name(d) for d in c.dtypes()
                      if dtype_name(d) in DTYPES and not c.skip_reason(d) and not c.expected_failure(d)]
            cls = type(c.op).__name__
            pr = list(BASE_PROBES)
            if cls in ("UnaryUfuncInfo", "BinaryUfuncInfo"):
                pr.append("shapes")
            if c.op.inplace_variant is not None:
                pr.append("inplace")
            if c.op.supports_out:
                pr += OUT_PROBES
        else:
            if name.split("::", 1)[1].startswith("_") or c.qualname not in regs or c.skip_reason(None):
                continue
            dtypes = [dtype_name(d) for d in c.dtypes() if dtype_name(d) in DTYPES]
            pr = list(BASE_PROBES)
        if name in INDEX_OPS:
            pr.append("index_range")
        if dtypes_filter:
            dtypes = [d for d in dtypes if d in [w.strip() for w in dtypes_filter.split(",")]]
        if want_probes is not None:
            pr = [p for p in pr if any(fnmatch.fnmatchcase(p, w) for w in want_probes)]
        if dtypes and pr:
            out.append(Target(name, c.kind, dtypes, pr))
    return out


def target_map(targets: List[Target]) -> Dict[str, Target]:
    return {t.name: t for t in targets}
