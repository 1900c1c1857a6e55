"""All external repositories torch-xxnpu needs, as one macro.

Our WORKSPACE calls it, and so does any workspace that embeds our targets (see
examples/embed/WORKSPACE): it brings the offline stand-ins, Debian's Bazel rule sets, the
local torch/Python and Debian's abseil, GoogleTest and Google Benchmark.
"""

load(":local_deps.bzl", "local_torch_repository", "system_cc_repository")

def _third_party_dir(ctx):
    # Resolved through a label so it works from this workspace and from one embedding us.
    return ctx.path(Label("//third_party:BUILD.bazel")).dirname

def _offline_stand_in_impl(ctx):
    src = _third_party_dir(ctx).get_child(ctx.attr.dir)
    for child in src.readdir():
        ctx.symlink(child, child.basename)
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

_offline_stand_in = repository_rule(
    implementation = _offline_stand_in_impl,
    attrs = {"dir": attr.string(mandatory = True)},
    local = True,
)

def xxnpu_dependencies():
    """Declares every external repository; call it first in a WORKSPACE."""

    # Bazel 4.2.3's WORKSPACE suffix asks for these; the real ones are downloaded.
    _offline_stand_in(name = "rules_cc", dir = "rules_cc")
    _offline_stand_in(name = "remote_coverage_tools", dir = "remote_coverage_tools")

    # Debian's bazel-rules-java and bazel-platforms (tools/setup.sh installs them).
    native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    native.local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")

    # The pip-installed torch (headers, libraries) and the Python it is installed in.
    local_torch_repository(name = "local_torch")
    native.register_toolchains("@local_torch//:python_toolchain")

    # Debian's C++ libraries, located with pkg-config.
    system_cc_repository(
        name = "com_google_absl",
        debian_package = "libabsl-dev",
        targets = {
            "absl": [
                "absl_base",
                "absl_flat_hash_map",
                "absl_hash",
                "absl_status",
                "absl_statusor",
                "absl_str_format",
                "absl_strings",
                "absl_synchronization",
                "absl_time",
            ],
        },
    )
    system_cc_repository(
        name = "com_google_googletest",
        debian_package = "libgtest-dev and libgmock-dev",
        targets = {
            # gmock's matchers come with every test.
            "gtest": [
                "gmock",
                "gtest",
            ],
            "gtest_main": [
                "gmock",
                "gtest_main",
            ],
        },
    )
    system_cc_repository(
        name = "com_github_google_benchmark",
        debian_package = "libbenchmark-dev",
        targets = {
            "benchmark": ["benchmark"],
            # libbenchmark_main.a has no pkg-config module of its own.
            "benchmark_main": [
                "-lbenchmark_main",
                "benchmark",
            ],
        },
    )
