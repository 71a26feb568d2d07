#!/usr/bin/env bash
# Makes sure `chromium` is on PATH for tests/e2e_status_page.rs (a real headless browser reads the status page).
# Present: nothing to do. Missing and running as root: Debian's `chromium` package is installed with apt-get (it
# stays installed, so a second run finds it). Missing and not root: fails, saying what to install.
# Progress on stderr; exit 0 only when `chromium` runs.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  cat >&2 <<'MSG'
e2e: `chromium` is not on PATH and this is not root, so it cannot be installed here.
     Install Debian's chromium package (sudo apt-get install -y chromium), or put a Chromium named `chromium` on
     PATH, then run the tests again. (Without FERRY_REQUIRE_BED, tests/e2e_status_page.rs skips instead.)
MSG
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "e2e: \`chromium\` is not on PATH and there is no apt-get to install it: install a Chromium named \`chromium\`" >&2
  exit 1
fi
echo "e2e: installing chromium (Debian package, once)" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium; } >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "e2e: apt-get install chromium failed (output above)" >&2
  exit 1
fi
if ! chromium --version >&2; then
  echo "e2e: chromium was installed but does not run" >&2
  exit 1
fi
