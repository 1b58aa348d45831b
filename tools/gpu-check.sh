#!/usr/bin/env bash
# The GPU check, run from a bundle (tools/gpu-bundle.sh) on a GPU machine:
#
#   bash gpu-bundle/gpu-check.sh OUT_DIR [--budget SECONDS]
#
# In one command (under 8 minutes with the default budget of 450 s) it writes
# into OUT_DIR:
#   device.json         `tstat bench device`: the GPU, its clocks and driver, and
#                       its measured read and copy bandwidth
#   nvidia-smi.txt      what the driver says about the machine
#   tests/              every GPU test (gtest JSON and log), the conformance and
#                       CUDA-vs-CPU suites included
#   sanitizer/          the same tests on reduced sizes under compute-sanitizer
#                       memcheck, racecheck and synccheck
#   bench/stats.jsonl   `tstat bench stats --backend cuda`: f32, bf16, f16 from
#                       1 MiB to 1 GiB, and 10,000 x 1,000 f32 in one batch
#   bench/capture_cuda.json  `tstat bench capture --device cuda`: EndStep's
#                       host time for 1,000 CUDA tensors, and whether it waits
#                       for the device; capture_cuda_separate.json the same
#                       with every tensor its own allocation,
#                       capture_cuda_rules.json with the in-process rules
#   bench/caches.json   `tstat bench caches`: what another core's reads of a
#                       thread's fresh data cost it, with and without a flush
#   python-hook.log     the Python hook on the machine's PyTorch (CUDA tests, the
#                       overhead benchmark); its module built there first when
#                       that Python is not the bundle's
#   summary.json, summary.md  everything above in one place, with the targets
#                       of docs/gpu.md marked met or not
# Exit status: 0 when every test passed and no sanitizer reported an error;
# 1 otherwise; 3 when there is no usable CUDA device (nothing was measured).
# A step that would overrun the budget is skipped and says so in the summary.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-}"
[[ -n "$out" && "$out" != -* ]] || { sed -n '2,24p' "$0"; exit 2; }
shift
budget=450
while (($#)); do
  case "$1" in
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    *) echo "gpu-check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out/tests" "$out/sanitizer" "$out/bench" || exit 2
out="$(cd "$out" && pwd)"
tstat="$here/bin/tstat"
start=$SECONDS
: > "$out/steps.tsv"  # step, status, seconds, note: read by the summary

log() { echo "[gpu-check +$((SECONDS - start))s] $*" | tee -a "$out/gpu-check.log" >&2; }
left() { echo $((budget - (SECONDS - start))); }
# record STEP STATUS SECONDS NOTE
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$out/steps.tsv"; }

# run_step NAME NEED_SECONDS LIMIT_SECONDS OUTFILE COMMAND...: runs COMMAND with
# a time limit when at least NEED_SECONDS of the budget are left.
run_step() {
  local name="$1" need="$2" limit="$3" file="$4"
  shift 4
  if (($(left) < need)); then
    log "skip $name: $(left) s of the budget left, it needs $need"
    record "$name" skipped 0 "time budget"
    return 0
  fi
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" > "$file" 2> "$file.err" || rc=$?
  local status=ok
  ((rc == 0)) || status="failed ($rc)"
  ((rc == 124 || rc == 137)) && status="timed out ($limit s)"
  record "$name" "$status" $((SECONDS - t0)) ""
  log "$name: $status in $((SECONDS - t0)) s"
  return 0
}

log "bundle: $(head -1 "$here/MANIFEST" 2>/dev/null)"
{
  echo "== host"; uname -a; (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
  ldd --version 2>&1 | head -1; nproc
  echo "== bundle"; cat "$here/MANIFEST" 2>/dev/null
  echo "== nvidia-smi"; nvidia-smi 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.memory,power.limit \
    --format=csv 2>&1
} > "$out/nvidia-smi.txt"

# 1. The device and its bandwidth (the reference of every other figure).
run_step device 20 120 "$out/device.json" "$tstat" bench device --json
if ! grep -q '"read_gbps"' "$out/device.json" 2>/dev/null; then
  log "no usable CUDA device: $(cat "$out/device.json.err" 2>/dev/null)"
  python3 "$here/gpu_check_summary.py" "$out" "$here" >/dev/null 2>&1 || true
  exit 3
fi

# 2. Every CUDA test at full size, unit by unit (units.txt: name, filter).
tests="$here/bin/tests/tstat_test_cuda_all"
while read -r unit filter _; do
  [[ -z "$unit" || "$unit" == \#* ]] && continue
  run_step "test $unit" 15 240 "$out/tests/$unit.log" \
    "$tests" "--gtest_filter=$filter" "--gtest_output=json:$out/tests/$unit.json"
done < "$here/units.txt"

# 3. Stat-set throughput against the in-run read kernel.
: > "$out/bench/stats.jsonl"
for dtype in f32 bf16 f16; do
  for mib in 1 16 256 1024; do
    run_step "stats $dtype ${mib}MiB" 25 120 "$out/bench/stats-$dtype-$mib.json" \
      "$tstat" bench stats --backend cuda --dtype "$dtype" --size-mib "$mib" --repeats 10 --json
    cat "$out/bench/stats-$dtype-$mib.json" >> "$out/bench/stats.jsonl" 2>/dev/null
  done
done
# 10,000 tensors of 1,000 f32 in one batch: 40,000,000 bytes.
run_step "stats f32 10000x1000" 20 120 "$out/bench/stats-f32-10000x1000.json" \
  "$tstat" bench stats --backend cuda --dtype f32 --size-mib 38.14697265625 --tensors 10000 \
  --repeats 10 --json
cat "$out/bench/stats-f32-10000x1000.json" >> "$out/bench/stats.jsonl" 2>/dev/null

# 4. Capture of 1,000 CUDA tensors: EndStep's host time; does it wait?
run_step "capture cuda 1000x1000" 30 180 "$out/bench/capture_cuda.json" \
  "$tstat" bench capture --device cuda --tensors 1000 --elements 1000 --steps 200 --json
# The same with every tensor its own allocation: the memory check's worst case.
run_step "capture cuda 1000x1000 separate" 30 180 "$out/bench/capture_cuda_separate.json" \
  "$tstat" bench capture --device cuda --tensors 1000 --elements 1000 --steps 200 \
  --separate-allocations --json
# The same with the in-process rules (the default set, and what it needs
# captured: a device copy of every weight at every step for its delta).
run_step "capture cuda 1000x1000 rules" 30 180 "$out/bench/capture_cuda_rules.json" \
  "$tstat" bench capture --device cuda --tensors 1000 --elements 1000 --steps 200 \
  --in-process-rules --json
# The host's cores: what the capture thread's reads of fresh layer outputs
# cost the training thread there, with and without its flush
# (pipeline.early_capture_evict; on a 2-vCPU VM the flush has won on some
# days and lost on others).
run_step "caches" 15 60 "$out/bench/caches.json" "$tstat" bench caches --json

# 5. The Python hook on the device's own PyTorch, its module built there first
# when that Python is not the bundle's (exit 3: no module could be had, or
# torch has no CUDA; the log says why). Before the sanitizers: its figures
# are figures, and it has never run on a device.
if [[ -d "$here/python" ]]; then
  run_step "python hook" 30 240 "$out/python-hook.log" \
    env PYTHONPATH="$here/python" python3 "$here/python/gpu_hook_check.py"
else
  record "python hook" skipped 0 "the bundle carries no Python package"
fi

# 6. Sanitizers on reduced sizes (TSTAT_TEST_QUICK), after the figures: what
# the budget cannot fit is skipped here, never a measurement. The bad-input
# tests make failing CUDA calls on purpose, so API errors are not reported.
if command -v compute-sanitizer >/dev/null; then
  sanitize() {  # TOOL NAME FILTER [LIMIT_SECONDS]
    run_step "$1 $2" 45 "${4:-90}" "$out/sanitizer/$1-$2.log" env TSTAT_TEST_QUICK=1 \
      compute-sanitizer --tool "$1" --error-exitcode 86 --report-api-errors no \
      --print-limit 50 "$tests" "--gtest_filter=$3"
  }
  sanitize memcheck vs_cpu 'Gpu/BackendVsCpu*'
  sanitize memcheck batch 'GpuBatchTest.*'
  sanitize memcheck bad_input 'GpuBadInputTest.*-*OutOfDeviceMemory*'
  sanitize memcheck aux 'Gpu/AuxReductionTest.*:GpuAuxTest.*'
  # 81 s, then 90+ s on an H200: the longest sanitizer run.
  sanitize memcheck conformance 'Gpu/BackendConformanceTest.*' 180
  sanitize racecheck vs_cpu 'Gpu/BackendVsCpuTest.*/Cuda_f32:Gpu/BackendVsCpuLabels*'
  sanitize racecheck batch 'GpuBatchTest.*Misaligned*:GpuBatchTest.*EveryFeature*'
  sanitize synccheck vs_cpu 'Gpu/BackendVsCpuTest.*/Cuda_f32:Gpu/BackendVsCpuTest.*/Cuda_bf16:Gpu/BackendVsCpuLabels*'
  sanitize synccheck batch 'GpuBatchTest.*'
else
  record sanitizer skipped 0 "compute-sanitizer is not on PATH"
  log "compute-sanitizer is not on PATH: no sanitizer runs"
fi

python3 "$here/gpu_check_summary.py" "$out" "$here" || {
  log "the summary could not be written"
  exit 1
}
log "done in $((SECONDS - start)) s: $out/summary.md"
grep -q '"all_passed": true' "$out/summary.json" && exit 0
exit 1
