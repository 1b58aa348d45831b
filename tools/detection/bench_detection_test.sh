#!/usr/bin/env bash
# Test of `tstat bench detection` (ctest tstat.tools.bench_detection, label
# torch): the short matrix (--quick: one seed, each fault once, one healthy
# run per architecture) meets the target with the default configuration -
# every fault found by its rule within 5 steps of manifesting, every healthy
# run without a finding - and its JSON says so field by field; then bad input.
# Usage: bench_detection_test.sh TSTAT PYTHON
TSTAT="$1"
PY="$2"
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../test_lib.sh"

"$TSTAT" bench detection --quick --json --out "$T/runs" >"$T/out.jsonl" 2>"$T/err.txt"
rc=$?
[[ $rc == 0 ]] || { tail -40 "$T/out.jsonl" "$T/err.txt" >&2; fail "bench detection --quick exited $rc"; }
"$PY" - "$T/out.jsonl" <<'PYEOF' || fail "the detection results are wrong (above)"
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cases = [r for r in rows if r["kind"] == "case"]
summary = rows[-1]
errors = []
if summary["kind"] != "summary":
    errors.append("the last line is not the summary")
faults = {c["fault"] for c in cases if c["fault"] != "healthy"}
want = {"vanishing_gradient", "exploding_gradient", "dead_relu", "saturated_activation",
        "poor_initialization", "loss_not_decreasing", "overfitting", "class_imbalance",
        "nan_from_op", "tiny_update"}
if faults != want:
    errors.append(f"fault classes {sorted(faults)}")
archs = {c["arch"] for c in cases if c["fault"] == "healthy" and c["pretrain_steps"] == 0}
if len(archs) < 4:
    errors.append(f"healthy architectures {sorted(archs)}")
resumed = [c["name"] for c in cases if c["pretrain_steps"] > 0]
if len(resumed) != 2 or not all(n.startswith("resumed/") for n in resumed):
    errors.append(f"resumed cases {resumed}")
# Updates left out on purpose: overflows under loss scaling (several, in a row
# at the start) and accumulating micro-batches; the loop below wants them clean.
scaled = [c for c in cases if c["loss_scale"] > 0]
if len(scaled) != 1 or scaled[0]["updates_skipped"] < 3:
    errors.append(f"loss-scaled cases {[(c['name'], c['updates_skipped']) for c in scaled]}")
if [c["accumulate"] for c in cases if c["accumulate"] > 1] != [4]:
    errors.append("no case with gradient accumulation")
for c in cases:
    n = c["name"]
    if c["fault"] == "healthy":
        if c["findings"] or c["oracle_flags"] or c["stopped"] or not c["passed"]:
            errors.append(f"{n}: not clean: {c['verdict']}")
        if c["steps_run"] != c["steps_planned"]:
            errors.append(f"{n}: ran {c['steps_run']} of {c['steps_planned']}")
        if c["pretrain_steps"] > 0:
            # Resumed: its loss began learned (below 3/4 of chance, ln 10 for the
            # ten digits), which is what the run checks against false alarms.
            if not c["first_loss"] < 0.75 * math.log(10):
                errors.append(f"{n}: the resumed run's loss began at {c['first_loss']}")
        elif not c["last_loss"] < 0.7 * c["first_loss"]:
            errors.append(f"{n}: healthy loss {c['first_loss']} -> {c['last_loss']}")
        continue
    m, f = c["manifest_step"], c["fired_step"]
    if m is None or f is None:
        errors.append(f"{n}: manifest {m}, fired {f}")
        continue
    if not (c["fault_step"] <= m and f - m <= summary["max_delay_steps"]):
        errors.append(f"{n}: fault at {c['fault_step']}, manifest {m}, fired {f}")
    if not any(x["rule"] == c["intended_rule"] for x in c["findings"]):
        errors.append(f"{n}: {c['intended_rule']} not among the findings")
    if any(x["step"] < c["fault_step"] for x in c["findings"]):
        errors.append(f"{n}: a finding before the fault")
    if not c["passed"]:
        errors.append(f"{n}: {c['verdict']}")
    # Auto-stop: a critical finding ends the run within two steps.
    crit = [x["step"] for x in c["findings"] if x["severity"] == "critical"]
    if crit and (not c["stopped"] or c["steps_run"] > min(crit) + 2):
        errors.append(f"{n}: ran {c['steps_run']} steps after a critical finding at {min(crit)}")
if (summary["faults"], summary["faults_found_in_time"]) != (10, 10) or \
        summary["healthy"] != summary["healthy_clean"] or not summary["passed"]:
    errors.append(f"summary {summary}")
print("\n".join(errors))
sys.exit(1 if errors else 0)
PYEOF
[[ -d "$T/runs" ]] || fail "--out kept no runs"

# --- bad input
"$TSTAT" bench detection --quick --out "$T/runs" >"$T/out.txt" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "an existing --out exited $rc, not 2"
grep -q "already exists" "$T/out.txt" || { cat "$T/out.txt" >&2; fail "no clear message for --out"; }
"$TSTAT" bench detection --only no_such_case/ >"$T/out.txt" 2>&1
rc=$?
[[ $rc == 2 ]] || { cat "$T/out.txt" >&2; fail "--only matching nothing exited $rc, not 2"; }
"$TSTAT" bench detection --steps 10 >"$T/out.txt" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "--steps 10 (below the horizon) exited $rc, not 2"
echo "bench_detection_test: ok"
