#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, record the sample CNN workload into ./log (TensorBoard layout) and
# serve it with the kinetoscope viewer. Arguments go to the viewer, e.g. --port 0 or --bind_all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f build-release/build.ninja ] || meson setup build-release --buildtype=release -Dtests=disabled
ninja -C build-release samples/cnn_train samples/record_minimal viewer/kinetoscope
build-release/samples/cnn_train --logdir log --run cnn --steps 12
echo
# What torch-tb-profiler's Overview would have shown for the last window, and the step scalars.
build-release/viewer/kinetoscope analyze log/cnn --span 2 --view overview
build-release/viewer/kinetoscope scalars log
echo
echo "Serving ./log: open the URL below (Ctrl+C stops the viewer)."
exec build-release/viewer/kinetoscope --logdir log "$@"
