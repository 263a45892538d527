#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what kinetoscope needs, when missing (run as root on Debian 12):
#   install-deps.sh          what the build needs: Debian packages only (the web app is built
#                            from the committed web/dist, so no node and no npm)
#   install-deps.sh --tests  also what the tests need: doctest, cmake (install consumers),
#                            chromium, node and the web app's npm
#                            packages (npm ci in web/, exact lock: rebuilding web/dist, browser test)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(meson ninja-build g++ pkg-config zlib1g-dev nlohmann-json3-dev libsimdjson-dev
          protobuf-compiler libprotobuf-dev libboost1.81-dev libunwind-dev libdw-dev)
tests=false
if [ "${1:-}" = "--tests" ]; then
  tests=true
  packages+=(doctest-dev cmake chromium)
  command -v node > /dev/null || packages+=(nodejs)
  command -v npm > /dev/null || packages+=(npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if $tests; then
  # The web app's bundler, chart library and browser driver, exactly as package-lock.json pins them.
  stamp=web/node_modules/.kinetoscope-lock
  if ! cmp -s web/package-lock.json "$stamp" 2>/dev/null; then
    npm ci --prefix web --no-audit --no-fund --loglevel=error
    cp web/package-lock.json "$stamp"
  fi
fi
