#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU check, run on a machine with an NVIDIA GPU from the folder scripts/gpu-bundle.sh made
# (this script is inside it as scripts/gpu-check.sh):
#   a. CUPTI: cuda_sample and cuda_stress traces against their ground truth (gpu_trace_check),
#      the e2e test of cuda_sample, `kinetoscope analyze` on them, overhead and per-launch cost;
#   b. real PyTorch: a ResNet-18 AMP training loop with a DataLoader under torch.profiler with
#      every option, a 2-process gloo DDP pair, a CUDA memory snapshot; `kinetoscope analyze
#      --json` and the server on every trace; torch.profiler's own per-op overhead;
#   c. real TensorBoard: its EventAccumulator and its server read cnn_train's event file;
#   d. modern PyTorch (scripts/gpu/torch_modern.py): a decoder under bf16 autocast with
#      FlashAttention and an FP8 GEMM, the same under torch.compile, NCCL collectives on every
#      rank, allocator snapshots of training and of an OOM; `kinetoscope analyze` on each trace.
# Prints one "PASS|FAIL <check>: <numbers>" line per check and a closing "gpu-check: N passed,
# M failed"; copies the traces, the snapshot and the log to OUTDIR (at most 8 files, each well
# under 16 MiB). Usage: gpu-check.sh OUTDIR
set -uo pipefail
shopt -s lastpipe  # count_lines at the end of a pipeline updates the totals of this shell
out=${1:?usage: gpu-check.sh OUTDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$here/bin
py=$here/scripts/gpu
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
export PYTHONUNBUFFERED=1
passed=0
failed=0
result() {  # PASS|FAIL check detail
  echo "$1 $2: $3"
  if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
# Checker output lines are "PASS|FAIL name: detail"; count them into the totals.
count_lines() {
  while IFS= read -r l; do
    echo "$l"
    case "$l" in PASS\ *) passed=$((passed + 1)) ;; FAIL\ *) failed=$((failed + 1)) ;; esac
  done
}
# checked NAME SECONDS CMD...: runs a program that prints PASS/FAIL lines, under a time limit.
checked() {
  local name=$1 file=$work/$1.txt rc=0
  run "$@" > "$file" 2>&1 || rc=$?
  count_lines < "$file"
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$file"; then result FAIL "$name" "exit $rc: $(tail -n 2 "$file" | tr '\n' ' ')"; fi
}
# prefixed LABEL CMD...: runs a program that prints PASS/FAIL lines, inserting LABEL after the
# verdict; a program that fails without a FAIL line counts as one.
prefixed() {
  local label=$1 file=$work/prefixed.txt rc=0; shift
  "$@" > "$file" 2>&1 || rc=$?
  sed "s#^\(PASS\|FAIL\) #\1 $label${label:+ }#" "$file" | count_lines
  if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$file"; then result FAIL "${label:-$1}" "exit $rc: $(tail -n 2 "$file" | tr '\n' ' ')"; fi
}
# run NAME SECONDS CMD...: runs CMD under a time limit; a limit hit is a hang. It counts
# nothing: every caller turns a non-zero status into one FAIL line.
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@"
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "HANG $name: no exit within ${limit}s" >&2; fi
  echo "[$name: exit $rc after $((SECONDS - t0))s]" >&2
  return "$rc"
}

main() {
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, torch.cuda.get_device_name(0))' \
  2>/dev/null || echo "python3: no torch with a GPU"

if [ ! -e /dev/nvidiactl ] && ! command -v nvidia-smi > /dev/null; then
  # Everything up to the GPU: the bundle's programs start on this machine and say why not.
  "$bin/kinetoscope" --version
  "$bin/cuda_stress" "$work/none"
  echo "gpu-check: no NVIDIA GPU on this machine (no /dev/nvidiactl, no nvidia-smi): the bundle's programs run" \
       "(above) but nothing GPU-side can be checked here"
  rm -rf "$work"
  return 3
fi

echo "== a. CUPTI"
if run cuda_sample 120 "$bin/cuda_sample" "$work/kineto/cuda_sample" > "$work/cuda_sample.txt" 2>&1; then
  result PASS "cuda_sample runs" "$(grep -c '^step ' "$work/cuda_sample.txt") steps, exit 0"
  prefixed cuda_sample "$bin/gpu_trace_check" "$work/kineto/cuda_sample"
else
  result FAIL "cuda_sample runs" "$(tail -n 3 "$work/cuda_sample.txt" | tr '\n' ' ')"
fi
if run e2e_cuda_sample 120 env KINETOSCOPE_CUDA_SAMPLE_BIN="$bin/cuda_sample" "$bin/test_e2e_cuda" > "$work/e2e.txt" 2>&1; then
  result PASS "e2e_cuda_sample test" "$(grep 'test cases' "$work/e2e.txt" | tr -s ' ')"
else
  result FAIL "e2e_cuda_sample test" "$(grep -E 'ERROR|test cases|CHECK' "$work/e2e.txt" | head -n 8 | tr '\n' ' ')"
fi

stress_run() {  # name dir args...
  local name=$1 dir=$2; shift 2
  if run "$name" 180 "$bin/cuda_stress" "$dir" "$@" > "$work/$name.txt" 2>&1; then
    head -n 1 "$work/$name.txt"
    prefixed "$name" "$bin/gpu_trace_check" "$dir"
  else
    result FAIL "$name runs" "$(tail -n 5 "$work/$name.txt" | tr '\n' ' ')"
  fi
}
stress_run cuda_stress "$work/kineto/cuda_stress"
stress_run cuda_stress_small "$work/kineto/cuda_stress_small" --launches 20
sed -n '2,40p' "$work/cuda_stress.txt"

# Overhead: the same workload with the profile off, then per-launch host cost.
if run cuda_stress_off 180 "$bin/cuda_stress" "$work/off" --no-profile > "$work/off.txt" 2>&1; then
  on_ms=$(sed -n 's/.* in 12 steps, \([0-9.]*\) ms wall.*/\1/p' "$work/cuda_stress.txt")
  off_ms=$(sed -n 's/.* in 12 steps, \([0-9.]*\) ms wall.*/\1/p' "$work/off.txt")
  writing=$(sed -n 's/.*, \([0-9]*\) ms of it writing traces.*/\1/p' "$work/cuda_stress.txt")
  echo "overhead: workload wall time profile off ${off_ms} ms, on ${on_ms} ms (of which ${writing} ms writing 3 traces)"
else
  result FAIL "cuda_stress --no-profile runs" "$(tail -n 3 "$work/off.txt" | tr '\n' ' ')"
fi
# Three times: the spread says how far one figure can be trusted.
for i in 1 2; do run launch_bench 120 "$bin/cuda_stress" --launch-bench 20000 2>&1 || result FAIL "launch cost run $i" "exit $?"; done
if run launch_bench 120 "$bin/cuda_stress" --launch-bench 20000 > "$work/launch.txt" 2>&1; then
  # Every launch of the two recorded passes must be in the window: "N of N kernels recorded".
  if grep -Eq '; ([0-9]+) of \1 kernels recorded' "$work/launch.txt"; then
    result PASS "launch cost" "$(cat "$work/launch.txt")"
  else
    result FAIL "launch cost" "kernels lost: $(cat "$work/launch.txt")"
  fi
else
  result FAIL "launch cost" "$(tail -n 3 "$work/launch.txt" | tr '\n' ' ')"
fi

# The A/B of tying GPU work to ops: CUPTI's external correlation (Kineto's way: no API
# callback, a push/pop per op) against kinetoscope's API callback, alternating, three each.
for i in 1 2 3; do
  for mode in callback external; do
    if run "launch_bench_$mode" 120 "$bin/cuda_stress" --launch-bench 20000 --correlation "$mode" > "$work/ab.txt" 2>&1 &&
       grep -Eq '; ([0-9]+) of \1 kernels recorded' "$work/ab.txt"; then
      echo "A/B $i $mode: $(cat "$work/ab.txt")"
    else
      result FAIL "launch cost A/B $mode run $i" "$(tail -n 3 "$work/ab.txt" | tr '\n' ' ')"
    fi
  done
done

analyze_json() {  # trace json-file [analyze options]: analyze --json TRACE > JSON-FILE
  local trace=$1 json=$2; shift 2
  run analyze 300 "$bin/kinetoscope" analyze --json "$trace" "$@" > "$json" 2> "$json.err"
}
# analyze_trace LABEL EXPECT TRACE [TARGET OPTIONS...]: `kinetoscope analyze --json` with the
# plugin's rules (views checked, device attribution printed) and with --improved (attribution
# checked: the plugin drops cuda_driver launches, --improved must not). TARGET defaults to TRACE.
analyze_trace() {
  local label=$1 expect=$2 trace=$3; shift 3
  local target=("$@")
  [ ${#target[@]} -eq 0 ] && target=("$trace")
  local j=$work/analyze_$(basename "$trace").json ji=$work/analyze_$(basename "$trace").improved.json
  if analyze_json "${target[0]}" "$j" "${target[@]:1}"; then
    prefixed "" python3 "$py/analyze_check.py" "$j" --label "$label" --expect "$expect" --trace "$trace" --attribution info
  else
    result FAIL "$label analyze" "$(head -c 300 "$j.err")"
  fi
  if analyze_json "${target[0]}" "$ji" "${target[@]:1}" --improved; then
    prefixed "" python3 "$py/analyze_check.py" "$ji" --label "$label --improved" --expect attribution --trace "$trace"
  else
    result FAIL "$label analyze --improved" "$(head -c 300 "$ji.err")"
  fi
}
for t in "$work"/kineto/cuda_sample/*.pt.trace.json "$(ls "$work"/kineto/cuda_stress/*.pt.trace.json 2>/dev/null | head -n 1)"; do
  [ -f "$t" ] && analyze_trace "kinetoscope $(basename "$(dirname "$t")")" gpu "$t"
done

checked server_kinetoscope 120 python3 "$py/server_check.py" "$bin/kinetoscope" "$work/kineto"

echo "== b. PyTorch"
mkdir -p "$work/torch"
checked torch_train 300 python3 "$py/torch_train.py" "$work/torch/resnet18" --snapshot "$work/memory_snapshot.pickle" \
  --summary "$work/torch_overhead.json"
checked torch_dist 240 python3 "$py/torch_dist.py" "$work/torch/ddp_gloo"
for t in "$work"/torch/*/*.pt.trace.json.gz; do
  [ -f "$t" ] || continue
  label="torch $(basename "$(dirname "$t")")/$(basename "$t" | cut -d. -f1)"
  case "$t" in
    # A DDP rank is analysed through its run folder, so that the distributed view sees both.
    */ddp_gloo/*) analyze_trace "$label" gpu,memory,distributed "$t" "$(dirname "$t")" --worker "$(basename "$t" | cut -d. -f1)" ;;
    *) analyze_trace "$label" gpu,memory,modules "$t" ;;
  esac
done
checked server 120 python3 "$py/server_check.py" "$bin/kinetoscope" "$work/torch"

echo "== c. TensorBoard"
if run cnn_train 120 "$bin/cnn_train" --logdir "$work/tb" --run cnn --steps 6 > "$work/cnn.txt" 2>&1; then
  "$bin/kinetoscope" scalars --json "$work/tb" > "$work/scalars.json"
  checked tensorboard 180 python3 "$py/tb_check.py" "$work/tb" "$work/scalars.json" "$work/tensorboard_read.json"
else
  result FAIL "cnn_train runs" "$(tail -n 3 "$work/cnn.txt" | tr '\n' ' ')"
fi

echo "== d. modern PyTorch"
modern=$work/modern
for part in transformer compiled snapshot oom; do
  checked "modern_$part" 300 python3 "$py/torch_modern.py" "$modern" --part "$part"
done
# NCCL refuses two ranks on one GPU in some versions: then the job is one rank.
if ! run modern_nccl2 90 python3 "$py/torch_modern.py" "$modern" --part nccl2 > "$work/nccl2.txt" 2>&1; then
  echo "INFO nccl with 2 ranks on one GPU: $(grep -m1 -iE 'error|duplicate' "$work/nccl2.txt" | head -c 300)"
  rm -rf "$modern/nccl_2rank"
  checked modern_nccl1 120 python3 "$py/torch_modern.py" "$modern" --part nccl1
else
  count_lines < "$work/nccl2.txt"
fi
for t in "$modern"/*/*.pt.trace.json.gz; do
  [ -f "$t" ] || continue
  label="modern $(basename "$(dirname "$t")")/$(basename "$t" | cut -d. -f1)"
  case "$t" in
    */nccl_*) analyze_trace "$label" gpu,distributed "$t" "$(dirname "$t")" --worker "$(basename "$t" | cut -d. -f1)" ;;
    *) analyze_trace "$label" gpu,memory,modules "$t" ;;
  esac
done
for p in "$modern"/*.pickle; do [ -f "$p" ] && gzip -f "$p"; done

echo "== collecting into $out"
# Traces and snapshots apart: each file that comes back stays under 16 MiB.
(cd "$modern" && tar czf "$out/modern_traces.tar.gz" --exclude='*.pickle.gz' .) || true
(cd "$modern" && tar czf "$out/modern_snapshots.tar.gz" ./*.pickle.gz) || true
(cd "$work/torch" && tar czf "$out/torch_traces.tar.gz" .) || true
# cuda_stress's full traces (~12 000 kernels a window) stay here; its truth and the small run go.
(cd "$work/kineto" && tar czf "$out/kinetoscope_traces.tar.gz" cuda_sample cuda_stress_small cuda_stress/truth.json) || true
[ -f "$work/memory_snapshot.pickle" ] && gzip -c "$work/memory_snapshot.pickle" > "$out/memory_snapshot.pickle.gz"
(cd "$work" && tar czf "$out/analyze.tar.gz" analyze_*.json torch_overhead.json scalars.json tensorboard_read.json tb 2>/dev/null) || true
ls -la "$out"
echo "gpu-check: $passed passed, $failed failed"
rm -rf "$work"
[ "$failed" -eq 0 ]
}

main 2>&1 | tee "$out/gpu-check.log"
exit "${PIPESTATUS[0]}"
