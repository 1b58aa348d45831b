#!/usr/bin/env bash
# libFuzzer runs of tstat's fuzz targets (tests/fuzz/).
#
#   tools/fuzz.sh build                    build the targets into build-fuzz/
#                                          (clang, ASan + UBSan + libFuzzer)
#   tools/fuzz.sh run TARGET SECONDS       fuzz one target for SECONDS
#   tools/fuzz.sh all SECONDS              fuzz every target SECONDS each
#   tools/fuzz.sh list                     the targets
#
# Each run starts from the checked-in corpus (tests/fuzz/corpus/TARGET/: seeds
# and every input that once crashed the target) plus what earlier runs on
# this machine found (build-fuzz/corpus/TARGET/, which grows). A crash, leak,
# sanitizer report or an input slower than 10 s is written to
# build-fuzz/crashes/TARGET/ and fails the run; fix it, then copy the input
# into tests/fuzz/corpus/TARGET/ so that ctest (tstat.fuzz.TARGET) replays it
# in every build from then on. Prints one line per target:
#   fuzz TARGET: SECONDS s, RUNS executions, CORPUS inputs, no crash
# Environment: TSTAT_FUZZ_BUILD_DIR (default build-fuzz), TSTAT_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${TSTAT_FUZZ_BUILD_DIR:-build-fuzz}"
TARGETS=(session_config rules_config expression findings_log segment_reader catalog)

die() {
  echo "fuzz.sh: error: $*" >&2
  exit 2
}

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

cmd_build() {
  command -v clang++ >/dev/null || die "clang++ not found (tools/setup.sh installs it)"
  mkdir -p "$BUILD"
  if ! CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTSTAT_FUZZ=ON -DTSTAT_SANITIZER=address,undefined -DTSTAT_ENABLE_CUDA=OFF \
      -DTSTAT_WITH_TORCH=OFF -DTSTAT_BUILD_TOOLS=OFF >"$BUILD/configure.log" 2>&1; then
    cat "$BUILD/configure.log" >&2
    die "cmake configure of $BUILD/ failed (log above)"
  fi
  cmake --build "$BUILD" -j "${TSTAT_JOBS:-2}" --target tstat_fuzz_targets ||
    die "build of $BUILD/ failed"
}

known_target() {
  local t
  for t in "${TARGETS[@]}"; do [[ "$t" == "$1" ]] && return 0; done
  return 1
}

# Where the failure of `bin` on `input` happens, replayed alone: "libhdf5"
# for a crash or hang whose innermost frame outside the fuzzing runtime is in
# libhdf5 itself, or an out-of-memory whose allocation sites are all in
# libhdf5 (crafted HDF5 metadata that the library cannot read safely;
# h5py crashes on the same files, see docs/reliability.md), "unreproducible"
# when the input alone does not fail (fork mode: a job's failure that earlier
# inputs of the same process set up), else "tstat".
classify_crash() {
  local bin="$1" input="$2" out
  if out=$(ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
           timeout 300 "$bin" -timeout=20 -rss_limit_mb=4096 -detect_leaks=0 "$input" 2>&1); then
    echo unreproducible
    return
  fi
  if grep -qE 'out-of-memory|malloc\(.*\) exceeds limit' <<<"$out"; then
    # The heaviest allocation sites: the frame after each allocator frame.
    local sites
    sites=$(grep -A1 -E '^ +#0 0x.* in (malloc|calloc|realloc|operator new)' <<<"$out" |
            grep -E '^ +#1 0x' | grep -v 'fuzzer::' || true)
    if [[ -n "$sites" ]] && ! grep -qv 'libhdf5' <<<"$sites"; then echo libhdf5; else echo tstat; fi
    return
  fi
  if sed -n '/ERROR:/,$p' <<<"$out" | grep -E '^ +#[0-9]+ 0x' |
    grep -vE 'libclang_rt|fuzzer::|__sanitizer|libc\.so|libpthread|__restore_rt|<unknown module>| in (__interceptor_[a-z_]+|(__)?mem(move|cpy|set)[a-z0-9_]*|str(len|dup|cpy)) ' |
    head -1 | grep -q 'libhdf5'; then
    echo libhdf5
  else
    echo tstat
  fi
}

# run_one TARGET SECONDS: 0 when no crash in tstat's code, 1 otherwise.
run_one() {
  local target="$1" seconds="$2"
  known_target "$target" || die "unknown target '$target' (tools/fuzz.sh list)"
  [[ "$seconds" =~ ^[0-9]+$ ]] && ((seconds > 0)) || die "SECONDS must be a positive integer"
  local bin="$BUILD/tests/fuzz/tstat_fuzz_$target"
  [[ -x "$bin" ]] || die "$bin not built (tools/fuzz.sh build)"
  local corpus="$BUILD/corpus/$target" crashes="$BUILD/crashes/$target"
  local log="$BUILD/logs/$target.log" dict="tests/fuzz/json.dict"
  mkdir -p "$corpus" "$crashes" "$BUILD/logs"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
              -artifact_prefix="$crashes/")
  local leaks=1
  if [[ "$target" == segment_reader ]]; then
    # libhdf5 crashes on some crafted metadata; fork mode goes on after a
    # crash so that the run still searches tstat's own code, and each crash
    # is sorted below by where it happened. Leak detection is off here:
    # libhdf5 leaks on the failure paths of damaged metadata, found only at
    # a job's exit and not attributable to one input. tstat's reader is
    # leak-checked by the ASan suite (the corpus replay included).
    args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -detect_leaks=0)
    leaks=0
  else
    args+=(-dict="$dict")
  fi
  # New inputs go to the first corpus folder (this machine's); the checked-in
  # one is only read.
  local rc=0
  ASAN_OPTIONS=detect_leaks=$leaks:allocator_may_return_null=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$bin" "${args[@]}" "$corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1 || rc=$?
  local runs inputs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [[ -z "$runs" ]]; then  # fork mode: the last progress line "#N: cov: ..."
    runs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$log" | tail -1)
  fi
  inputs=$(find "$corpus" -type f | wc -l)
  local found=() upstream=0 unreproducible=0 f where
  for f in "$crashes"/crash-* "$crashes"/timeout-* "$crashes"/leak-* "$crashes"/oom-*; do
    [[ -f "$f" ]] || continue
    where=$(classify_crash "$bin" "$f")
    case "$where" in
      libhdf5) upstream=$((upstream + 1)) ;;
      unreproducible) unreproducible=$((unreproducible + 1)) ;;
      *) found+=("$f"); continue ;;
    esac
    mkdir -p "$crashes/$where"
    mv -f "$f" "$crashes/$where/"
  done
  local note=""
  ((upstream == 0)) || note=" ($upstream inputs crash inside libhdf5 itself: $crashes/libhdf5/)"
  ((unreproducible == 0)) ||
    note+=" ($unreproducible failures did not recur with their input alone: $crashes/unreproducible/)"
  if ((${#found[@]} > 0)) || { ((rc != 0)) && [[ "$target" != segment_reader ]]; }; then
    echo "fuzz $target: FAILED after ${runs:-?} executions (exit $rc)$note; inputs:" >&2
    printf '  %s\n' "${found[@]}" >&2
    grep -m 20 -E 'ERROR|SUMMARY|#[0-9]+ 0x' "$log" >&2 || true
    echo "  full log: $log" >&2
    return 1
  fi
  echo "fuzz $target: $seconds s, ${runs:-?} executions, $inputs inputs in $corpus, no crash in tstat's code$note"
}

cmd_all() {
  local seconds="$1" failed=() t
  for t in "${TARGETS[@]}"; do run_one "$t" "$seconds" || failed+=("$t"); done
  if ((${#failed[@]} > 0)); then
    echo "fuzz.sh: crashes in: ${failed[*]}" >&2
    exit 1
  fi
}

case "${1:-}" in
  build) cmd_build ;;
  run) (($# == 3)) || usage; run_one "$2" "$3" || exit 1 ;;
  all) (($# == 2)) || usage; cmd_all "$2" ;;
  list) printf '%s\n' "${TARGETS[@]}" ;;
  *) usage ;;
esac
