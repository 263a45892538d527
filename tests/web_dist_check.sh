#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# web/dist is the committed bundle the viewer embeds: rebuild it from web/src into a scratch
# folder and fail when the committed files differ (run `ninja -C BUILD web-dist` and commit).
# Usage: web_dist_check.sh NODE SOURCE_ROOT
set -euo pipefail
node=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$node" "$src/web/build.mjs" --out "$tmp"
if diff -r "$tmp" "$src/web/dist"; then
  echo "web/dist matches web/src ($(wc -l < "$tmp/MANIFEST") files)"
else
  echo "web/dist is stale: run 'ninja -C <build> web-dist' and commit web/dist" >&2
  exit 1
fi
