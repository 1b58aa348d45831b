#!/usr/bin/env bash
# `tstat inspect` and `tstat dump` against the run of cli_test_run_writer.cc,
# whose values are known by hand (see that file): text and JSON summaries,
# the capture overhead line, safe printing of hostile and long names, CSV
# read back with Python's csv module, and the error exits.
# Usage: tools/cli_inspect_test.sh path/to/tstat path/to/cli_test_run_writer
set -uo pipefail

tstat="${1:?usage: cli_inspect_test.sh TSTAT RUN_WRITER}"
writer="${2:?usage: cli_inspect_test.sh TSTAT RUN_WRITER}"
py=/usr/bin/python3
work="$(mktemp -d /tmp/tstat-cli-inspect.XXXXXX)"
trap 'rm -rf "$work"' EXIT
run="$work/run"
failures=0
out=""
code=0

fail() {
  echo "FAIL: $*"
  echo "---- output ----"
  echo "$out"
  echo "----------------"
  failures=$((failures + 1))
}
runt() {  # runt ARGS...: stdout in $out and $work/stdout, stderr in $err, exit code in $code
  "$tstat" "$@" >"$work/stdout" 2>"$work/stderr"
  code=$?
  out="$(cat "$work/stdout")"
  err="$(cat "$work/stderr")"
}
expect() {  # expect CODE REGEX ARGS...: REGEX is matched against stdout+stderr
  local want_code="$1" regex="$2"
  shift 2
  runt "$@"
  if [[ "$code" != "$want_code" ]]; then
    out="$out"$'\n'"[stderr] $err"
    fail "tstat $* exited $code, expected $want_code"
  elif ! grep -Eq -- "$regex" <<<"$out"$'\n'"$err"; then
    out="$out"$'\n'"[stderr] $err"
    fail "tstat $* output does not match /$regex/"
  else
    echo "ok: tstat $* =~ /$regex/"
  fi
}
check_py() {  # check_py NAME SCRIPT: runs SCRIPT; `out` is the last stdout, exactly (UTF-8)
  local name="$1" script="$2"
  local result
  if result="$("$py" -c "import sys; out = open(sys.argv[1], 'rb').read().decode('utf-8')
$script" "$work/stdout" 2>&1)"; then
    echo "ok: $name"
  else
    out="$out"$'\n'"[python] $result"
    fail "$name"
  fi
}

if ! "$writer" "$run" >"$work/writer.log" 2>&1; then
  out="$(cat "$work/writer.log")"
  fail "the run writer failed"
  exit 1
fi

# ---- inspect (text)
expect 0 '^steps: +5 saved: TRAIN 4 \(steps 0\.\.6\), EVAL 1 \(steps 0\.\.0\)$' inspect "$run"
expect 0 '^tensors: +3 \(\+1 scalars\)' inspect "$run"
expect 0 '1 \(world size 1\); 1 closed cleanly, run complete' inspect "$run"
expect 0 'rank 0/1 .*closed +[0-9]+ segment' inspect "$run"
expect 0 'findings: +none recorded' inspect "$run"
expect 0 '^capture: [0-9.e+-]+% of step time \(10 steps, mean step [0-9.]+ (ms|s), mean capture [0-9.]+ (ns|us|ms)\)$' \
  inspect "$run"
# x at its latest saved step (global 8, TRAIN mode step 6): (g+1)=9 times {1,2,3,4}.
expect 0 '^x +8 +TRAIN 6 +4 +9 +36 +22\.5 +10\.06 +49\.3 +0 +0$' inspect "$run"
# The hostile tensor: escaped on one line; nan 1, inf 2.
expect 0 '^evil "q", n\\nl\\tt\\e\[1mX \\u\{202e\}Y '$'\xc3\xa9\xe2\x86\x92'' +8 +TRAIN 6 +5 +0 +2 +1 .* 1 +2$' \
  inspect "$run"
expect 0 '^loss +8 +TRAIN 6 +0\.111111$' inspect "$run"
runt inspect "$run"
if grep -q $'\x1b' <<<"$out" || grep -q $'\xe2\x80\xae' <<<"$out"; then
  fail "inspect printed a raw escape or bidi control"
else
  echo "ok: no raw control characters in the text output"
fi
# The 150-byte name is cut (ellipsis) to the 40-column name column.
check_py "long name truncated in the table" '
import sys
lines = out.splitlines()
rows = [l for l in lines if l.startswith("model/block")]
assert len(rows) == 1, rows
name = rows[0].split("  ")[0]
assert name.endswith("\u2026") and len(name) == 40, (name, len(name))
full = "model" + "/block" * 24
assert full[:143] + ".weight" not in "\n".join(lines)
'

# ---- inspect --json
expect 0 '"capture_line": "capture: ' inspect "$run" --json
check_py "inspect --json values" '
import json, math, sys
j = json.loads(out)
hostile = "evil \"q\", n\nl\tt\x1b[1mX \u202eY \u00e9\u2192"
long_name = ("model" + "/block" * 24)[:143] + ".weight"
assert j["format_version"] == 4 and j["complete"] is True, j
w, = j["workers"]
assert (w["rank"], w["world_size"], w["closed"], w["format_version"]) == (0, 1, True, 4), w
assert j["steps"]["saved"] == 5
assert j["steps"]["TRAIN"] == {"count": 4, "first_step": 0, "last_step": 6,
                               "first_global_step": 0, "last_global_step": 8}, j["steps"]
assert j["steps"]["EVAL"] == {"count": 1, "first_step": 0, "last_step": 0,
                              "first_global_step": 6, "last_global_step": 6}, j["steps"]
assert "PREDICT" not in j["steps"] and "GLOBAL" not in j["steps"]
assert (j["tensors"], j["scalars"]) == (3, 1)
assert j["by_collection"]["weights"] == 2 and j["by_collection"]["biases"] == 1, j["by_collection"]
c = j["counters"]
assert c["steps_captured"] == 5, c
assert c["records_written"] == 5 * 3 + 5, c     # 3 tensors + 1 scalar per saved step
assert c["raw_dropped"] == 0 and c["write_errors"] == 0 and c["records_lost"] == 0, c
assert c["segments_written"] == j["segments"] == w["segments"] >= 1, (c, j["segments"])
assert j["bytes"] == w["bytes"] == c["bytes_written"] > 0
cap = j["capture"]
assert cap["steps"] == 10 and cap["steps_saved"] == 5, cap       # every step, saved or not
assert cap["step_seconds"] >= 0.02, cap                           # 10 steps of >= 2 ms
assert 0 < cap["capture_seconds"] < cap["step_seconds"], cap
assert abs(cap["fraction"] - cap["capture_seconds"] / cap["step_seconds"]) < 1e-12
assert j["findings"] is None
latest = {r["name"]: r for r in j["latest"]}
assert set(latest) == {"x", hostile, long_name}, list(latest)
x = latest["x"]
assert (x["step"], x["mode"], x["mode_step"]) == (8, "TRAIN", 6), x
s = x["stats"]
assert (s["count"], s["min"], s["max"], s["mean"], s["sum"]) == (4, 9, 36, 22.5, 90), s
assert math.isclose(s["l2"], 9 * math.sqrt(30), rel_tol=1e-15), s["l2"]
assert math.isclose(s["std"], 9 * math.sqrt(1.25), rel_tol=1e-15), s["std"]
h = latest[hostile]["stats"]
assert (h["count"], h["finite_count"], h["nan_count"], h["pos_inf_count"], h["neg_inf_count"]) == (5, 2, 1, 1, 1), h
assert (h["min"], h["max"], h["mean"], h["l2"]) == (0, 2, 1, 2), h
sc, = j["scalars_latest"]
assert sc == {"name": "loss", "step": 8, "mode": "TRAIN", "mode_step": 6, "value": 1 / 9}, sc
'

# ---- findings: RUN/findings.jsonl (the format of rules/runtime/findings_log.h), counted per rule
cat >"$run/findings.jsonl" <<'EOF_FINDINGS'
{"rule":"grad_blowup","type":"expression","step":"4","mode":"TRAIN","mode_step":"4","worker":0,"tensor":"x","values":{"l2":27.4},"message":"l2 above 20","time":1700000000.25}
{"rule":"grad_blowup","type":"expression","step":"8","mode":"TRAIN","mode_step":"6","worker":0,"tensor":"x","values":{"l2":49.3},"message":"l2 above 20","time":1700000001.25}
{"rule":"loss_not_decreasing","type":"loss_not_decreasing","step":"8","mode":"TRAIN","mode_step":"6","worker":0,"tensor":"","values":{},"message":"loss flat","time":1700000001.5}
EOF_FINDINGS
expect 0 '^findings: +3 \(grad_blowup 2, loss_not_decreasing 1\)$' inspect "$run"
expect 0 '"findings": 3, "findings_by_rule": \{"grad_blowup": 2, "loss_not_decreasing": 1\}' \
  inspect "$run" --json

# ---- episodes (open/close events) and the in-process rules summary
cat >"$run/findings.jsonl" <<'EOF_FINDINGS'
{"rule":"grad_blowup","type":"expression","step":"4","mode":"TRAIN","mode_step":"4","worker":0,"tensor":"x","values":{"l2":27.4,"a_limit":20},"measure":"l2","message":"l2 above 20","time":1700000000.25,"event":"open","episode":"1","severity":"error","first_step":"4","first_mode_step":"4","reported_step":"4","reported_mode_step":"4","steps":"1","worst":{"l2":27.4,"a_limit":20},"worst_step":"4","worst_mode_step":"4"}
{"rule":"grad_blowup","type":"expression","step":"8","mode":"TRAIN","mode_step":"6","worker":0,"tensor":"x","values":{"l2":27.4,"a_limit":20},"measure":"l2","message":"l2 above 20","time":1700000001.25,"event":"close","episode":"1","severity":"error","first_step":"4","first_mode_step":"4","reported_step":"4","reported_mode_step":"4","steps":"2","worst":{"l2":49.3,"a_limit":20},"worst_step":"8","worst_mode_step":"6"}
EOF_FINDINGS
cat >"$run/rules-00000.json" <<'EOF_RULES'
{"worker":0,"stopOn":"critical","rules":[{"name":"grad_blowup","type":"expression","severity":"error"}],"captures":[{"rule":"grad_blowup","what":"the stat set (every step)","collection":"rules.stats.all","tensors":"1","examples":["x"]}],"steps":"9","stepsJudged":"9","records":"9","rulesRecords":"3","episodes":"1","diagnostics":["rule dead_relu: tensor_regex matched no tensor, so it never fires"]}
EOF_RULES
# The worst value is the measure's (l2), at its own mode step, though JSON
# sorts the values by name.
expect 0 '^findings: +1 \(grad_blowup 1\)$' inspect "$run"
expect 0 '^  TRAIN steps 4-6 \(global 4-8, 2 steps\) worker 0: grad_blowup \(expression\) \[error\] x: l2 above 20; worst l2 49\.3 at TRAIN step 6 \(global 8\)$' inspect "$run"
expect 0 '^rules: +1 rule\(s\) judged 9 step\(s\) \(training stops on: critical\); 1 episode\(s\)$' inspect "$run"
expect 0 '^ +captured for grad_blowup: the stat set \(every step\) of 1 tensor\(s\) \(x\)$' inspect "$run"
expect 0 '^ +could not judge: rule dead_relu: tensor_regex matched no tensor, so it never fires$' inspect "$run"
runt inspect "$run" --json
check_py "inspect --json episodes and rules" '
import json
j = json.loads(out)
e, = j["episodes"]
assert (e["id"], e["rule"], e["severity"], e["mode"], e["first_step"], e["last_step"],
        e["last_global_step"], e["steps"], e["open"]) == (1, "grad_blowup", "error", "TRAIN", 4, 6,
                                                          8, 2, False), e
assert (e["worst_measure"], e["worst_value"], e["worst_step"]) == ("l2", 49.3, 6), e
r, = j["rules"]
assert r["stop_on"] == "critical" and r["diagnostics"] == [
    "rule dead_relu: tensor_regex matched no tensor, so it never fires"], r
assert j["rules_problems"] == [], j["rules_problems"]
'
# A hostile summary (a FIFO nobody writes) is named, not waited on.
rm "$run/rules-00000.json"
mkfifo "$run/rules-00000.json"
mkfifo "$run/findings.jsonl.fifo"
mv "$run/findings.jsonl" "$work/findings.jsonl.saved"
ln -s findings.jsonl.fifo "$run/findings.jsonl"
out="$(timeout 20 "$tstat" inspect "$run" 2>&1)"
code=$?
if [[ $code != 0 ]]; then
  fail "inspect with FIFOs for findings.jsonl and rules-00000.json exited $code (124: it blocked)"
elif ! grep -Eq 'rules: +summary not read: .*rules-00000\.json: not a regular file' <<<"$out" ||
  ! grep -Eq '^findings: .*findings\.jsonl: not a regular file' <<<"$out"; then
  fail "inspect does not name the FIFOs"
else
  echo "ok: inspect names FIFOs in the run directory and does not block on them"
fi
rm "$run/rules-00000.json" "$run/findings.jsonl" "$run/findings.jsonl.fifo"
mv "$work/findings.jsonl.saved" "$run/findings.jsonl"

# ---- dump
expect 0 '^ +8 +6 +TRAIN +4 +9 +36 +22\.5 +10\.0623 +49\.295 +0 +0 +0$' dump "$run" --tensor x
expect 0 '^tensor x  f32\[4\]  collections: weights' dump "$run" --tensor x
expect 0 '^step +mode_step +mode +l2$' dump "$run" --tensor x --stat l2
runt dump "$run" --tensor x --stat l2 --stat mean --csv
check_py "dump --csv of x (l2, mean)" '
import csv, io, math, sys
text = out
rows = list(csv.reader(io.StringIO(text, newline="")))
assert rows[0] == ["tensor", "step", "mode_step", "mode", "l2", "mean"], rows[0]
want = [(0, 0, "TRAIN"), (2, 2, "TRAIN"), (4, 4, "TRAIN"), (6, 0, "EVAL"), (8, 6, "TRAIN")]
assert [(int(r[1]), int(r[2]), r[3]) for r in rows[1:]] == want, rows
for r in rows[1:]:
    g = int(r[1])
    assert r[0] == "x"
    assert math.isclose(float(r[4]), (g + 1) * math.sqrt(30), rel_tol=1e-15), r
    assert float(r[5]) == 2.5 * (g + 1), r
'
runt dump "$run" --tensor x --csv --mode EVAL
check_py "dump --mode EVAL" '
import csv, io, math
rows = list(csv.reader(io.StringIO(out, newline="")))
assert rows[0][:4] == ["tensor", "step", "mode_step", "mode"] and rows[0][4:] == [
    "count", "min", "max", "mean", "std", "l2", "nan_count", "pos_inf_count", "neg_inf_count"], rows[0]
r, = rows[1:]
assert r[:8] == ["x", "6", "0", "EVAL", "4", "7", "28", "17.5"] and r[10:] == ["0", "0", "0"], r
assert math.isclose(float(r[8]), 7 * math.sqrt(1.25), rel_tol=1e-15), r
assert math.isclose(float(r[9]), 7 * math.sqrt(30), rel_tol=1e-15), r
'
runt dump "$run" --tensor x --csv --mode GLOBAL
check_py "dump --mode GLOBAL has no rows" '
import sys
lines = out.split("\r\n")
assert lines[0].startswith("tensor,step,") and lines[1:] == [""], lines
'
hostile_arg=$'evil "q", n\nl\tt\x1b[1mX \xe2\x80\xaeY \xc3\xa9\xe2\x86\x92'
runt dump "$run" --tensor "$hostile_arg" --csv --stat nan_count --stat pos_inf_count --stat min --stat max
check_py "dump --csv of the hostile name" '
import csv, io, sys
text = out
rows = list(csv.reader(io.StringIO(text, newline="")))
hostile = "evil \"q\", n\nl\tt\x1b[1mX \u202eY \u00e9\u2192"
assert rows[0] == ["tensor", "step", "mode_step", "mode", "nan_count", "pos_inf_count", "min", "max"]
assert len(rows) == 6, rows
for r in rows[1:]:
    assert r[0] == hostile and r[4:] == ["1", "1", "0", "2"], r
assert text.endswith("\r\n") and text.count("\r\n") == 6   # the embedded newline is LF only
'
runt dump "$run" --tensor loss --csv
check_py "dump --csv of the scalar" '
import csv, io, sys
rows = list(csv.reader(io.StringIO(out, newline="")))
assert rows[0] == ["tensor", "step", "mode_step", "mode", "value"], rows[0]
assert [(int(r[1]), float(r[4])) for r in rows[1:]] == [(g, 1 / (g + 1)) for g in (0, 2, 4, 6, 8)], rows
'

# ---- errors
expect 1 "no tensor or scalar 'xx'.*did you mean: 'x'" dump "$run" --tensor xx
expect 1 "no tensor or scalar 'model/block/blok'.*did you mean: 'model/block" dump "$run" --tensor model/block/blok
expect 1 "no tensor or scalar 'zzzzzzzz'" dump "$run" --tensor zzzzzzzz
expect 2 "unknown --stat 'l3' \(valid: count, finite_count, .*, l2, amax" dump "$run" --tensor x --stat l3
expect 2 "unknown --mode 'TRAINING' \(valid: TRAIN, EVAL, PREDICT, GLOBAL\)" dump "$run" --tensor x --mode TRAINING
expect 2 "is a scalar" dump "$run" --tensor loss --stat l2
expect 2 "tensor.*required|--tensor is required" dump "$run"
expect 1 'no such run directory' inspect "$work/nope"
expect 1 'no such run directory' dump "$work/nope" --tensor x
expect 1 'no worker 3' inspect "$run" --worker 3
# A damaged segment is skipped with a warning naming it; the command still works.
cp -r "$run" "$work/damaged"
seg="$(ls "$work"/damaged/worker-00000/seg-*.h5 | head -1)"
printf 'garbage' | dd of="$seg" bs=1 seek=2000 conv=notrunc 2>/dev/null
# Opened from the worker catalog, the run is listed; the records that cannot
# be read are said.
expect 0 "warning: corruption: .*seg-0+\.h5: checksum mismatch" inspect "$work/damaged"
# Opened from the worker catalog, the run lists x, and its series is read
# from the chunks that hold it, each checked against its CRC: intact, the
# damage being elsewhere in the file.
expect 0 "^ +6 +0 +EVAL +4 +7 +28" dump "$work/damaged" --tensor x
# Without the catalog the segment is read when the run opens: skipped, and
# (the run's only segment) nothing of x is left.
rm "$work/damaged/worker-00000/catalog"
expect 0 "warning: corruption: 1 file\(s\) skipped \(damaged.*seg-0+\.h5: checksum mismatch" inspect "$work/damaged"
expect 1 "warning: corruption: 1 file\(s\) skipped" dump "$work/damaged" --tensor x
expect 1 "no tensor or scalar 'x'" dump "$work/damaged" --tensor x
mkdir -p "$work/empty"
expect 1 'holds no tstat run' inspect "$work/empty"
# A segment whose HDF5 metadata crashes libhdf5 itself (h5py too) is read in a
# child process first: skipped with a warning naming it; the other segments stay.
cp -r "$run" "$work/crafted"
crafted="$(dirname "$0")/../tests/io/data/crash-libhdf5-shared-message.h5"
"$py" - "$crafted" "$work/crafted/worker-00000/seg-000000000099.h5" <<'PY'
import sys, zlib
data = open(sys.argv[1], "rb").read()
head = b"TSTAT-SEGMENT 1\nlength %d\ncrc32 %08x\n" % (512 + len(data), zlib.crc32(data))
open(sys.argv[2], "wb").write(head + b"\0" * (512 - len(head)) + data)
PY
expect 0 "seg-000000000099\.h5: reading it (killed|ended) a child process" inspect "$work/crafted"
expect 0 "^x +8 +TRAIN 6 +4 +9 +36" inspect "$work/crafted"
# Every segment gone: `check` judged nothing, which is not a pass.
cp -r "$run" "$work/nosegments"
rm -f "$work"/nosegments/worker-00000/seg-*.h5
expect 2 'holds no step to judge' check "$work/nosegments"
# A copy of a segment under another number is skipped, not read twice.
cp -r "$run" "$work/copied"
seg="$(ls "$work"/copied/worker-00000/seg-*.h5 | head -1)"
cp "$seg" "$work/copied/worker-00000/seg-000000000099.h5"
expect 0 'seg-000000000099\.h5: holds segment 0 of rank 0 \(a copied or renamed file\?\)' inspect "$work/copied"

if ((failures > 0)); then
  echo "$failures inspect/dump check(s) failed"
  exit 1
fi
echo "all inspect/dump checks passed"
