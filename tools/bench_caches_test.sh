#!/usr/bin/env bash
# `tstat bench caches` (ctest tstat.tools.bench_caches): a tiny run whose
# JSON has the four modes with the rounds asked for and consistent ratios, a
# process held to one processor refused with the reason, and bad sizes
# refused with the flag's name, and so are sizes past the machine's memory.
# Speeds are not judged here: the benchmark prints them.
# Usage: bench_caches_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

if [[ "$(nproc)" -gt 1 ]]; then
  "$TSTAT" bench caches --rounds 12 --chunks 3 --chunk-kib 16 --json >"$T/out.jsonl" 2>"$T/err.txt" ||
    { rc=$?; cat "$T/err.txt" >&2; fail "tstat bench caches exited $rc"; }
  "$PY" - "$T/out.jsonl" <<'PYEOF' || fail "results are wrong (above)"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert [r["case"] for r in rows] == ["alone", "reads_other", "reads_fresh", "reads_evicts"], rows
alone = rows[0]
assert alone["mean_ratio"] == 1 and alone["median_ratio"] == 1, alone
for r in rows:
    assert r["rounds"] == 12 and r["chunks"] == 3 and r["chunk_kib"] == 16, r
    assert r["mean_ms"] > 0 and r["median_ms"] > 0, r
    assert math.isclose(r["mean_ratio"], r["mean_ms"] / alone["mean_ms"], rel_tol=1e-3), r
    assert math.isclose(r["median_ratio"], r["median_ms"] / alone["median_ms"], rel_tol=1e-3), r
    assert isinstance(r["evicts"], bool), r
PYEOF
  # The table names every mode.
  "$TSTAT" bench caches --rounds 2 --chunks 2 --chunk-kib 4 >"$T/table.txt" 2>&1 ||
    fail "the table run failed: $(cat "$T/table.txt")"
  for mode in alone reads_other reads_fresh reads_evicts; do
    grep -q "^$mode " "$T/table.txt" || fail "the table has no $mode row: $(cat "$T/table.txt")"
  done
fi

# One processor: nothing to measure, and it says why.
if command -v taskset >/dev/null; then
  if taskset -c 0 "$TSTAT" bench caches --rounds 2 >"$T/o" 2>"$T/e"; then
    fail "a process on one processor was measured"
  fi
  grep -q "one processor" "$T/e" || fail "the refusal does not say why: $(cat "$T/e")"
fi

# Bad sizes are refused with the flag's name.
for bad in "--chunks 1" "--chunk-kib 2" "--rounds 0"; do
  # shellcheck disable=SC2086
  if "$TSTAT" bench caches $bad >"$T/o" 2>"$T/e"; then fail "$bad was accepted"; fi
  grep -q -- "${bad%% *}" "$T/e" || fail "the refusal of $bad does not name it: $(cat "$T/e")"
done
# More memory than the machine has (2 x 100,000 x 1 GiB) is refused before
# anything is allocated, naming both flags.
if [[ "$(nproc)" -gt 1 ]]; then
  if "$TSTAT" bench caches --chunks 100000 --chunk-kib 1048576 >"$T/o" 2>"$T/e"; then
    fail "100,000 chunks of 1 GiB were accepted"
  fi
  grep -q -- "--chunks 100000 x --chunk-kib 1048576" "$T/e" ||
    fail "the refusal does not name the sizes: $(cat "$T/e")"
  grep -q "half of this machine" "$T/e" || fail "the refusal does not say why: $(cat "$T/e")"
fi
echo "tstat bench caches: ok"
