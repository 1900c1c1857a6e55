#!/bin/sh
echo "remote_coverage_tools is an offline stand-in: 'bazel coverage' is not supported here;" >&2
echo "build with --collect_code_coverage and run gcov on the .gcda files instead." >&2
exit 1
