#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and record the sample CNN workload into ./log (TensorBoard layout).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f build-release/build.ninja ] || meson setup build-release --buildtype=release -Dtests=disabled
ninja -C build-release samples/cnn_train samples/record_minimal
build-release/samples/cnn_train --logdir log --run cnn --steps 12 "$@"
echo
echo "Traces are in ./log/cnn. Open them in Perfetto (ui.perfetto.dev) or chrome://tracing;"
echo "the kinetoscope viewer (kinetoscope --logdir log) arrives with the viewer issues."
