#!/usr/bin/env bash
# Headless Chromium (Debian's `chromium` package) for the test that renders the HTML report.
# Installs it with apt-get when it is missing and this user may (root, or passwordless sudo);
# otherwise says how, and that test skips outside CI (it fails under CI=true).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup] chromium not found and no apt-get: install Chromium to run the HTML report test"
  exit 0
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO=(sudo -n); else
    echo "[setup] chromium not found: run 'sudo apt-get install -y chromium' to run the HTML report test"
    exit 0
  fi
fi
echo "[setup] installing Debian's chromium (headless HTML report test)"
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
chromium --version
