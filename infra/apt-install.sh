#!/usr/bin/env bash
# apt-install.sh PACKAGE...: installs Debian packages (apt-get update first when the lists are stale).
# Needs root (or sudo) and apt. Callers decide whether a package is missing. Starts no service:
# the local stack runs PostgreSQL and Redis as its own processes, never as system services.
set -euo pipefail
if [ "$#" -eq 0 ]; then echo "usage: apt-install.sh PACKAGE..." >&2; exit 2; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "$@" || { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "$@"; }
