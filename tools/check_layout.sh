#!/usr/bin/env bash
# Checks the repository's layout rules with bazel query (README: "Where tests and
# benchmarks live"); tools/test.sh runs it before the tests.
#  1. //:all_tests reaches every test target: a new test package must add its `tests`
#     suite there, a new test must be in its package's suite.
#  2. Layering: nothing under device/, ops/, profiler/, distributed/ depends on the Python
#     package //python:torch_xxnpu (tests and benchmarks that import it live in testing/
#     and benchmarks/).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
# cquery, not query: it takes the build's options (.bazelrc.user's --repo_env), so it
# does not re-fetch the torch repository with a different environment.
q() { bazel cquery --config=ci "$1" 2>/dev/null | sed 's/ (.*)$//' | sort; }

all="$(q 'tests(//...)')"
if [[ $(wc -l <<<"$all") -lt 10 ]]; then
  echo "check_layout: bazel cquery 'tests(//...)' failed or found almost nothing:" >&2
  bazel cquery --config=ci 'tests(//...)' >&2 || true
  exit 1
fi
missing="$(comm -23 <(echo "$all") <(q 'tests(//:all_tests)'))"
if [[ -n "$missing" ]]; then
  echo "check_layout: tests not reached from //:all_tests (add them to their package's" \
       "\`tests\` suite, and the suite to //:all_tests in BUILD.bazel):" >&2
  echo "$missing" >&2
  status=1
fi

upward="$(q 'rdeps(//..., //python:torch_xxnpu)' | grep -E '^//(device|ops|profiler|distributed)[/:]' || true)"
if [[ -n "$upward" ]]; then
  echo "check_layout: lower layers depend on //python:torch_xxnpu (move these to testing/" \
       "or benchmarks/):" >&2
  echo "$upward" >&2
  status=1
fi

[[ $status -eq 0 ]] && echo "check_layout: ok ($(q 'tests(//:all_tests)' | wc -l) tests in //:all_tests, no upward dependency on //python)"
exit $status
