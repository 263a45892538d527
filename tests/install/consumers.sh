#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Programs outside this build use an installed kinetoscope, three ways: pkg-config (shared and
# static libraries), CMake find_package (shared and static), and Meson with kinetoscope as a
# subproject built with only its recording layer. Each consumer (consumer.cpp) records a
# trace that `kinetoscope analyze` must read back with its operators.
# Usage: consumers.sh SOURCE_ROOT BUILD_ROOT KINETOSCOPE_BIN
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
bin=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CXX=${CXX:-c++}

passed=0
fail() { echo "FAIL: $*" >&2; echo "install checks: $passed passed, 1 failed"; exit 1; }
ok() { echo "ok: $1"; passed=$((passed + 1)); }

# The trace must load and show what consumer.cpp recorded (3 calls each).
check_trace() {  # label, trace
  local out
  out=$("$bin" analyze "$2") || fail "$1: kinetoscope analyze failed on $2"
  grep -Eq '^  aten::mm +3 ' <<<"$out" || fail "$1: no 'aten::mm  3' row in analyze's operators:"$'\n'"$out"
  grep -Eq '^  aten::relu +3 ' <<<"$out" || fail "$1: no 'aten::relu  3' row"
  ok "$1"
}

# Linked against the install's shared libraries (soname .0), or none of them when static.
check_libs() {  # label, exe, shared|static
  local deps
  deps=$(ldd "$2")
  if [ "$3" = shared ]; then
    grep -q "libkinetoscope_core.so.0 => $dest" <<<"$deps" || fail "$1: not linked to the installed libkinetoscope_core.so.0:"$'\n'"$deps"
    grep -q "libkinetoscope_writer.so.0 => $dest" <<<"$deps" || fail "$1: not linked to the installed libkinetoscope_writer.so.0"
  elif grep -q libkinetoscope <<<"$deps"; then
    fail "$1: static build needs a shared kinetoscope library:"$'\n'"$deps"
  fi
}

# 1. Install this build into a DESTDIR.
dest=$tmp/dest
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
pc=$(find "$dest" -name kinetoscope.pc -print -quit)
[ -n "$pc" ] || fail "meson install wrote no kinetoscope.pc"
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
prefix_rel=$(sed -n 's/^prefix=//p' "$pc")
for f in include/kinetoscope/kinetoscope.hpp include/kinetoscope/detail/recorder.hpp \
         include/kinetoscope/writer/chrome_trace.hpp include/kinetoscope/tensorboard/scalars.hpp \
         include/kinetoscope/tensorboard/tfevents.hpp; do
  [ -f "$dest$prefix_rel/$f" ] || fail "not installed: $prefix_rel/$f"
done
for f in libkinetoscope_core.a libkinetoscope_writer.a libkinetoscope_tensorboard.a \
         libkinetoscope_core.so.0 libkinetoscope_writer.so.0 libkinetoscope_tensorboard.so.0 \
         pkgconfig/kinetoscope-tensorboard.pc cmake/kinetoscope/kinetoscopeConfig.cmake \
         cmake/kinetoscope/kinetoscopeConfigVersion.cmake; do
  [ -e "$libdir/$f" ] || fail "not installed: $libdir/$f"
done
[ -x "$dest$prefix_rel/bin/kinetoscope" ] || fail "not installed: $prefix_rel/bin/kinetoscope"
ok "meson install --destdir"

# 2. pkg-config: the sysroot variable points its -I and -L into the DESTDIR.
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
# shellcheck disable=SC2046
"$CXX" -o "$tmp/pc_shared" "$src/tests/install/consumer.cpp" $(pkg-config --cflags --libs kinetoscope) \
  -Wl,-rpath,"$libdir"
"$tmp/pc_shared" "$tmp/pc_shared.pt.trace.json" >/dev/null
check_libs "pkg-config (shared)" "$tmp/pc_shared" shared
check_trace "pkg-config (shared)" "$tmp/pc_shared.pt.trace.json"
# Static: kinetoscope's archives, then what `pkg-config --static` lists for them.
others=$(pkg-config --static --libs kinetoscope | tr ' ' '\n' | grep -v '^-lkinetoscope_' | tr '\n' ' ')
# shellcheck disable=SC2046,SC2086
"$CXX" -o "$tmp/pc_static" "$src/tests/install/consumer.cpp" $(pkg-config --cflags kinetoscope) \
  -Wl,-Bstatic -lkinetoscope_writer -lkinetoscope_core -Wl,-Bdynamic $others
"$tmp/pc_static" "$tmp/pc_static.pt.trace.json" >/dev/null
check_libs "pkg-config --static" "$tmp/pc_static" static
check_trace "pkg-config --static" "$tmp/pc_static.pt.trace.json"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# 3. CMake find_package(kinetoscope 0.1 CONFIG REQUIRED), shared then static libraries.
for kind in shared static; do
  static=OFF
  [ "$kind" = static ] && static=ON
  cmake -S "$src/tests/install/cmake" -B "$tmp/cmake_$kind" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_PREFIX_PATH="$dest$prefix_rel" -DKINETOSCOPE_CONSUMER_SRC="$src/tests/install/consumer.cpp" \
    -Dkinetoscope_USE_STATIC_LIBS=$static >"$tmp/cmake_$kind.log" 2>&1 || { cat "$tmp/cmake_$kind.log"; fail "cmake ($kind) configure"; }
  cmake --build "$tmp/cmake_$kind" >>"$tmp/cmake_$kind.log" 2>&1 || { cat "$tmp/cmake_$kind.log"; fail "cmake ($kind) build"; }
  "$tmp/cmake_$kind/consumer" "$tmp/cmake_$kind.pt.trace.json" >/dev/null
  check_libs "CMake ($kind)" "$tmp/cmake_$kind/consumer" $kind
  check_trace "CMake ($kind)" "$tmp/cmake_$kind.pt.trace.json"
done

# 4. Meson subproject with only the recording layer (-Dviewer, -Dtensorboard, -Dcupti and
#    -Dtests disabled): it must configure without looking up Boost, simdjson, protobuf or node.
msub=$tmp/msub
mkdir -p "$msub/subprojects"
cp "$src/tests/install/meson/meson.build" "$src/tests/install/consumer.cpp" "$msub/"
ln -s "$src" "$msub/subprojects/kinetoscope"
CXX=$CXX meson setup "$msub/build" "$msub" >"$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log"; fail "meson setup (subproject)"; }
# ("Dependency boost skipped: feature viewer disabled" is Meson saying it did not look.)
if grep -Ei "dependency (boost|simdjson|protobuf|doctest)|program (node|protoc)" "$msub/build/meson-logs/meson-log.txt" \
   | grep -v "skipped: feature"; then
  fail "the recording-only subproject looked up a dependency of another layer (above)"
fi
ninja -C "$msub/build" >>"$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log"; fail "meson subproject build"; }
"$msub/build/consumer" "$tmp/msub.pt.trace.json" >/dev/null
check_libs "Meson subproject" "$msub/build/consumer" static
check_trace "Meson subproject" "$tmp/msub.pt.trace.json"
echo "install checks: $passed passed, 0 failed"
