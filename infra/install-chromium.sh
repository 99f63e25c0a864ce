#!/usr/bin/env bash
# Installs Chromium for infra/screenshots.py (headless screenshots of the Airflow and MLflow UIs).
# Idempotent: does nothing when /usr/bin/chromium already exists. Needs root (or sudo) and apt.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
/usr/bin/chromium --version
