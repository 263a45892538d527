#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU check's bundle without a GPU: scripts/gpu-bundle.sh collects this build's programs
# with their libraries (no glibc, no driver; libcupti bundled), every program resolves its
# libraries from the bundle, and scripts/gpu-check.sh, run from the bundle on this machine,
# starts the programs and stops with status 3 and one sentence saying that there is no GPU.
# usage: test_gpu_bundle.sh SOURCE_ROOT BUILD_ROOT SANITIZE
# (SANITIZE: Meson's b_sanitize; sanitized debug programs are far over the bundle's 48 MiB, a
# size the release bundle keeps, so the limit is lifted for them)
set -uo pipefail
src=$1
build=$2
if [ "${3:-none}" != none ]; then export KINETOSCOPE_BUNDLE_MAX_MIB=1024; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

KINETOSCOPE_BUNDLE_BUILD=$build bash "$src/scripts/gpu-bundle.sh" --no-build "$tmp/bundle" > "$tmp/bundle.txt" 2>&1 ||
  fail "gpu-bundle.sh: $(cat "$tmp/bundle.txt")"
cat "$tmp/bundle.txt"
for p in kinetoscope cuda_sample cuda_stress cnn_train gpu_trace_check test_e2e_cuda; do
  [ -x "$tmp/bundle/bin/$p" ] && [ -x "$tmp/bundle/bin/.real/$p" ] || fail "bin/$p missing"
  missing=$(LD_LIBRARY_PATH="$tmp/bundle/lib" ldd "$tmp/bundle/bin/.real/$p" | grep 'not found')
  [ -z "$missing" ] || fail "$p: $missing"
done
[ -f "$tmp/bundle/lib/libcupti.so.13" ] || fail "libcupti.so.13 not bundled"
for lib in "$tmp"/bundle/lib/*; do
  case $(basename "$lib") in
    libc.so* | libm.so* | libpthread.so* | ld-linux* | libcuda.so* | libnvidia-*) fail "bundled $(basename "$lib")" ;;
  esac
done
[ -f "$tmp/bundle/scripts/gpu-check.sh" ] && [ -f "$tmp/bundle/scripts/gpu/torch_train.py" ] &&
  [ -f "$tmp/bundle/scripts/gpu/gpu_common.py" ] || fail "scripts missing"
"$tmp/bundle/bin/kinetoscope" --version | grep -q '^kinetoscope ' || fail "bundled kinetoscope does not start"

if [ -e /dev/nvidiactl ]; then
  echo "a GPU is present: the whole check is scripts/gpu-check.sh, by hand (about a minute)"
  echo "gpu bundle: ok"
  exit 0
fi
bash "$tmp/bundle/scripts/gpu-check.sh" "$tmp/out" > "$tmp/check.txt" 2>&1
rc=$?
cat "$tmp/check.txt"
[ "$rc" -eq 3 ] || fail "gpu-check.sh exited $rc without a GPU, not 3"
grep -q '^cuda_stress: no CUDA device (' "$tmp/check.txt" || fail "cuda_stress did not say why"
grep -q '^gpu-check: no NVIDIA GPU on this machine (no /dev/nvidiactl, no nvidia-smi)' "$tmp/check.txt" ||
  fail "no closing sentence"
[ -f "$tmp/out/gpu-check.log" ] || fail "no log in OUTDIR"
echo "gpu bundle: ok"
