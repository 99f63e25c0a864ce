#!/usr/bin/env bash
# Runs the test suite in .venv; exits non-zero when a test fails or when no test was collected.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "infra/test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
