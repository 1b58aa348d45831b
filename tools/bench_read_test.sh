#!/usr/bin/env bash
# `tstat bench read` (ctest tstat.tools.bench_read): a small real run whose
# JSON has every case with the sizes it must have (the series has a point
# per step, the step a record per tensor, check judged every record), the
# same figures for an existing run (--run), and bad input refused. Speeds
# and memory are not judged here: the benchmark prints them.
# Usage: bench_read_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

"$TSTAT" bench read --tensors 12 --steps 30 --steps-per-segment 7 --dir "$T" --keep --json \
  >"$T/out.jsonl" 2>"$T/err.txt" ||
  { rc=$?; cat "$T/err.txt" >&2; fail "tstat bench read exited $rc"; }
run="$(sed -n 's/^tstat bench read: the run is kept in //p' "$T/err.txt")"
[[ -d "$run/worker-00000" ]] || fail "--keep did not name the run: $(cat "$T/err.txt")"
# 30 steps in segments of 7 steps: 5 segment files.
[[ "$(find "$run/worker-00000" -name 'seg-*.h5' | wc -l)" == 5 ]] || fail "not 5 segments"
"$TSTAT" bench read --run "$run" --json >"$T/again.jsonl" 2>"$T/err2.txt" ||
  { rc=$?; cat "$T/err2.txt" >&2; fail "tstat bench read --run exited $rc"; }
"$PY" - "$T/out.jsonl" "$T/again.jsonl" <<'PYEOF' || fail "results are wrong (above)"
import json, sys
def load(path):
    return {r["case"]: r for r in (json.loads(l) for l in open(path) if l.strip())}
first, again = load(sys.argv[1]), load(sys.argv[2])
assert sorted(first) == ["check", "inspect", "open", "series", "step", "write"], sorted(first)
assert sorted(again) == ["check", "inspect", "open", "series", "step"], sorted(again)
for rows in (first, again):
    for name, r in rows.items():
        assert r["ok"] is True and r["tensors"] == 12 and r["steps"] == 30, r
        assert r["wall_s"] > 0 and r["peak_mib"] > 1, r
    assert rows["open"]["answer"] == 30, rows["open"]
    assert rows["series"]["answer"] == 30, rows["series"]
    assert rows["step"]["answer"] == 12, rows["step"]
    assert rows["check"]["records"] == 30 * 12 + 30, rows["check"]  # and the loss scalar
    # The open's and the queries' own time: within their process's.
    for name in ("open", "series", "step"):
        assert 0 < rows[name]["query_s"] <= rows[name]["wall_s"], rows[name]
    for name in ("inspect", "check"):
        assert rows[name]["query_s"] == 0, rows[name]
assert first["write"]["records"] == 30 * 13, first["write"]
PYEOF

# --case runs those cases alone.
"$TSTAT" bench read --run "$run" --case step --case open --json >"$T/some.jsonl" 2>"$T/err3.txt" ||
  { rc=$?; cat "$T/err3.txt" >&2; fail "tstat bench read --case exited $rc"; }
[[ "$(sed -n 's/^{"case": "\([a-z]*\)".*/\1/p' "$T/some.jsonl" | tr '\n' ' ')" == "open step " ]] ||
  fail "--case open --case step ran: $(cat "$T/some.jsonl")"
if "$TSTAT" bench read --case everything >"$T/o" 2>"$T/e"; then fail "--case everything was accepted"; fi
grep -q -- "--case" "$T/e" || fail "the refusal does not name --case: $(cat "$T/e")"

# Bad input: out-of-range options and a missing run are refused with their names.
if "$TSTAT" bench read --tensors 1 >"$T/o" 2>"$T/e"; then fail "--tensors 1 was accepted"; fi
grep -q -- "--tensors" "$T/e" || fail "the refusal does not name --tensors: $(cat "$T/e")"
if "$TSTAT" bench read --run "$T/none" >"$T/o" 2>"$T/e"; then fail "a missing --run was accepted"; fi
grep -q -- "--run" "$T/e" || fail "the refusal does not name --run: $(cat "$T/e")"
echo "tstat bench read: ok"
