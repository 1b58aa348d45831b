# Sourced by the shell tests under tools/ (bench_overhead_test.sh,
# demo/demo_test.sh): strict mode, a scratch directory $T removed on exit, and
# `fail MESSAGE`, which prints "FAIL: MESSAGE" on stderr and exits 1.
set -uo pipefail
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
