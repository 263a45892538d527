#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what kinetoscope builds with, when missing (run as root on Debian 12):
# the Debian packages, then the web app's npm packages (npm ci in web/, exact lock).
#   install-deps.sh            build dependencies
#   install-deps.sh --browser  also Debian's chromium, for the headless browser test
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(meson ninja-build g++ pkg-config zlib1g-dev nlohmann-json3-dev doctest-dev libsimdjson-dev
          protobuf-compiler libprotobuf-dev libboost1.81-dev libunwind-dev libdw-dev
          clang libclang-rt-14-dev)  # clang + its libFuzzer runtime: the fuzz targets (tests/fuzz)
if [ "${1:-}" = "--browser" ]; then packages+=(chromium); fi
command -v node > /dev/null || packages+=(nodejs)
command -v npm > /dev/null || packages+=(npm)
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
# The web app's bundler and chart library, exactly as package-lock.json pins them.
stamp=web/node_modules/.kinetoscope-lock
if ! cmp -s web/package-lock.json "$stamp" 2>/dev/null; then
  npm ci --prefix web --no-audit --no-fund --loglevel=error
  cp web/package-lock.json "$stamp"
fi
