#!/usr/bin/env bash
# Runs the test suite in .venv; exits non-zero when a test fails or when no test was collected.
#
# First the Debian packages the suite's real services need, in one apt call when any is missing:
# headless Chromium (the screenshot tests), PostgreSQL and Redis (the celery stack test).
# Then pytest on parallel workers (pytest-xdist, DEEPSENT_TEST_WORKERS, default 3 on 2 cores: the
# stack tests mostly wait on their DAG runs, so a third worker keeps the cores busy meanwhile; 0 runs
# in one process). The slowest tests are printed at every run, and the counts, time and slowest
# tests are written as JSON to DEEPSENT_SUITE_REPORT (default .deepsent/suite-report.json), with
# the install time `make` measured (.venv/.install-seconds) and this script's package installs.
set -uo pipefail

# All in one function, read whole before it runs: editing this file during a run cannot change that run.
main() {
  cd "$(dirname "$0")/.."
  started=$(date +%s)
  missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "infra/test.sh: installing ${missing[*]} (apt)" >&2
    bash infra/apt-install.sh "${missing[@]}" >/tmp/deepsent-test-apt.log 2>&1 \
      || echo "infra/test.sh: could not install ${missing[*]} (see /tmp/deepsent-test-apt.log); tests that need them will say so" >&2
  fi
  install_seconds=$(( $(date +%s) - started ))
  if [ -f .venv/.install-seconds ]; then  # the venv's own install, counted once: by the first run after it
    install_seconds=$(( install_seconds + $(cat .venv/.install-seconds) ))
    mv .venv/.install-seconds .venv/.install-seconds.counted
  fi
  export DEEPSENT_INSTALL_SECONDS="$install_seconds"
  export DEEPSENT_SUITE_REPORT="${DEEPSENT_SUITE_REPORT:-$PWD/.deepsent/suite-report.json}"
  workers="${DEEPSENT_TEST_WORKERS:-3}"
  parallel=()
  # loadgroup: the tests of one xdist_group (a module sharing one stack) run on one worker, the rest one by one;
  # no reorder: the order of tests/conftest.py's collection hook (the tests that wait start first) is kept.
  [ "$workers" -gt 0 ] && parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
  .venv/bin/python -m pytest "${parallel[@]}" "$@"
  rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "infra/test.sh: pytest collected no tests; treating that as a failure" >&2
    exit 1
  fi
  echo "infra/test.sh: report in $DEEPSENT_SUITE_REPORT" >&2
  exit "$rc"
}
main "$@"
