#!/usr/bin/env bash
# Developer entry points (see README.md):
#   ./tools/dev.sh demo    set up, build, run the main job
#   ./tools/dev.sh test    set up, build, run every test; then the same tests
#                          under ASan + UBSan, the threaded ones under TSan,
#                          and each fuzz target for 30 s
#   ./tools/dev.sh bench   set up, build, print throughput numbers
# Works without a terminal (CI): nothing here reads stdin. Environment:
# TSTAT_BUILD_DIR (default build), TSTAT_ASAN_BUILD_DIR (default build-asan),
# TSTAT_TSAN_BUILD_DIR (default build-tsan), TSTAT_JOBS (default 2),
# TSTAT_FUZZ_SECONDS (default 30), TSTAT_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS="${TSTAT_JOBS:-2}"
FUZZ_SECONDS="${TSTAT_FUZZ_SECONDS:-30}"  # per fuzz target in `test`
BUILD="${TSTAT_BUILD_DIR:-build}"            # Release build (setup.sh)
ASAN_BUILD="${TSTAT_ASAN_BUILD_DIR:-build-asan}"
TSAN_BUILD="${TSTAT_TSAN_BUILD_DIR:-build-tsan}"
export TSTAT_BUILD_DIR="$BUILD"
PY=/usr/bin/python3  # Debian's, which has numpy and h5py

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

setup() { bash tools/setup.sh; }

cmd_demo() {
  setup
  "$BUILD/bin/tstat" demo --out runs/demo --force
}

# Runs both suites even when the first fails, then fails if anything did.
cmd_test() {
  setup
  local failed=()
  echo "== ctest ($BUILD/, Release)"
  ctest --test-dir "$BUILD" --output-on-failure --timeout 1200 -j "$JOBS" ||
    failed+=("tests in $BUILD/")

  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build ($ASAN_BUILD/, CPU only)"
  mkdir -p "$ASAN_BUILD"
  if ! cmake -S . -B "$ASAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTSTAT_SANITIZER=address,undefined -DTSTAT_ENABLE_CUDA=OFF \
      >"$ASAN_BUILD/configure.log" 2>&1; then
    cat "$ASAN_BUILD/configure.log" >&2
    failed+=("configure of $ASAN_BUILD/")
  elif ! cmake --build "$ASAN_BUILD" -j "$JOBS"; then
    failed+=("build of $ASAN_BUILD/")
  else
    echo "== ctest ($ASAN_BUILD/)"
    # The build uses -fno-sanitize-recover=all, so any report fails its test.
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
      ctest --test-dir "$ASAN_BUILD" --output-on-failure --timeout 1200 -j "$JOBS" ||
      failed+=("tests in $ASAN_BUILD/ (ASan+UBSan)")
  fi

  echo "== ThreadSanitizer build ($TSAN_BUILD/, CPU only, the tests labelled tsan)"
  mkdir -p "$TSAN_BUILD"
  if ! cmake -S . -B "$TSAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTSTAT_SANITIZER=thread -DTSTAT_ENABLE_CUDA=OFF \
      >"$TSAN_BUILD/configure.log" 2>&1; then
    cat "$TSAN_BUILD/configure.log" >&2
    failed+=("configure of $TSAN_BUILD/")
  elif ! cmake --build "$TSAN_BUILD" -j "$JOBS" --target tstat_tsan_tests; then
    failed+=("build of $TSAN_BUILD/")
  else
    echo "== ctest ($TSAN_BUILD/, -L tsan)"
    # OMP_NUM_THREADS=1: libgomp is not instrumented, so TSan cannot see the
    # barriers at the end of an OpenMP region and would report the CPU
    # backend's per-thread partials, read by the master after the barrier,
    # as races. On one thread OpenMP starts no worker threads; the threads
    # under test (writer, collector, readers, stop requests) are all ours.
    # halt_on_error=1: the first report aborts the test, so it fails.
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --test-dir "$TSAN_BUILD" -L tsan --no-tests=error --output-on-failure \
        --timeout 1200 -j "$JOBS" ||
      failed+=("tests in $TSAN_BUILD/ (TSan)")
  fi

  echo "== libFuzzer targets (build-fuzz/, clang, ASan + UBSan), ${FUZZ_SECONDS}s each"
  # Short runs from the checked-in corpus: a smoke test of the fuzz build and
  # a few minutes of search per CI run. Longer runs: tools/fuzz.sh all SECONDS.
  if ! tools/fuzz.sh build >/dev/null; then
    failed+=("build of build-fuzz/ (tools/fuzz.sh build)")
  elif ! tools/fuzz.sh all "$FUZZ_SECONDS"; then
    failed+=("fuzz targets (tools/fuzz.sh all $FUZZ_SECONDS)")
  fi

  if ((${#failed[@]} > 0)); then
    local f
    echo "dev.sh test: FAILED:" >&2
    for f in "${failed[@]}"; do echo "  - $f" >&2; done
    exit 1
  fi
  echo "dev.sh test: all tests passed (Release, ASan+UBSan, TSan and the fuzz targets)"
}

cmd_bench() {
  setup
  "$BUILD/bin/tstat" bench stats
  echo
  "$BUILD/bin/tstat" bench capture
  echo
  "$PY" benchmarks/stats_numpy.py --tstat "$BUILD/bin/tstat"
}

case "${1:-}" in
  demo) cmd_demo ;;
  test) cmd_test ;;
  bench) cmd_bench ;;
  *) usage ;;
esac
