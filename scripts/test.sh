#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up, build and run every test: a -Werror build, then the same tests under ASan+UBSan.
# Ends with one line "N passed, N failed": doctest test cases over both builds, the checks of
# the headless-browser test (web/tests/browser.mjs) and of the install consumers
# (tests/install/consumers.sh), both -Werror build only, and the fuzz targets' corpus replays
# (tests/fuzz/replay_main.cpp, both builds; libFuzzer campaigns are scripts/fuzz.sh's).
# Before that line: each suite's time per build and the tests that took more than a third of
# their timeout (scripts/test-times.py); the run fails if it changed ~/.cache/kinetoscope.
# The golden tests read the real traces in ../shared beside the checkout (meson.build).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests || exit 1

status=0
# The user's own index cache must come out of the run as it went in (tests/meson.build gives
# every test its own HOME and XDG_CACHE_HOME).
user_cache=${XDG_CACHE_HOME:-${HOME:-}/.cache}/kinetoscope
cache_listing() { find "$user_cache" -printf '%p %s %T@\n' 2>/dev/null | sort; }
cache_before=$(cache_listing)
run_suite() {  # build-dir, extra meson test options, meson setup options...
  local dir=$1 test_opts=$2; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --werror "$@" || return 1
  fi
  ninja -C "$dir" || return 1
  meson test -C "$dir" --no-suite bench $test_opts --print-errorlogs --num-processes 2 || return 1
}

# -Dcupti=enabled -Dgpu_samples=enabled: the CUPTI backend and samples/cuda are built and
# tested here; a missing CUDA prefix (.venv/cuda, install-deps.sh) fails the setup.
run_suite build-test "" --buildtype=debugoptimized -Dcupti=enabled -Dgpu_samples=enabled -Dpython=enabled || status=1
# The browser, install, golden, tensorboard_plugin, python, pytorch, hta and wheel suites are
# registered only when node, cmake, the venv's torch-tb-profiler, TensorBoard and nanobind, and
# the peers' venvs (.venv-torch, .venv-hta) are there, which install-deps.sh --tests made sure
# of: their absence from the log is a failure, not a skip.
# (-Dpython=enabled: the engine module, built and tested here only; loading an ASan-built
# module into a Python that is not would need the sanitizer runtime preloaded.)
for what in browser install golden distributed tensorboard python pytorch hta wheel; do
  if ! grep -q "^$what checks: " build-test/meson-logs/testlog.txt 2>/dev/null; then
    echo "$what checks did not run"
    status=1
  fi
done
# Sanitizers: detect_leaks stays on; UBSan findings abort the test. (pytorch_peer is left out
# there: it runs analyze on one small CPU trace, which the plain build checks; the wheel and
# browser suites need a release program or a browser, not sanitizers.)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# (No benchmarks there: they are never run under sanitizers, and compiling them costs minutes.
# -O0: at -O1 GCC 12 compiles the sanitized tests 3.5 times slower (test_api.cpp: 165 s against
# 47 s), more than the faster suites win back, and warns falsely inside <regex>.)
run_suite build-asan "--no-suite browser --no-suite wheel --no-suite pytorch" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbenchmarks=disabled || status=1

for dir in build-test build-asan; do
  if [ "$(grep -c '^fuzz replay: [0-9]* inputs ok$' "$dir/meson-logs/testlog.txt" 2>/dev/null)" -lt 6 ]; then
    echo "fuzz replays did not all run in $dir"
    status=1
  fi
done

if [ "$(cache_listing)" != "$cache_before" ]; then
  echo "the run changed $user_cache: a test wrote to the user's index cache"
  status=1
fi
for dir in build-test build-asan; do
  [ -f "$dir/meson-logs/testlog.json" ] && python3 scripts/test-times.py "$dir"
done
echo "test.sh: $((SECONDS / 60)) min $((SECONDS % 60)) s in all"

passed=0
failed=0
for log in build-test/meson-logs/testlog.txt build-asan/meson-logs/testlog.txt; do
  [ -f "$log" ] || continue
  while read -r p f; do
    passed=$((passed + p)); failed=$((failed + f))
  done < <(sed -n -e 's/^\[doctest\] test cases: *[0-9]* *| *\([0-9]*\) passed *| *\([0-9]*\) failed.*/\1 \2/p' \
                  -e 's/^\(browser\|install\|golden\|distributed\|tensorboard\|python\|pytorch\|hta\|wheel\) checks: \([0-9]*\) passed, \([0-9]*\) failed$/\2 \3/p' \
                  -e 's/^fuzz replay: [0-9]* inputs ok$/1 0/p' "$log")
done
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build or runner failure counts
echo "${passed} passed, ${failed} failed"
exit "$status"
