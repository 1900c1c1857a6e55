"""Repository rules that find this machine's Python, torch and Debian C++ libraries.

Nothing machine-specific is committed: the rules run the Python interpreter (named by
PYTHON_BIN_PATH, which tools/configure.py writes into the git-ignored .bazelrc.user, else
`python3` on PATH) and pkg-config, and generate BUILD files from what they report.
"""

_PROBE = """
import json, sys, sysconfig, platform
try:
    import torch
except Exception as e:  # report, do not crash: the rule turns it into a clear failure
    print(json.dumps({"error": "cannot import torch: %s" % e}))
    sys.exit(0)
import os
print(json.dumps({
    "python": sys.executable,
    "python_include": sysconfig.get_paths()["include"],
    "python_tag": "cp%d%d" % sys.version_info[:2],
    "platform_tag": sysconfig.get_platform().replace("-", "_").replace(".", "_"),
    "torch_dir": os.path.dirname(torch.__file__),
    "torch_version": torch.__version__,
    "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
}))
"""

def _find_python(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if not python:
        found = ctx.which("python3")
        if not found:
            fail("No Python found: set PYTHON_BIN_PATH or run `python3 tools/configure.py`.")
        python = str(found)
    return python

def _local_torch_impl(ctx):
    python = _find_python(ctx)
    res = ctx.execute([python, "-c", _PROBE])
    if res.return_code != 0:
        fail("Running %s to locate torch failed:\n%s" % (python, res.stderr))
    info = json.decode(res.stdout.strip().splitlines()[-1])
    if "error" in info:
        fail("%s: %s. Install it with `pip install torch==2.13.0` (tools/setup.sh does this)." %
             (python, info["error"]))
    if not info["torch_version"].startswith("2.13."):
        fail("torch %s found at %s; torch-xxnpu builds against torch 2.13.x." %
             (info["torch_version"], info["torch_dir"]))

    ctx.symlink(info["torch_dir"] + "/include", "include")
    ctx.symlink(info["torch_dir"] + "/lib", "lib")
    ctx.symlink(info["python_include"], "python_include")
    ctx.file("defs.bzl", """\"\"\"Facts about the local Python and torch, written by @local_torch's repository rule.\"\"\"
TORCH_VERSION = "{torch_version}"
TORCH_CXX11_ABI = {cxx11_abi}
PYTHON_BIN = "{python}"
PYTHON_TAG = "{python_tag}"
PLATFORM_TAG = "{platform_tag}"
""".format(**info))
    ctx.template("BUILD.bazel", ctx.attr._build_tpl, {"%{PYTHON_BIN}": info["python"]})

local_torch_repository = repository_rule(
    implementation = _local_torch_impl,
    attrs = {"_build_tpl": attr.label(default = Label("//third_party:local_torch.BUILD.tpl"))},
    environ = ["PYTHON_BIN_PATH", "XXNPU_TORCH_VERSION"],
    local = True,
)

def _pkg_config(ctx, args, what):
    pkg_config = ctx.which("pkg-config")
    if not pkg_config:
        fail("pkg-config not found; install it (tools/setup.sh installs pkg-config).")
    res = ctx.execute([pkg_config] + args)
    if res.return_code != 0:
        fail("pkg-config %s failed: %s\nInstall %s (tools/setup.sh installs it)." %
             (" ".join(args), res.stderr.strip(), what))
    return res.stdout.strip()

def _system_cc_impl(ctx):
    lines = ["# Generated from pkg-config by system_cc_repository: Debian's %s." % ctx.attr.debian_package,
             'package(default_visibility = ["//visibility:public"])', ""]
    for target, entries in ctx.attr.targets.items():
        # An entry starting with "-" is a literal linker flag (for archives without a
        # pkg-config module, such as libbenchmark_main.a); the rest are pkg-config modules.
        modules = [m for m in entries if not m.startswith("-")]
        libs = [m for m in entries if m.startswith("-")]
        libs += _pkg_config(ctx, ["--libs"] + modules, ctx.attr.debian_package).split(" ")
        cflags = _pkg_config(ctx, ["--cflags"] + modules, ctx.attr.debian_package)
        lines.append("cc_library(")
        lines.append('    name = "%s",' % target)
        lines.append("    linkopts = %s," % repr([l for l in libs if l]))
        lines.append("    copts = %s," % repr([f for f in cflags.split(" ") if f]))
        lines.append(")")
        lines.append("")
    ctx.file("BUILD.bazel", "\n".join(lines))

system_cc_repository = repository_rule(
    implementation = _system_cc_impl,
    attrs = {
        "debian_package": attr.string(mandatory = True),
        # target name -> pkg-config modules it links (or "-l..." flags)
        "targets": attr.string_list_dict(mandatory = True),
    },
    local = True,
)
