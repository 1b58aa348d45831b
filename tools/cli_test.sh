#!/usr/bin/env bash
# Smoke test of the tstat CLI: exit codes, error messages, --version and a tiny
# `bench stats` run. Usage: tools/cli_test.sh path/to/tstat   (run by ctest)
set -uo pipefail

tstat="${1:?usage: cli_test.sh path/to/tstat}"
failures=0
out=""
code=0

run() {  # run ARGS...: captures stdout+stderr in $out and the exit code in $code
  out="$("$tstat" "$@" 2>&1)"
  code=$?
}
fail() {
  echo "FAIL: $*"
  echo "---- output ----"
  echo "$out"
  echo "----------------"
  failures=$((failures + 1))
}
expect() {  # expect CODE REGEX ARGS...
  local want_code="$1" regex="$2"
  shift 2
  run "$@"
  if [[ "$code" != "$want_code" ]]; then
    fail "tstat $* exited $code, expected $want_code"
  elif ! grep -Eq -- "$regex" <<<"$out"; then
    fail "tstat $* output does not match /$regex/"
  else
    echo "ok: tstat $*"
  fi
}

expect 0 '^tstat [0-9]+\.[0-9]+\.[0-9]+' --version
expect 0 '^backends: cpu' --version
expect 0 '^cuda devices: [0-9]+' --version
expect 0 'bench' --help
expect 2 "unknown subcommand 'frobnicate'.*valid: .*bench" frobnicate
expect 2 "unknown subcommand 'nope'.*valid: stats" bench nope
expect 2 "needs a subcommand.*stats" bench
expect 2 "unrecognized argument.*--frobnicate" bench stats --frobnicate
expect 2 "unrecognized argument.*--frobnicate" --frobnicate
expect 2 'f7.*f32.*f16.*bf16.*f64' bench stats --dtype f7
expect 2 'cpu.*cuda' bench stats --backend tpu
expect 2 'repeats' bench stats --repeats 0
expect 2 'size-mib' bench stats --size-mib -1
expect 2 'input' bench stats --input /nonexistent/file
expect 2 'no subcommand' 

expect 0 '"ratio_to_read_bw":[0-9]' bench stats --size-mib 2 --tensors 3 --repeats 1 --json
expect 0 'stats GB/s' bench stats --size-mib 1 --dtype bf16 --repeats 2
expect 0 '"count":131072' bench stats --size-mib 1 --dtype f64 --repeats 1 --json

# --input: 1000 float32 values (all 1.0f = 0x3f800000 little-endian).
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for _ in $(seq 1000); do printf '\x00\x00\x80\x3f'; done >"$tmp"
expect 0 '"min":1,"max":1,"sum":1000' bench stats --input "$tmp" --dtype f32 --repeats 1 --json
printf 'abc' >"$tmp"
expect 1 'not a multiple' bench stats --input "$tmp" --dtype f32 --repeats 1

run --version
if grep -q '^cuda devices: 0' <<<"$out"; then
  expect 0 'no CUDA device: CUDA throughput not measured' bench stats --backend cuda --size-mib 1
else
  expect 0 '"backend":"cuda"' bench stats --backend cuda --size-mib 1 --repeats 1 --json
fi

if ((failures > 0)); then
  echo "$failures CLI check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
