#!/usr/bin/env bash
# Installs Chromium for infra/screenshots.py (headless screenshots of the Airflow and MLflow UIs).
# Idempotent: does nothing when /usr/bin/chromium already exists. Needs root (or sudo) and apt.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  bash "$(dirname "$0")/apt-install.sh" chromium
fi
echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
