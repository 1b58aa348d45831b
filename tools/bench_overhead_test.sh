#!/usr/bin/env bash
# `tstat bench overhead` (ctest tstat.tools.bench_overhead, label torch): a
# tiny real run (2 steps per block, save_interval 1 and 2) whose JSON has the
# fields README documents and sane values, an SVG plot that parses as XML with
# one curve per configuration, and bad input refused with the valid names.
# Usage: bench_overhead_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

"$TSTAT" bench overhead --configs stats_all,raw_weights --intervals 1,2 --steps 2 --repeats 1 \
  --batch 2 --json --plot "$T/plot.svg" >"$T/out.jsonl" 2>"$T/err.txt" ||
  { rc=$?; cat "$T/err.txt" >&2; fail "tstat bench overhead exited $rc"; }
grep -q "^BLAS: .*tstat capture threads [1-9]" "$T/err.txt" || fail "no BLAS/threads line: $(cat "$T/err.txt")"
"$PY" - "$T/out.jsonl" "$T/plot.svg" <<'PYEOF' || fail "results or plot are wrong (above)"
import json, sys, xml.etree.ElementTree as ET
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = [(r["config"], r["save_interval"]) for r in rows]
want = [("stats_all", 1), ("raw_weights", 1), ("stats_all", 2), ("raw_weights", 2), ("none", 0)]
assert sorted(cases) == sorted(want), cases
for r in rows:
    for key in ("config", "save_interval", "step_s", "slowdown", "capture_share", "records_dropped"):
        assert key in r, (key, r)
    assert r["step_s"] > 0, r
    assert r["slowdown"] > 0, r
    if r["config"] == "none":
        assert r["slowdown"] == 1.0 and r["capture_share"] == 0.0, r
    else:
        assert 0.0 < r["capture_share"] < 1.0, r  # the session measured its own calls
        assert r["records_dropped"] == 0, r
svg = ET.parse(sys.argv[2]).getroot()
assert svg.tag.endswith("svg"), svg.tag
text = ET.tostring(svg, encoding="unicode")
for name in ("stats_all", "raw_weights"):
    assert name in text, f"{name} missing from the plot"
PYEOF

# Bad input: unknown configuration, bad interval; the valid names are listed.
if "$TSTAT" bench overhead --configs stats_all,bogus --steps 1 >"$T/o" 2>"$T/e"; then
  fail "an unknown configuration was accepted"
fi
grep -q 'unknown configuration "bogus"' "$T/e" || fail "message: $(cat "$T/e")"
for name in stats_all raw_weights raw_all; do
  grep -q "$name" "$T/e" || fail "valid name $name not listed: $(cat "$T/e")"
done
if "$TSTAT" bench overhead --intervals 0 --steps 1 >"$T/o" 2>"$T/e"; then
  fail "save_interval 0 was accepted"
fi
grep -qi "interval" "$T/e" || fail "message: $(cat "$T/e")"
echo "bench overhead: OK"
