"""xxnpu_wheel: assembles a wheel from Bazel outputs (Bazel 4 has no py_wheel rule)."""

load("@local_torch//:defs.bzl", "PLATFORM_TAG", "PYTHON_TAG")

def _wheel_impl(ctx):
    name = "%s-%s-%s-%s-%s.whl" % (ctx.attr.distribution, ctx.attr.version, PYTHON_TAG, PYTHON_TAG, PLATFORM_TAG)
    out = ctx.actions.declare_file(name)
    args = ctx.actions.args()
    args.add("--out", out)
    args.add("--distribution", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--tag", "%s-%s-%s" % (PYTHON_TAG, PYTHON_TAG, PLATFORM_TAG))
    args.add("--summary", ctx.attr.summary)
    for req in ctx.attr.requires:
        args.add("--requires", req)
    for group, entries in ctx.attr.entry_points.items():
        for entry in entries:
            args.add("--entry-point", "%s:%s" % (group, entry))
    for f in ctx.files.srcs:
        path = f.short_path
        if not path.startswith(ctx.attr.strip_prefix):
            fail("%s is outside strip_prefix %s" % (path, ctx.attr.strip_prefix))
        args.add("--file", "%s=%s" % (path[len(ctx.attr.strip_prefix):], f.path))
    for f in ctx.files.bundle_libs_of:
        args.add("--bundle-libs-of", f.path)
    args.add("--bundle-pattern", ctx.attr.bundle_pattern)
    ctx.actions.run(
        outputs = [out],
        inputs = ctx.files.srcs,
        executable = ctx.executable._builder,
        arguments = [args],
        mnemonic = "XxnpuWheel",
        progress_message = "Assembling %s" % name,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

xxnpu_wheel = rule(
    implementation = _wheel_impl,
    attrs = {
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "summary": attr.string(default = ""),
        "srcs": attr.label_list(allow_files = True, doc = "Files placed at their path minus strip_prefix."),
        "strip_prefix": attr.string(default = ""),
        "requires": attr.string_list(),
        # group -> ["name = module:attr", ...]
        "entry_points": attr.string_list_dict(),
        "bundle_libs_of": attr.label_list(allow_files = True, doc = "Extensions whose matching shared libraries ship in <pkg>/_libs."),
        "bundle_pattern": attr.string(default = "^libabsl_"),
        "_builder": attr.label(default = Label("//tools:build_wheel"), executable = True, cfg = "host"),
    },
)
