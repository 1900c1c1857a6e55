"""The project's build macros: every BUILD file loads its C++ and Python rules from here.

Compiler flags live in this file only. They are attached to each target (not to
.bazelrc), so a workspace that embeds one of our targets compiles it correctly without
copying our .bazelrc.
"""

load("@local_torch//:defs.bzl", "TORCH_CXX11_ABI")

# C++20 everywhere (torch 2.13's headers accept it; Kineto moved to it), and torch's
# libstdc++ ABI so our objects link with libtorch and with Debian's abseil/gtest.
XXNPU_COPTS = [
    "-std=c++20",
    "-D_GLIBCXX_USE_CXX11_ABI=%d" % TORCH_CXX11_ABI,
    "-fPIC",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
]

# Device kernels are the simulated hardware: they run optimised even in fastbuild, or a
# debug build's kernels would be 30x slower than the chip they stand for. Not under a
# sanitizer: there the kernels are compiled at the sanitizer configs' -O1, because -O3
# with instrumentation and debug info doubles the compile time of a torch-including file
# (ops/unary_ops.cc: 432 s at -O3 -g, 214 s at -O1 -g1 on the loaded 2-core machine), and
# the ASan phase compiles all of //ops (docs/testing.md, "Cost").
KERNEL_COPTS = select({
    str(Label("//bazel:asan_build")): [],
    str(Label("//bazel:tsan_build")): [],
    str(Label("//bazel:ubsan_build")): [],
    "//conditions:default": ["-O3"],
})

# GCC 12 at -O3 reports a false -Wstringop-overflow inside libstdc++'s atomics when torch's
# IValue (intrusive_ptr refcounts) is inlined into a kernel file; torch builds itself with
# this warning off. For the kernel files where it fires.
NO_STRINGOP_OVERFLOW = ["-Wno-stringop-overflow"]

ABSL = "@com_google_absl//:absl"
LIBTORCH = "@local_torch//:libtorch"
KINETO_HEADERS = "@local_torch//:kineto_headers"
GTEST_MAIN = "@com_google_googletest//:gtest_main"
GTEST = "@com_google_googletest//:gtest"
BENCHMARK_MAIN = "@com_github_google_benchmark//:benchmark_main"

# The implementation of the runtime API (device/runtime.h), chosen at link time: libraries
# depend on //device:runtime_api only, and every final binary made here (tests,
# benchmarks, programs, the Python extension) links the selected driver
# (--//device:driver=..., docs/porting.md). A Label, so it names this repository's flag
# even when the macro is called from another workspace.
DRIVER = Label("//device:driver")

def _driver_deps(driver):
    return [DRIVER] if driver else []

def _torch_deps(torch, kineto):
    deps = []
    if torch or kineto:
        deps.append(LIBTORCH)
    if kineto:
        deps.append(KINETO_HEADERS)
    return deps

def xxnpu_cc_library(name, deps = [], copts = [], torch = False, kineto = False, **kwargs):
    """A C++ library of this project.

    Args:
      name: target name.
      deps: dependencies.
      copts: extra compiler flags (the project's are added).
      torch: links libtorch and its headers. Keep False in the torch-free runtime.
      kineto: also Kineto's headers (implies torch).
      **kwargs: passed to cc_library (srcs, hdrs, alwayslink, visibility, ...).
    """
    native.cc_library(
        name = name,
        deps = deps + _torch_deps(torch, kineto),
        copts = XXNPU_COPTS + copts,
        **kwargs
    )

# The CPU capabilities a SIMD kernel file is compiled for, as torch's own build does
# (cmake/Codegen.cmake): the CPU_CAPABILITY macros its at::vec headers read, and the ISA
# flags. The file is compiled once per entry; at run time at::get_cpu_capability() picks
# one (ops/cpu_capability.h). The AVX-512 entry also silences GCC 12's false
# (maybe-)uninitialized reports on the _mm512_undefined_*() operands of its intrinsics.
# (suffix, capability, ISA flags (x86-64 only), flags for every architecture).
# DEFAULT: GCC notes (-Wpsabi) that passing at::vec's 32-byte emulated vectors by value
# changed ABI in GCC 4.6; these functions never cross a build boundary (each build is its
# own namespace, and the dispatch file passes only pointers), so the note is noise.
_CPU_CAPABILITIES = [
    ("default", "DEFAULT", [], ["-Wno-psabi"]),
    ("avx2", "AVX2", ["-mavx2", "-mfma", "-mf16c", "-mbmi2"], []),
    ("avx512", "AVX512", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-Wno-maybe-uninitialized", "-Wno-uninitialized"], []),
]

def xxnpu_cpu_kernels(name, srcs, deps = [], copts = [], visibility = None):
    """Kernel sources compiled once per CPU capability (DEFAULT, and AVX2/AVX512 on x86-64).

    Each build sees CPU_CAPABILITY=<DEFAULT|AVX2|AVX512> and CPU_CAPABILITY_<that>, and must
    put what it defines in `namespace CPU_CAPABILITY` (torch's convention), so the three
    builds link side by side; a hand-written dispatch file picks one at run time. Keep these
    sources to inner loops: each is compiled three times.

    Args:
      name: the library holding every build.
      srcs: the per-capability sources (and headers private to them).
      deps: their dependencies (libtorch is added: the at::vec headers and Sleef).
      copts: extra compiler flags.
      visibility: of `name`.
    """
    builds = []
    for suffix, capability, isa_flags, common_flags in _CPU_CAPABILITIES:
        build = "%s_%s" % (name, suffix)
        flags = ["-DCPU_CAPABILITY=" + capability, "-DCPU_CAPABILITY_" + capability] + common_flags
        if isa_flags:
            # The ISA levels exist on x86-64 only: elsewhere these builds are empty and the
            # dispatch file (which tests __x86_64__) refers to none of them.
            flags = select({"@platforms//cpu:x86_64": flags + isa_flags, "//conditions:default": flags})
            build_srcs = select({"@platforms//cpu:x86_64": srcs, "//conditions:default": []})
        else:
            build_srcs = srcs
        native.cc_library(
            name = build,
            srcs = build_srcs,
            deps = deps + [LIBTORCH],
            copts = XXNPU_COPTS + KERNEL_COPTS + copts + flags,
        )
        builds.append(":" + build)
    native.cc_library(
        name = name,
        deps = builds,
        visibility = visibility,
    )

# The TSan build (--config=tsan) and its suppressions (each entry says why). Labels, so
# they name this repository's targets when the macro is called from another workspace.
TSAN_BUILD = Label("//bazel:tsan_build")
TSAN_SUPPRESSIONS = Label("//tools:tsan.supp")

def xxnpu_cc_test(name, size, deps = [], copts = [], torch = False, kineto = False, gtest_main = True, driver = True, tags = [], env = {}, **kwargs):
    """A GoogleTest test. `size` is required so every test states its budget.

    `env`: a plain dict of the test's own variables, kept in every build.

    `driver = False` leaves out the selected runtime driver (tests of the simulator itself
    link it directly; tests that never call the runtime need none).

    In the TSan build the test reads tools/tsan.supp (a runfile, so editing it reruns
    the tests) and stops at the first report. A test that links libtorch is tagged
    `libtorch`: tools/test.sh's UBSan phase leaves those out (docs/testing.md, "Cost").
    """
    native.cc_test(
        name = name,
        size = size,
        tags = tags + (["libtorch"] if torch or kineto else []),
        deps = deps + _torch_deps(torch, kineto) + [GTEST_MAIN if gtest_main else GTEST] + _driver_deps(driver),
        copts = XXNPU_COPTS + copts,
        data = select({
            str(TSAN_BUILD): [TSAN_SUPPRESSIONS],
            "//conditions:default": [],
        }),
        env = select({
            str(TSAN_BUILD): dict(env, TSAN_OPTIONS = "halt_on_error=1:second_deadlock_stack=1:suppressions=$(rootpath %s)" % str(TSAN_SUPPRESSIONS)),
            "//conditions:default": env,
        }),
        **kwargs
    )

def xxnpu_cc_binary(name, deps = [], copts = [], torch = False, kineto = False, driver = True, **kwargs):
    """A C++ program (examples, tools), linked with the selected runtime driver."""
    native.cc_binary(
        name = name,
        deps = deps + _torch_deps(torch, kineto) + _driver_deps(driver),
        copts = XXNPU_COPTS + copts,
        **kwargs
    )

def xxnpu_cc_benchmark(name, deps = [], copts = [], torch = False, kineto = False, tags = [], driver = True, **kwargs):
    """A Google Benchmark program, tagged `benchmark`; run it with `bazel run -c opt`.

    It is a binary, not a test, so `bazel test //...` never runs it.
    """
    native.cc_binary(
        name = name,
        deps = deps + _torch_deps(torch, kineto) + [BENCHMARK_MAIN] + _driver_deps(driver),
        copts = XXNPU_COPTS + copts,
        tags = tags + ["benchmark"],
        **kwargs
    )

def xxnpu_py_extension(name, deps = [], linkopts = [], tags = [], **kwargs):
    """The Python extension module `<name>.so`, linking torch's Python bindings.

    The wheel ships the non-torch shared libraries _C.so needs (Debian's abseil) in
    `_libs/` beside it, hence the $ORIGIN/_libs rpath. torch's own libraries are already
    loaded by `import torch`, which torch_xxnpu always does first.
    """
    native.cc_binary(
        name = name + ".so",
        linkshared = True,
        deps = deps + ["@local_torch//:torch_python", DRIVER],
        linkopts = linkopts + ["-Wl,-rpath,$$ORIGIN/_libs"],
        copts = XXNPU_COPTS,
        # An instrumented extension cannot load into the uninstrumented interpreter.
        tags = tags + ["no_sanitizer"],
        **kwargs
    )

# The ASan build (--config=asan) and the runtime its Python tests preload. Labels, so
# they name this repository's targets when the macro is called from another workspace.
ASAN_BUILD = Label("//bazel:asan_build")
ASAN_RUNTIME = Label("//bazel:asan_runtime")

def xxnpu_py_test(name, size, srcs, deps = [], tags = [], data = [], env = {}, asan = False, **kwargs):
    """A pytest file run by the torch Python.

    By default tagged no_sanitizer: under a sanitizer the extension module is instrumented,
    and an instrumented library cannot be loaded into the plain interpreter.

    `asan = True` also runs the test in the ASan build (--config=asan, docs/testing.md
    "Sanitizers"): there _C.so and every library in it are built with -fsanitize=address,
    and testing/pytest_main.py re-executes the interpreter with the compiler's libasan
    preloaded (XXNPU_ASAN_RUNTIME names the file holding its path) and leak detection off
    (CPython and torch leave memory allocated at exit on purpose). Tagged no_ubsan and
    no_tsan: those builds have no such preload.

    `env`: a plain dict of the test's own variables, kept in every build.
    """
    if asan:
        tags = tags + ["no_ubsan", "no_tsan"]
        data = data + [ASAN_RUNTIME]
        asan_env = dict(env)
        asan_env["XXNPU_ASAN_RUNTIME"] = "$(rootpath %s)" % str(ASAN_RUNTIME)
        env = select({
            str(ASAN_BUILD): asan_env,
            "//conditions:default": env,
        })
    else:
        tags = tags + ["no_sanitizer"]
    native.py_test(
        name = name,
        size = size,
        srcs = srcs + ["//testing:pytest_main.py"],
        main = "//testing:pytest_main.py",
        args = ["$(location %s)" % srcs[0]],
        data = data,
        deps = deps,
        env = env,
        tags = tags,
        python_version = "PY3",
        **kwargs
    )
