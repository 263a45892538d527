#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up, build and run every test: a -Werror build, then the same tests under ASan+UBSan.
# Ends with one line "N passed, N failed": doctest test cases over both builds, the checks of
# the headless-browser test (web/tests/browser.mjs) and of the install consumers
# (tests/install/consumers.sh), both -Werror build only, and the fuzz targets' corpus replays
# (tests/fuzz/replay_main.cpp, both builds; libFuzzer campaigns are scripts/fuzz.sh's).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests || exit 1

status=0
run_suite() {  # build-dir, extra meson test options, meson setup options...
  local dir=$1 test_opts=$2; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --werror "$@" || return 1
  fi
  ninja -C "$dir" || return 1
  meson test -C "$dir" --no-suite bench $test_opts --print-errorlogs --num-processes 2 || return 1
}

run_suite build-test "" --buildtype=debugoptimized || status=1
# The browser and install suites are registered only when node and cmake are there, which
# install-deps.sh --tests made sure of: their absence from the log is a failure, not a skip.
for what in browser install; do
  if ! grep -q "^$what checks: " build-test/meson-logs/testlog.txt 2>/dev/null; then
    echo "$what checks did not run"
    status=1
  fi
done
# Sanitizers: detect_leaks stays on; UBSan findings abort the test.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# (No benchmarks there: they are never run under sanitizers, and compiling them costs minutes.
# -O0: at -O1 GCC 12 compiles the sanitized tests 3.5 times slower (test_api.cpp: 165 s against
# 47 s), more than the faster suites win back, and warns falsely inside <regex>.)
run_suite build-asan "--no-suite browser" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbenchmarks=disabled || status=1

for dir in build-test build-asan; do
  if [ "$(grep -c '^fuzz replay: [0-9]* inputs ok$' "$dir/meson-logs/testlog.txt" 2>/dev/null)" -lt 6 ]; then
    echo "fuzz replays did not all run in $dir"
    status=1
  fi
done

passed=0
failed=0
for log in build-test/meson-logs/testlog.txt build-asan/meson-logs/testlog.txt; do
  [ -f "$log" ] || continue
  while read -r p f; do
    passed=$((passed + p)); failed=$((failed + f))
  done < <(sed -n -e 's/^\[doctest\] test cases: *[0-9]* *| *\([0-9]*\) passed *| *\([0-9]*\) failed.*/\1 \2/p' \
                  -e 's/^\(browser\|install\) checks: \([0-9]*\) passed, \([0-9]*\) failed$/\2 \3/p' \
                  -e 's/^fuzz replay: [0-9]* inputs ok$/1 0/p' "$log")
done
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build or runner failure counts
echo "${passed} passed, ${failed} failed"
exit "$status"
