#!/usr/bin/env bash
# ctest tstat.tools.gpu_bundle: the GPU bundle needs nothing from this machine.
#   gpu_bundle_test.sh BUILD_DIR
# 1. tools/gpu-bundle.sh packs the built binaries (--no-build) within its size
#    limits, every ELF file with an $ORIGIN run path, and the same folder as
#    a .tar.gz (what travels to a GPU machine); the Python module built from
#    the bundle's sources, as a GPU machine with another Python builds it,
#    captures a training step.
# 2. In a chroot that holds only the bundle and the C library (as a bare GPU
#    machine has it, minus the driver), the CLI runs a CPU benchmark, the CUDA
#    entry tests pass, the GPU tests report SKIPPED, and the GPU benchmarks
#    say there is no device. Needs root (chroot); SKIPPED (77) without.
# 3. gpu-check.sh without a device (a zero budget) exits 3 and still writes
#    its summary; the summary script marks targets from a synthetic run.
source "$(dirname "$0")/test_lib.sh"
build="$(cd "${1:?usage: gpu_bundle_test.sh BUILD_DIR}" && pwd)"
repo="$(cd "$(dirname "$0")/.." && pwd)"

bundle="$T/root/bundle"
mkdir -p "$T/root"
bash "$repo/tools/gpu-bundle.sh" --no-build --build-dir "$build" --out "$bundle" > "$T/pack.log" 2>&1 ||
  fail "gpu-bundle.sh failed: $(cat "$T/pack.log")"
for f in gpu-check.sh gpu_check_summary.py MANIFEST units.txt bin/tstat bin/tests/tstat_test_cuda_all \
         lib/libtstat.so.0; do
  [[ -e "$bundle/$f" ]] || fail "the bundle lacks $f"
done
grep -q "^gpu_vs_cpu " "$bundle/units.txt" || fail "units.txt lacks gpu_vs_cpu"
[[ -f "$bundle.tar.gz" ]] || fail "gpu-bundle.sh wrote no $bundle.tar.gz"
# It holds exactly the folder's files and links.
diff <(cd "$T/root" && find bundle \( -type f -o -type l \) | sort) \
     <(tar -tzf "$bundle.tar.gz" | grep -v '/$' | sort) > "$T/packed.diff" 2>&1 ||
  fail "the .tar.gz does not hold the bundle's files: $(head -20 "$T/packed.diff")"
for f in "$bundle"/bin/tstat "$bundle"/bin/tests/* "$bundle"/lib/*; do
  [[ -L "$f" ]] && continue
  rpath="$(patchelf --print-rpath "$f")" || fail "$f is not an ELF file"
  [[ "$rpath" == '$ORIGIN'* ]] || fail "$f has run path '$rpath', not \$ORIGIN-relative"
done
# No library of the build machine's toolchain or packages is left out.
[[ -e "$bundle/lib/libhdf5_serial.so.103" || -n "$(ls "$bundle"/lib/libhdf5*.so* 2>/dev/null)" ]] ||
  fail "HDF5 is not in the bundle"
ls "$bundle"/lib/libstdc++.so.* > /dev/null 2>&1 || fail "libstdc++ is not in the bundle"
if ls "$bundle"/lib/libcuda.so* > /dev/null 2>&1; then fail "the GPU driver was bundled"; fi

# A GPU machine whose Python is not this one builds the module from what the
# bundle carries. With the bundled module set aside, the bundle's Python step
# (gpu_hook_check.py) finds none for this Python, builds one beside the
# package as on the device ($ORIGIN/../../lib, the bundle's libtstat), and
# stops at the GPU (exit 3); that module captures steps that read back as
# torch computes them.
for f in python/gpu_build_module.py python/gpu_hook_check.py python/module-src/python/src/module.cc \
         python/module-src/python/src/bindings.h python/module-src/include/tstat/session.h; do
  [[ -e "$bundle/$f" ]] || fail "the bundle lacks $f"
done
mkdir -p "$T/bundled-module"
mv "$bundle"/python/tstat/_tstat*.so "$T/bundled-module/"
rc=0
/usr/bin/python3 "$bundle/python/gpu_hook_check.py" > "$T/hook-check.log" 2>&1 || rc=$?
[[ $rc == 3 ]] && grep -q "building one" "$T/hook-check.log" && grep -q "^built _tstat" "$T/hook-check.log" &&
  grep -q "no CUDA device" "$T/hook-check.log" ||
  fail "gpu_hook_check.py without a module for this Python (exit $rc): $(tail -30 "$T/hook-check.log")"
module="$(ls "$bundle"/python/tstat/_tstat*.so)"
[[ "$(patchelf --print-rpath "$module")" == '$ORIGIN/../../lib' ]] ||
  fail "the module built from the bundle has run path $(patchelf --print-rpath "$module")"
loaded="$(ldd "$module" | sed -n 's/^[[:space:]]*libtstat\.so\.0 => \([^ ]*\) .*/\1/p')"
[[ -n "$loaded" && "$(readlink -f "$loaded")" == "$(readlink -f "$bundle/lib/libtstat.so.0")" ]] ||
  fail "the module built from the bundle does not load the bundle's libtstat: $(ldd "$module")"
PYTHONPATH="$bundle/python" /usr/bin/python3 - "$T/module-run" > "$T/module-run.log" 2>&1 <<'EOF' ||
import sys
import warnings

import torch

import tstat.pytorch
from tstat import trials

warnings.simplefilter("ignore")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
hook = tstat.pytorch.Hook(out_dir=sys.argv[1], rules=False,
                          config={"save_config": {"save_interval": 1}})
hook.register_module(net)
x = torch.randn(4, 6)
for _ in range(2):
    net(x).square().mean().backward()
hook.close()
got = trials.create_trial(sys.argv[1]).tensor("0.Linear_output").stat(1, "max")
want = net[0](x).max().item()
assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (got, want)
EOF
  fail "the module built from the bundle: $(tail -30 "$T/module-run.log")"
rm "$module"
mv "$T"/bundled-module/_tstat*.so "$bundle/python/tstat/"
# What it lacks, it names (gpu_hook_check.py prints it and exits 3).
builder=(/usr/bin/python3 "$bundle/python/gpu_build_module.py" --src "$bundle/python/module-src"
         --out "$T/no-module")
if "${builder[@]}" --lib "$T/no-libtstat.so" 2> "$T/nolib.err"; then fail "built without a libtstat"; fi
grep -q "no-libtstat.so is not a file" "$T/nolib.err" || fail "without a libtstat: $(cat "$T/nolib.err")"
if "${builder[@]}" --lib "$bundle/lib/libtstat.so.0" --pybind11 "$T" 2> "$T/nopb.err"; then
  fail "built without pybind11's headers"
fi
grep -q "no pybind11 headers in $T" "$T/nopb.err" || fail "without pybind11: $(cat "$T/nopb.err")"

# --- 2. the bare root: the bundle, the C library, /tmp and /dev/null.
root="$T/root"
mkdir -p "$root/tmp" "$root/dev"
chmod 1777 "$root/tmp"
copy_system_library() {  # PATH: copied to the same path under the root
  local real
  real="$(readlink -f "$1")"
  mkdir -p "$root$(dirname "$1")"
  cp "$real" "$root$1"
}
for f in "$bundle"/bin/tstat "$bundle"/bin/tests/*; do
  ldd "$f" | sed -n 's/^[[:space:]]*\(lib[^ ]*\) => \(\/[^ ]*\) (.*$/\1 \2/p;
                     s/^[[:space:]]*\(\/[^ ]*ld-linux[^ ]*\) (.*$/\1 \1/p'
done | sort -u | while read -r name path; do
  [[ -e "$bundle/lib/$name" ]] || copy_system_library "$path"
done
interp="$(readelf -l "$bundle/bin/tstat" | sed -n 's/.*program interpreter: \(.*\)\]$/\1/p')"
[[ -e "$root$interp" ]] || copy_system_library "$interp"

# chroot needs root; /proc is bound in because the loader finds a program's
# $ORIGIN through /proc/self/exe (as on any real machine).
if ((EUID != 0)); then
  echo "SKIPPED: a chroot needs root" >&2
  exit 77
fi
mkdir -p "$root/proc"
mount --bind /proc "$root/proc" || fail "cannot bind /proc into the bare root"
trap 'umount "$root/proc" 2>/dev/null; rm -rf --one-file-system "$T"' EXIT
in_root() { chroot "$root" "$@"; }
in_root /bundle/bin/tstat --version > "$T/version.txt" 2>&1 ||
  fail "the bundled tstat does not run in a bare root: $(cat "$T/version.txt")"
[[ ! -e "$root/usr/lib/x86_64-linux-gnu/libhdf5_serial.so.103" ]] ||
  fail "the bare root holds HDF5: the test would prove nothing"

in_root /bundle/bin/tstat bench stats --size-mib 1 --repeats 1 --json > "$T/stats.json" 2> "$T/stats.err" ||
  fail "bench stats (CPU) in the bare root: $(cat "$T/stats.err")"
grep -q '"ratio_to_read_bw"' "$T/stats.json" || fail "bench stats printed no result: $(cat "$T/stats.json")"
in_root /bundle/bin/tests/tstat_test_cuda_all --gtest_filter='CudaEntryTest.*' > "$T/entry.log" 2>&1 ||
  fail "the CUDA entry test fails in the bare root: $(tail -20 "$T/entry.log")"
grep -q "PASSED" "$T/entry.log" || fail "the CUDA entry test passed nothing: $(cat "$T/entry.log")"
in_root /bundle/bin/tests/tstat_test_cuda_all --gtest_filter='Gpu/BackendVsCpu*' > "$T/vs_cpu.log" 2>&1 ||
  fail "gpu_vs_cpu fails in the bare root: $(tail -20 "$T/vs_cpu.log")"
grep -q "SKIPPED" "$T/vs_cpu.log" || fail "gpu_vs_cpu did not report SKIPPED without a device"
for cmd in "bench device" "bench capture --device cuda --tensors 2 --elements 10"; do
  # shellcheck disable=SC2086
  if in_root /bundle/bin/tstat $cmd > "$T/nodev.out" 2> "$T/nodev.err"; then
    fail "tstat $cmd succeeded without a device"
  fi
  grep -q "no CUDA device" "$T/nodev.err" || fail "tstat $cmd: $(cat "$T/nodev.err")"
done

# The LibTorch commands are not in the bundle: a clear error, no crash.
if in_root /bundle/bin/tstat demo --quick > "$T/demo.out" 2> "$T/demo.err"; then
  fail "tstat demo succeeded in the bundle, which carries no LibTorch"
fi
grep -Eq "tstat-torch.*cannot be started|built without LibTorch" "$T/demo.err" ||
  fail "tstat demo in the bundle: $(cat "$T/demo.err")"

# --- 3. gpu-check.sh without a device, then the summary of a synthetic run.
rc=0
bash "$bundle/gpu-check.sh" "$T/check" --budget 0 > "$T/check.log" 2>&1 || rc=$?
[[ $rc == 3 ]] || fail "gpu-check.sh without a device exited $rc, not 3: $(cat "$T/check.log")"
grep -q "device.*skipped" "$T/check/steps.tsv" || fail "steps.tsv: $(cat "$T/check/steps.tsv")"

s="$T/synthetic"
mkdir -p "$s/tests" "$s/sanitizer" "$s/bench"
cat > "$s/device.json" <<'EOF'
{"device":0,"name":"Test GPU","compute_capability":"9.0","sm_count":132,"memory_bytes":85899345920,"read_gbps":3000,"best_read_gbps":3050,"copy_gbps":2800,"best_copy_gbps":2850,"theoretical_gbps":3350,"driver_version":13000,"runtime_version":13000,"clock_khz":1980000,"memory_clock_khz":2619000,"bus_width_bits":5120}
EOF
cat > "$s/bench/stats.jsonl" <<'EOF'
{"case":"f32_1024MiB_x1","dtype":"f32","tensors":1,"bytes":1073741824,"gbps":2700,"read_bw_gbps":3000,"ratio_to_read_bw":0.9}
{"case":"bf16_1024MiB_x1","dtype":"bf16","tensors":1,"bytes":1073741824,"gbps":1800,"read_bw_gbps":3000,"ratio_to_read_bw":0.6}
{"case":"f32_38MiB_x10000","dtype":"f32","tensors":10000,"bytes":40000000,"gbps":1500,"read_bw_gbps":2900,"ratio_to_read_bw":0.52}
EOF
echo '{"tensors":1000,"elements":1000,"steps":200,"end_step_s":4e-05,"returned_while_busy":true,"busy_ms":20}' \
  > "$s/bench/capture_cuda.json"
echo '{"tensors":1000,"elements":1000,"steps":200,"allocations":1,"in_process_rules":true,"end_step_s":3e-05}' \
  > "$s/bench/capture_cuda_rules.json"
cat > "$s/tests/tstat_test_x.json" <<'EOF'
{"testsuites":[{"name":"A","testsuite":[{"name":"ok","result":"COMPLETED"},{"name":"bad","result":"COMPLETED","failures":[{"failure":"x"}]},{"name":"skip","result":"SKIPPED"}]}]}
EOF
echo "========= ERROR SUMMARY: 0 errors" > "$s/sanitizer/memcheck-x.log"
# racecheck's own summary line, as compute-sanitizer 2025 prints it.
echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)" \
  > "$s/sanitizer/racecheck-x.log"
echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" \
  > "$s/sanitizer/racecheck-y.log"
printf 'device\tok\t3\t\ntest x\tfailed (1)\t5\t\n' > "$s/steps.tsv"
python3 "$bundle/gpu_check_summary.py" "$s" > /dev/null || fail "gpu_check_summary.py failed"
python3 - "$s/summary.json" <<'EOF' || fail "summary.json is wrong"
import json, sys
s = json.load(open(sys.argv[1]))
t = {r["target"]: r for r in s["targets"]}
def met(prefix):
    rows = [r for k, r in t.items() if k.startswith(prefix)]
    assert rows, f"no target {prefix!r} in {list(t)}"
    return rows[0]["met"]
assert met("f32_1024MiB_x1: stat set vs read kernel") is True
assert met("bf16_1024MiB_x1: stat set vs read kernel") is False   # 0.6 < 0.7
assert met("10,000 x 1,000") is True                              # 1500 / 2700 = 0.56
assert met("EndStep host time") is True                           # 40 us <= 50 us
assert met("compute-sanitizer") is False                          # 2 racecheck errors
assert s["sanitizers"] == {"memcheck-x": 0, "racecheck-x": 2, "racecheck-y": 0}, s["sanitizers"]
x = s["tests"]["tstat_test_x"]
assert (x["passed"], x["failed"], x["skipped"]) == (1, 1, 1), x
assert s["all_passed"] is False
EOF
grep -q "## Capture of CUDA tensors (1 allocation(s), with the in-process rules)" "$s/summary.md" ||
  fail "summary.md lacks the capture with the in-process rules: $(cat "$s/summary.md")"
grep -q "| bf16_1024MiB_x1: stat set vs read kernel (same run) | 0.6 | 0.7 | NO |" "$s/summary.md" ||
  fail "summary.md lacks the bf16 row: $(cat "$s/summary.md")"
echo "gpu bundle test: ok ($(du -sh "$bundle" | cut -f1))"
