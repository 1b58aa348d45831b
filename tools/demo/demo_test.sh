#!/usr/bin/env bash
# End-to-end test of `tstat demo` (ctest tstat.tools.demo, label torch): runs
# the short plan (--quick) with the default configuration and checks, per
# scenario, that the expected rules fired, that the healthy run is clean,
# that auto-stop ended each run with a critical finding within two steps of
# it (and no other run), that the JSON parses, that `tstat check` re-judges
# the runs on disk the same way (episode by episode); then bad input.
# Usage: demo_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../test_lib.sh"

# --- the matrix
"$TSTAT" demo --quick --json --out "$T/runs" >"$T/out.jsonl" 2>"$T/err.txt" ||
  { rc=$?; cat "$T/err.txt" >&2; fail "tstat demo --quick --json exited $rc"; }
"$PY" - "$T/out.jsonl" <<'PYEOF' || fail "the JSON results are wrong (above)"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
names = [r["scenario"] for r in rows]
want = ["healthy", "vanishing_gradient", "exploding_gradient", "dead_relu", "tanh_saturation",
        "poor_initialization", "learning_rate_zero", "overfitting", "class_imbalance",
        "nan_log_zero"]
assert names == want, names
errors = []
for r in rows:
    s = r["scenario"]
    for key in ("expected_rules", "found_rules", "first_finding_step", "steps_run", "steps_planned"):
        if key not in r:
            errors.append(f"{s}: no {key}")
    if not 0 < r["steps_run"] <= r["steps_planned"]:
        errors.append(f"{s}: steps_run {r['steps_run']} of {r['steps_planned']}")
    if s == "healthy":
        if r["found_rules"] or r["first_finding_step"] is not None:
            errors.append(f"healthy: found {r['found_rules']}")
        if r["steps_run"] != r["steps_planned"]:
            errors.append("healthy: stopped early")
        if not r["last_loss"] < 0.5 * r["first_loss"]:
            errors.append(f"healthy: loss {r['first_loss']} -> {r['last_loss']} did not fall")
        continue
    if not r["expected_rules"]:
        errors.append(f"{s}: no expected rule")
    missing = set(r["expected_rules"]) - set(r["found_rules"])
    if missing:
        errors.append(f"{s}: expected {sorted(missing)} not found (found {r['found_rules']})")
    first = r["first_finding_step"]
    if first is None:
        errors.append(f"{s}: no first_finding_step")
        continue
    # Auto-stop: a critical episode at TRAIN step k stops training before
    # step k + 2 begins; without one, training runs to the end.
    critical = [f["mode_step"] for f in r["findings"]
                if f["severity"] == "critical" and f["mode"] == "TRAIN"]
    if critical:
        if not r["stopped"] or r["steps_run"] > min(critical) + 2:
            errors.append(f"{s}: ran {r['steps_run']} steps after a critical finding at {min(critical)}")
    elif r["stopped"] or r["steps_run"] != r["steps_planned"]:
        errors.append(f"{s}: stopped ({r['steps_run']} steps) without a critical finding")
nan = next(r for r in rows if r["scenario"] == "nan_log_zero")
origin = next(f for f in nan["findings"] if f["rule"] == "nan_origin")
if origin["tensor"] != "head.log_probs_output":
    errors.append(f"nan_origin named {origin['tensor']}, not the log of the softmax")
if errors:
    print("\n".join(errors))
    sys.exit(1)
PYEOF

# --- the runs on disk, judged again out of process by `tstat check`
for s in healthy vanishing_gradient exploding_gradient dead_relu tanh_saturation \
    poor_initialization learning_rate_zero overfitting class_imbalance nan_log_zero; do
  [[ -d "$T/runs/$s/worker-00000" ]] || fail "no run in $T/runs/$s"
done
"$TSTAT" check "$T/runs/healthy" >"$T/check.txt" 2>&1 ||
  { cat "$T/check.txt" >&2; fail "tstat check of the healthy run found something"; }
"$TSTAT" check "$T/runs/dead_relu" >"$T/check.txt" 2>&1
rc=$?
[[ $rc == 1 ]] || { cat "$T/check.txt" >&2; fail "tstat check of dead_relu exited $rc, not 1"; }
grep -q "dead_relu" "$T/check.txt" || fail "tstat check of dead_relu did not report dead_relu"

# --- in-process and out-of-process judgements agree: the episodes the
# session logged (inspect --json reads RUN/findings.jsonl) are the ones
# `tstat check --json` finds in the same run, field by field.
for s in healthy vanishing_gradient exploding_gradient dead_relu tanh_saturation \
    poor_initialization learning_rate_zero overfitting class_imbalance nan_log_zero; do
  "$TSTAT" inspect --json "$T/runs/$s" >"$T/inspect.json" 2>/dev/null ||
    fail "tstat inspect --json $s failed"
  "$TSTAT" check --json "$T/runs/$s" >"$T/check.json" 2>/dev/null
  [[ $? == 0 || $? == 1 ]] || true
  "$PY" - "$T/inspect.json" "$T/check.json" "$s" <<'PYEOF' || fail "$s: in-process and tstat check episodes differ (above)"
import json, math, sys
logged = json.load(open(sys.argv[1]))["episodes"]
judged = json.load(open(sys.argv[2]))["episodes"]
keys = ["id", "rule", "type", "worker", "tensor", "severity", "mode", "first_step",
        "first_global_step", "last_step", "last_global_step", "reported_step",
        "reported_global_step", "steps", "open", "worst_measure", "worst_step",
        "worst_global_step", "message"]
if len(logged) != len(judged):
    print(f"{sys.argv[3]}: {len(logged)} episodes logged, {len(judged)} judged by tstat check")
    sys.exit(1)
for a, b in zip(logged, judged):
    diff = [k for k in keys if a[k] != b[k]]
    wa, wb = a["worst_value"], b["worst_value"]  # null: NaN
    if (wa is None) != (wb is None) or (wa is not None and not math.isclose(wa, wb, rel_tol=1e-12)):
        diff.append("worst_value")
    if diff:
        print(f"{sys.argv[3]}: episode {a['id']} differs in {diff}:\n  {a}\n  {b}")
        sys.exit(1)
PYEOF
done

# --- bad input
touch "$T/runs/healthy/marker"
"$TSTAT" demo --quick --out "$T/runs" --scenario healthy >"$T/out.txt" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "an existing --out without --force exited $rc, not 2"
grep -q "already exists.*--force" "$T/out.txt" || { cat "$T/out.txt" >&2; fail "no clear message"; }
[[ -e "$T/runs/healthy/marker" ]] || fail "the existing run was touched without --force"

"$TSTAT" demo --quick --out "$T/other" --scenario healthy --scenario no_such_fault >"$T/out.txt" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "an unknown scenario exited $rc, not 2"
grep -q 'unknown scenario "no_such_fault"; valid scenarios: healthy, vanishing_gradient' "$T/out.txt" ||
  { cat "$T/out.txt" >&2; fail "the unknown scenario message does not list the valid ones"; }
[[ ! -e "$T/other" ]] || fail "an unknown scenario still created --out"

# --force replaces only the scenarios that run.
touch "$T/runs/dead_relu/marker"
"$TSTAT" demo --out "$T/runs" --force --scenario healthy --steps 3 >"$T/out.txt" 2>&1 ||
  { cat "$T/out.txt" >&2; fail "--force did not run"; }
[[ ! -e "$T/runs/healthy/marker" ]] || fail "--force did not replace the healthy run"
[[ -e "$T/runs/dead_relu/marker" ]] || fail "--force removed a scenario that did not run"
grep -q "3/3" "$T/out.txt" || { cat "$T/out.txt" >&2; fail "--steps 3 was not the plan"; }
# A missing dataset falls back to the synthetic digits, with a message.
"$TSTAT" demo --out "$T/synthetic" --dataset "$T/no_such_digits.csv.gz" --scenario healthy \
  --scenario dead_relu --steps 30 >"$T/out.txt" 2>&1 ||
  { cat "$T/out.txt" >&2; fail "the synthetic fallback did not run cleanly"; }
grep -q "no_such_digits.csv.gz does not exist.*using synthetic digits" "$T/out.txt" ||
  { cat "$T/out.txt" >&2; fail "no message about the synthetic fallback"; }
echo "demo_test: ok"
