#!/usr/bin/env bash
# Installs Azurite (Microsoft's Azure Storage emulator) once from the npm registry into
# $HOME/.cache/ferry-testbed/azurite-<version>/ and prints the path of its `azurite-blob` executable.
# A second run finds the cached install and returns at once. Used by tests/support/azurite.rs.
set -euo pipefail
AZURITE_VERSION="${AZURITE_VERSION:-3.37.0}"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}/azurite-${AZURITE_VERSION}"
bin="$cache/node_modules/.bin/azurite-blob"
if [ ! -x "$bin" ]; then
  command -v node >/dev/null || { echo "build-azurite: Node.js is required (https://nodejs.org); none on PATH" >&2; exit 1; }
  command -v npm >/dev/null || { echo "build-azurite: npm is required (it comes with Node.js); none on PATH" >&2; exit 1; }
  mkdir -p "$(dirname "$cache")"
  echo "build-azurite: installing azurite@${AZURITE_VERSION} with npm (first run only, ~1 min)" >&2
  # Installed next to its final place and renamed into place when complete (npm's .bin links are relative), so an
  # interrupted install never leaves a half-made one that looks cached.
  tmp="$(mktemp -d "$cache.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  npm install --prefix "$tmp" "azurite@${AZURITE_VERSION}" --no-audit --no-fund --no-update-notifier >&2
  [ -x "$tmp/node_modules/.bin/azurite-blob" ] || { echo "build-azurite: npm installed no azurite-blob" >&2; exit 1; }
  rm -rf "$cache" && mv "$tmp" "$cache"
  trap - EXIT
fi
echo "$bin"
