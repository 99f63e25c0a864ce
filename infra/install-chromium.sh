#!/usr/bin/env bash
# Installs Chromium for infra/screenshots.py (headless screenshots of the Airflow and MLflow UIs).
# Idempotent: does nothing when chromium is already installed. Needs root (or sudo) and apt.
set -euo pipefail
exec bash "$(dirname "$0")/apt-install.sh" chromium chromium
