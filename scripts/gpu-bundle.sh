#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the GPU check's programs here (release) and collects them, with every shared library
# they need except glibc's and the NVIDIA driver's, into one folder that is copied as it is to a
# GPU machine which has none of our Debian packages; scripts/gpu-check.sh then runs from it.
#
#   scripts/gpu-bundle.sh [--no-build] [OUTDIR]   (default .gpu-bundle, ignored by git)
#   KINETOSCOPE_BUNDLE_BUILD=DIR      build folder to use (default build-gpu)
#   --no-build                        collect what DIR holds (the test suite bundles its build)
#   KINETOSCOPE_BUNDLE_MAX_MIB=N      size limit (default 48: a device call carries 64 MiB)
#
# Layout: bin/<program> (a wrapper that sets LD_LIBRARY_PATH=lib), bin/.real/<program>, lib/,
# scripts/gpu-check.sh, scripts/gpu/*.py. libcupti.so.13 is bundled too: the CUPTI backend
# dlopens it, so ldd does not list it. libcuda.so.1 is never bundled (it must be the driver's).
set -euo pipefail
cd "$(dirname "$0")/.."
build_it=1
if [ "${1:-}" = --no-build ]; then build_it=0; shift; fi
out=${1:-.gpu-bundle}
build=${KINETOSCOPE_BUNDLE_BUILD:-build-gpu}
programs=(viewer/kinetoscope samples/cuda_sample samples/cuda_stress samples/cnn_train
          tests/gpu_trace_check tests/test_e2e_cuda)

if [ "$build_it" = 1 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release -Dtests=enabled -Dcupti=enabled
  fi
  ninja -C "$build" "${programs[@]}"
fi

rm -rf "$out"
mkdir -p "$out/bin/.real" "$out/lib" "$out/scripts/gpu"
# glibc (the GPU machine has its own, newer one) and the driver stay out of the bundle.
system_lib='^(linux-vdso|ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libcuda|libnvidia-[^/]*)\.so'
for p in "${programs[@]}"; do
  name=$(basename "$p")
  cp "$build/$p" "$out/bin/.real/$name"
  strip --strip-unneeded "$out/bin/.real/$name"
  cat > "$out/bin/$name" <<WRAP
#!/usr/bin/env bash
here=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
LD_LIBRARY_PATH="\$here/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/.real/$name" "\$@"
WRAP
  chmod +x "$out/bin/$name"
  ldd "$build/$p" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    if ! basename "$lib" | grep -Eq "$system_lib"; then cp -L "$lib" "$out/lib/"; fi
  done
done
cupti=$(sed -n 's/^.*KINETOSCOPE_CUPTI_LIBDIR="\([^"]*\)".*$/\1/p' "$build/build.ninja" | head -n 1)
cupti=${cupti:-/usr/local/cuda/lib64}
cp -L "$cupti/libcupti.so.13" "$out/lib/"
cp scripts/gpu-check.sh "$out/scripts/"
cp scripts/gpu/*.py "$out/scripts/gpu/"
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true
size=$(du -sb "$out" | cut -f1)
echo "gpu bundle: $out, $((size / 1024 / 1024)) MiB ($(ls "$out/lib" | wc -l) libraries: $(ls "$out/lib" | tr '\n' ' '))"
max_mib=${KINETOSCOPE_BUNDLE_MAX_MIB:-48}
if [ "$size" -gt $((max_mib * 1024 * 1024)) ]; then
  echo "gpu bundle: larger than $max_mib MiB (a device call carries 64 MiB in all)" >&2
  exit 1
fi
