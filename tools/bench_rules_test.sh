#!/usr/bin/env bash
# `tstat bench rules` (ctest tstat.tools.bench_rules): a small real run of
# each case, the follow case included, whose JSON has the documented fields
# with values that fit together (records_per_s_per_core is records over
# cpu_seconds; the follow case logs its NaN episodes and has a latency), and
# bad input refused. Speeds are not judged here: the benchmark prints them.
# Usage: bench_rules_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

"$TSTAT" bench rules --tensors 40 --steps 30 --follow-steps 6 --json \
  >"$T/out.jsonl" 2>"$T/err.txt" ||
  { rc=$?; cat "$T/err.txt" >&2; fail "tstat bench rules exited $rc"; }
"$PY" - "$T/out.jsonl" <<'PYEOF' || fail "results are wrong (above)"
import json, math, sys
rows = {r["case"]: r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip())}
assert sorted(rows) == ["all_rules", "follow", "stats_only"], sorted(rows)
for name, r in rows.items():
    for key in ("records", "seconds", "cpu_seconds", "records_per_s_per_core", "rules",
                "follow_latency_s", "findings"):
        assert key in r, (name, key, r)
    assert r["records"] > 0 and r["cpu_seconds"] > 0, r
    assert math.isclose(r["records_per_s_per_core"], r["records"] / r["cpu_seconds"],
                        rel_tol=1e-2), r
# 40 tensors, the labels tensor and the loss scalar per step.
assert rows["stats_only"]["records"] == 30 * 42, rows["stats_only"]
assert rows["all_rules"]["rules"] > rows["stats_only"]["rules"], rows
f = rows["follow"]
assert f["follow_latency_s"] is not None and 0 <= f["follow_latency_s"] < 60, f
assert f["findings"] > 0, f  # the NaN at every 5th step
assert rows["stats_only"]["follow_latency_s"] is None, rows["stats_only"]
PYEOF

# Bad input: an out-of-range option is refused with its name.
if "$TSTAT" bench rules --tensors 0 >"$T/o" 2>"$T/e"; then
  fail "--tensors 0 was accepted"
fi
grep -q -- "--tensors" "$T/e" || fail "the refusal does not name --tensors: $(cat "$T/e")"
echo "tstat bench rules: ok"
