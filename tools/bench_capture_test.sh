#!/usr/bin/env bash
# `tstat bench capture` (ctest tstat.tools.bench_capture): a tiny real case
# whose JSON has the fields README documents, with values that fit together
# (ratio and sustained_ratio are their times over engine_s, writer_step_s is
# K / records_per_s, raw_vs_plain is raw over plain), and bad input refused.
# Speeds are not judged here: they are printed by the benchmark.
# Usage: bench_capture_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

"$TSTAT" bench capture --tensors 20 --elements 300 --raw-mib 2 --repeats 1 --dir "$T" --json \
  >"$T/out.jsonl" 2>"$T/err.txt" ||
  { rc=$?; cat "$T/err.txt" >&2; fail "tstat bench capture exited $rc"; }
"$PY" - "$T/out.jsonl" <<'PYEOF' || fail "results are wrong (above)"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 1, rows
r = rows[0]
for key in ("case", "tensors", "elements", "engine_s", "end_step_s", "ratio", "sustained_step_s",
            "sustained_ratio", "records_per_s", "writer_step_s", "raw_write_gbps",
            "plain_write_gbps", "raw_vs_plain", "stats_waits", "block_steps"):
    assert key in r, (key, r)
assert r["case"] == "capture_20x300" and r["tensors"] == 20 and r["elements"] == 300, r
for key in ("engine_s", "end_step_s", "sustained_step_s", "records_per_s", "raw_write_gbps",
            "plain_write_gbps"):
    assert r[key] > 0, (key, r)
close = lambda a, b: math.isclose(a, b, rel_tol=1e-4)
assert close(r["ratio"], r["end_step_s"] / r["engine_s"]), r
assert close(r["sustained_ratio"], r["sustained_step_s"] / r["engine_s"]), r
assert close(r["writer_step_s"], r["tensors"] / r["records_per_s"]), r
assert close(r["raw_vs_plain"], r["raw_write_gbps"] / r["plain_write_gbps"]), r
PYEOF
# Nothing is left in --dir: every run and the plain file are removed.
leftover="$(find "$T" -mindepth 1 -maxdepth 1 ! -name 'out.jsonl' ! -name 'err.txt')"
[[ -z "$leftover" ]] || fail "left behind in --dir: $leftover"

# Bad input: an out-of-range option is refused with its name.
if "$TSTAT" bench capture --tensors 0 >"$T/o" 2>"$T/e"; then
  fail "--tensors 0 was accepted"
fi
grep -q -- "--tensors" "$T/e" || fail "message: $(cat "$T/e")"
echo "bench capture: OK"
