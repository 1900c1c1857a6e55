"""A fuzz case as plain data (what the strategies draw, what a worker rebuilds tensors
from, what --replay takes back), its replay token, the signature that makes findings
distinct, and the known-failures file."""
import base64
import fnmatch
import json
import zlib
from typing import Any, Dict, List, Optional

# Outcomes of one case. The first group are findings: xxnpu and the CPU disagree.
FINDING_KINDS = ("wrong-values", "wrong-meta", "xxnpu-accepts", "xxnpu-raises", "exception-class", "crash", "hang")
# Not findings: both agree ("pass", "both-raise"), xxnpu rejected what CUDA rejects
# ("rejected"), xxnpu accepted a mixed-device call CUDA would reject but got it right
# ("lenient"), the case does not apply to this sample ("n/a"), or the CPU reference itself
# died ("reference-crash": nothing to compare against).
OK_KINDS = ("pass", "both-raise", "rejected", "lenient", "n/a", "reference-crash")


def token(spec: Dict[str, Any]) -> str:
    """A self-contained replay token: the case's JSON, compressed (``--replay TOKEN``)."""
    raw = json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def from_token(tok: str) -> Dict[str, Any]:
    tok = tok.strip()
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))
        spec = json.loads(raw)
    except Exception as e:  # noqa: BLE001 - any garbage is a bad argument
        raise ValueError(f"not a fuzz replay token (the string printed after --replay): {e}") from e
    if not isinstance(spec, dict) or "op" not in spec or "probe" not in spec:
        raise ValueError("the replay token does not hold a fuzz case (no 'op'/'probe')")
    return spec


def signature(spec: Dict[str, Any], kind: str) -> str:
    """Findings are distinct per (op, probe, kind): the same bug met with other shapes or
    dtypes is one finding, counted."""
    return f"{spec['op']} | {spec['probe']} | {kind}"


class KnownFailures:
    """The checked-in list of findings that are understood, each with a reason:
    ``{"failures": [{"op": "add", "probe": "out_device", "kind": "xxnpu-accepts",
    "reason": "open: ..."}]}``; op/probe/kind are fnmatch patterns, ``dtype`` optional."""

    def __init__(self, entries: Optional[List[Dict[str, str]]] = None, path: str = ""):
        self.entries = entries or []
        self.path = path
        for i, e in enumerate(self.entries):
            missing = [k for k in ("op", "probe", "kind", "reason") if not isinstance(e.get(k), str) or not e.get(k)]
            if missing:
                raise ValueError(f"{path or 'known failures'}: entry {i} lacks {', '.join(missing)} "
                                 "(each entry needs op, probe, kind and a reason)")
            if e["kind"] not in FINDING_KINDS and not any(fnmatch.fnmatchcase(k, e["kind"]) for k in FINDING_KINDS):
                raise ValueError(f"{path}: entry {i} has kind {e['kind']!r}; expected one of {', '.join(FINDING_KINDS)}")
        self.used = [0] * len(self.entries)

    @classmethod
    def load(cls, path: str) -> "KnownFailures":
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("failures"), list):
            raise ValueError(f'{path}: expected an object with a "failures" list')
        return cls(doc["failures"], path)

    def match(self, spec: Dict[str, Any], kind: str) -> Optional[str]:
        for i, e in enumerate(self.entries):
            if (fnmatch.fnmatchcase(spec["op"], e["op"]) and fnmatch.fnmatchcase(spec["probe"], e["probe"])
                    and fnmatch.fnmatchcase(kind, e["kind"])
                    and fnmatch.fnmatchcase(spec.get("dtype", ""), e.get("dtype", "*"))):
                self.used[i] += 1
                return e["reason"]
        return None

    def unused(self) -> List[Dict[str, str]]:
        return [e for e, n in zip(self.entries, self.used) if not n]
