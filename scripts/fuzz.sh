#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libFuzzer campaigns on the viewer's parsers (tests/fuzz/). Builds build-fuzz (clang++,
# -Dfuzzing=true, ASan+UBSan) on first use, then:
#   scripts/fuzz.sh TARGET MINUTES    run one target that long; the corpus grows in
#                                     build-fuzz/corpus/TARGET (seeded from tests/fuzz/corpus),
#                                     findings go to build-fuzz/findings/TARGET/
#   scripts/fuzz.sh --smoke [RUNS]    every target for RUNS inputs (default 2000) from its seed
#                                     corpus; used by scripts/test.sh
#   KINETOSCOPE_FUZZ_JOBS=N           a campaign on N processes (libFuzzer's -fork=N): N times
#                                     the CPU time in the same wall time
# TARGET: loader, url, api, tfevents, profile_config, index. Add each finding to tests/fuzz/corpus/TARGET/
# once fixed, so the smoke run keeps checking it.
# The loader also starts from seeds sampled at run time from the real third-party traces
# ($KINETOSCOPE_REAL_TRACES/traces, default ../shared/traces) into build-fuzz/shared-seeds/
# (scripts/sample-trace-seeds.py): a few hundred events of each trace, every category and phase
# kept. Nothing derived from third-party traces is committed; without the folder the campaign
# runs from the committed seeds alone and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(loader url api tfevents profile_config index)

build() {
  if ! command -v clang++ >/dev/null; then
    echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2
    return 1
  fi
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang CXX=clang++ meson setup build-fuzz -Dfuzzing=true -Dtests=disabled -Dcupti=disabled \
      --buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  fi
  ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >/dev/null
}

# extra_corpora TARGET: the run-time seed folders of TARGET (printed one a line).
extra_corpora() {
  [ "$1" = loader ] || return 0
  local real=${KINETOSCOPE_REAL_TRACES:-../shared}/traces
  if [ ! -d "$real" ]; then
    echo "fuzz.sh: no $real: the loader runs from the committed seeds alone" >&2
    return 0
  fi
  if [ ! -d build-fuzz/shared-seeds/loader ]; then
    python3 scripts/sample-trace-seeds.py "$real" build-fuzz/shared-seeds/loader >&2
  fi
  echo build-fuzz/shared-seeds/loader
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ "${1:-}" = "--smoke" ]; then
  runs=${2:-2000}
  build
  status=0
  for t in "${targets[@]}"; do
    dict=()
    [ "$t" = loader ] || [ "$t" = profile_config ] && dict=(-dict=tests/fuzz/json.dict)
    # libFuzzer writes new inputs into its first corpus folder: a scratch one, never the seeds.
    rm -rf build-fuzz/smoke/"$t"
    mkdir -p build-fuzz/smoke/"$t"
    mapfile -t extra < <(extra_corpora "$t")
    if build-fuzz/tests/fuzz/fuzz_"$t" "${dict[@]}" -runs="$runs" -seed=1 -max_len=65536 \
         build-fuzz/smoke/"$t" tests/fuzz/corpus/"$t" "${extra[@]}" >build-fuzz/smoke_"$t".log 2>&1; then
      echo "fuzz smoke $t: ok ($runs runs)"
    else
      echo "fuzz smoke $t: FAILED (build-fuzz/smoke_$t.log)"
      tail -n 30 build-fuzz/smoke_"$t".log
      status=1
    fi
  done
  exit "$status"
fi

if [ $# -ne 2 ]; then
  sed -n '3,18p' "$0"
  exit 2
fi
target=$1
minutes=$2
case " ${targets[*]} " in *" $target "*) ;; *) echo "fuzz.sh: unknown target '$target'" >&2; exit 2 ;; esac
build
mkdir -p build-fuzz/corpus/"$target" build-fuzz/findings/"$target"
dict=()
[ "$target" = loader ] || [ "$target" = profile_config ] && dict=(-dict=tests/fuzz/json.dict)
mapfile -t extra < <(extra_corpora "$target")
jobs=()
[ "${KINETOSCOPE_FUZZ_JOBS:-1}" -gt 1 ] && jobs=(-fork="$KINETOSCOPE_FUZZ_JOBS")
exec build-fuzz/tests/fuzz/fuzz_"$target" "${dict[@]}" "${jobs[@]}" -max_total_time=$((minutes * 60)) -max_len=65536 \
  -artifact_prefix=build-fuzz/findings/"$target"/ -print_final_stats=1 \
  build-fuzz/corpus/"$target" tests/fuzz/corpus/"$target" "${extra[@]}"
