#!/usr/bin/env bash
# apt-install.sh BINARY PACKAGE...: installs the Debian PACKAGEs when BINARY is not on the PATH (idempotent).
# Needs root (or sudo) and apt. Services are never started here: the stack runs them as its own processes.
set -euo pipefail
binary="$1"; shift
if command -v "$binary" >/dev/null 2>&1; then
  echo "$binary already installed: $(command -v "$binary")"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be stale or missing: update once, then install.
$SUDO apt-get install -y -q --no-install-recommends "$@" || { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "$@"; }
command -v "$binary"
