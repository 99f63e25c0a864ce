#!/usr/bin/env bash
# Runs the test suite in .venv; exits non-zero when a test fails or when no test was collected.
# Headless Chromium (for the report screenshot test) is installed first when missing.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  bash infra/install-chromium.sh || echo "infra/test.sh: could not install Chromium; its screenshot test will skip" >&2
fi
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "infra/test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
