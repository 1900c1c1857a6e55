"""Writes a wheel (PEP 427) from files Bazel built; used by //bazel:wheel.bzl.

Shared libraries that an extension needs and a user's machine may lack (Debian's
abseil) are copied into ``_libs/`` beside the extension, which is linked with an
``$ORIGIN/_libs`` rpath; the libraries torch ships are not bundled.
"""
import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

# Fixed timestamp: the same inputs give the same wheel bytes (cacheable, comparable).
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _needed_libs(extension: str, pattern: str):
    """Resolved paths of the shared libraries `extension` loads whose name matches."""
    out = subprocess.run(["ldd", extension], check=True, capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m and re.search(pattern, m.group(1)):
            if m.group(2) == "not":
                sys.exit(f"build_wheel: {extension} needs {m.group(1)}, which is not found")
            libs[m.group(1)] = m.group(2)
    return libs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--distribution", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--tag", required=True, help="python-abi-platform")
    p.add_argument("--summary", default="")
    p.add_argument("--requires", action="append", default=[])
    p.add_argument("--entry-point", action="append", default=[], help="group:name = module:attr")
    p.add_argument("--file", action="append", default=[], help="dest=src")
    p.add_argument("--bundle-libs-of", action="append", default=[])
    p.add_argument("--bundle-pattern", default="^libabsl_")
    a = p.parse_args()

    files = {}
    for spec in a.file:
        dest, src = spec.split("=", 1)
        files[dest] = src
    for ext in a.bundle_libs_of:
        dest_ext = next((d for d, s in files.items() if s == ext), None)
        if dest_ext is None:
            sys.exit(f"build_wheel: {ext} is not among the wheel's files")
        libdir = os.path.join(os.path.dirname(dest_ext), "_libs")
        for soname, path in sorted(_needed_libs(ext, a.bundle_pattern).items()):
            files[f"{libdir}/{soname}"] = path

    dist_info = f"{a.distribution}-{a.version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {a.distribution}",
        f"Version: {a.version}",
        f"Summary: {a.summary}",
        "Requires-Python: >=3.10",
    ] + [f"Requires-Dist: {r}" for r in a.requires]
    wheel = ["Wheel-Version: 1.0", "Generator: torch_xxnpu tools/build_wheel.py", "Root-Is-Purelib: false",
             f"Tag: {a.tag}"]
    groups = {}
    for ep in a.entry_point:
        group, entry = ep.split(":", 1)
        groups.setdefault(group, []).append(entry)
    entry_points = "".join(f"[{g}]\n" + "".join(f"{e}\n" for e in es) + "\n" for g, es in sorted(groups.items()))

    generated = {
        f"{dist_info}/METADATA": "\n".join(metadata) + "\n",
        f"{dist_info}/WHEEL": "\n".join(wheel) + "\n",
        f"{dist_info}/entry_points.txt": entry_points,
        f"{dist_info}/top_level.txt": "torch_xxnpu\n",
    }
    record = []
    with zipfile.ZipFile(a.out, "w", zipfile.ZIP_DEFLATED) as zf:
        def add(arcname: str, data: bytes, executable: bool = False) -> None:
            info = zipfile.ZipInfo(arcname, _ZIP_DATE)
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            record.append(f"{arcname},{_record_hash(data)},{len(data)}")

        for dest in sorted(files):
            with open(files[dest], "rb") as f:
                add(dest, f.read(), executable=dest.endswith(".so") or ".so." in dest)
        for dest, text in generated.items():
            add(dest, text.encode())
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", _ZIP_DATE)
        info.external_attr = 0o644 << 16
        zf.writestr(info, "\n".join(record) + "\n")


if __name__ == "__main__":
    main()
