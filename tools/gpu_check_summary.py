#!/usr/bin/env python3
"""Summary of a GPU check (tools/gpu-check.sh): summary.json and summary.md.

    python3 gpu_check_summary.py OUT_DIR [BUNDLE_DIR]

Reads what gpu-check.sh wrote into OUT_DIR (device.json, steps.tsv,
tests/*.json, sanitizer/*.log, bench/stats.jsonl, bench/capture_cuda.json) and
marks the targets of docs/gpu.md met or not. Standard library only: the GPU
machines have no packages of ours.
"""
import json
import os
import re
import sys

# The targets of docs/gpu.md (figures, not tests).
F32_TARGET = 0.85  # of the read bandwidth, f32 tensors >= 256 MiB
BF16_TARGET = 0.70  # the same for bf16
SMALL_TARGET = 0.50  # 10,000 x 1,000 f32 against the large-tensor throughput
END_STEP_TARGET_S = 50e-6  # EndStep host time, 1,000 CUDA tensors


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_json_lines(path):
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return rows


def read_steps(out):
    steps = []
    try:
        with open(os.path.join(out, "steps.tsv"), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    steps.append({"step": parts[0], "status": parts[1],
                                  "seconds": int(parts[2]) if parts[2].isdigit() else None,
                                  "note": parts[3] if len(parts) > 3 else ""})
    except OSError:
        pass
    return steps


def gtest_results(out):
    """Per test binary: passed, failed, skipped and the failing test names."""
    results = {}
    folder = os.path.join(out, "tests")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".json"):
            continue
        doc = read_json(os.path.join(folder, name))
        binary = name[:-len(".json")]
        if not doc:
            results[binary] = {"passed": 0, "failed": 0, "skipped": 0, "failures": ["no report"]}
            continue
        passed = failed = skipped = 0
        failures = []
        for suite in doc.get("testsuites", []):
            for test in suite.get("testsuite", []):
                full = suite.get("name", "") + "." + test.get("name", "")
                if test.get("failures"):
                    failed += 1
                    failures.append(full)
                elif test.get("result") == "SKIPPED":
                    skipped += 1
                else:
                    passed += 1
        results[binary] = {"passed": passed, "failed": failed, "skipped": skipped,
                           "failures": failures}
    return results


def sanitizer_results(out):
    results = {}
    folder = os.path.join(out, "sanitizer")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".log"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        # memcheck and synccheck: "ERROR SUMMARY: N errors"; racecheck:
        # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
        m = (re.search(r"ERROR SUMMARY: (\d+) error", text) or
             re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text))
        results[name[:-len(".log")]] = int(m.group(1)) if m else None
    return results


def targets(device, stats, capture, capture_separate, sanitizers):
    rows = []

    def add(name, value, target, met, unit=""):
        rows.append({"target": name, "value": value, "goal": target, "met": met, "unit": unit})

    read_bw = (device or {}).get("read_gbps")
    for dtype, goal in (("f32", F32_TARGET), ("bf16", BF16_TARGET)):
        for r in stats:
            if r.get("dtype") != dtype or r.get("tensors") != 1 or r.get("bytes", 0) < 256 << 20:
                continue
            ratio = r.get("ratio_to_read_bw")
            add(f"{r['case']}: stat set vs read kernel (same run)", ratio, goal,
                ratio is not None and ratio >= goal)
            if read_bw:
                add(f"{r['case']}: stat set vs `bench device` read", r["gbps"] / read_bw, goal,
                    r["gbps"] / read_bw >= goal)
    large = [r for r in stats if r.get("dtype") == "f32" and r.get("tensors") == 1
             and r.get("bytes", 0) >= 256 << 20]
    small = [r for r in stats if r.get("tensors") == 10000]
    if large and small:
        best_large = max(r["gbps"] for r in large)
        v = small[0]["gbps"] / best_large
        add("10,000 x 1,000 f32 vs large-tensor throughput", v, SMALL_TARGET, v >= SMALL_TARGET)
    if capture:
        v = capture.get("end_step_s")
        add("EndStep host time, 1,000 CUDA tensors", v, END_STEP_TARGET_S,
            v is not None and v <= END_STEP_TARGET_S, "s")
        add("EndStep returns while the GPU is busy", capture.get("returned_while_busy"), True,
            capture.get("returned_while_busy") is True)
    if capture_separate:
        v = capture_separate.get("end_step_s")
        add("EndStep host time, 1,000 CUDA tensors in 1,000 allocations", v, END_STEP_TARGET_S,
            v is not None and v <= END_STEP_TARGET_S, "s")
    if sanitizers:
        errors = sum(v for v in sanitizers.values() if v is not None)
        unknown = [k for k, v in sanitizers.items() if v is None]
        add("compute-sanitizer reports", errors, 0, errors == 0 and not unknown)
    return rows


def fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def markdown(s):
    d = s["device"] or {}
    lines = ["# GPU check", ""]
    lines.append(f"- bundle: {s['bundle'] or 'unknown'}")
    if d:
        lines.append(f"- device: {d.get('name')} (compute {d.get('compute_capability')}), "
                     f"{d.get('sm_count')} SMs, {d.get('memory_bytes', 0) / 2**30:.0f} GiB, "
                     f"driver {d.get('driver_version')}, runtime {d.get('runtime_version')}")
        lines.append(f"- clocks: SM {d.get('clock_khz', 0) / 1e3:.0f} MHz, memory "
                     f"{d.get('memory_clock_khz', 0) / 1e3:.0f} MHz, bus {d.get('bus_width_bits')} bits")
        lines.append(f"- bandwidth: read kernel {fmt(d.get('read_gbps'))} GB/s (best "
                     f"{fmt(d.get('best_read_gbps'))}), device copy {fmt(d.get('copy_gbps'))} GB/s, "
                     f"theoretical {fmt(d.get('theoretical_gbps'))} GB/s")
    else:
        lines.append("- device: none usable (see device.json.err)")
    lines.append(f"- all tests passed, no sanitizer errors: {s['all_passed']}")
    lines += ["", "## Targets", "", "| target | value | goal | met |", "|---|---|---|---|"]
    for t in s["targets"]:
        lines.append(f"| {t['target']} | {fmt(t['value'])}{t['unit']} | {fmt(t['goal'])}{t['unit']} "
                     f"| {'yes' if t['met'] else 'NO'} |")
    lines += ["", "## Tests", "", "| binary | passed | failed | skipped |", "|---|---|---|---|"]
    for name, r in s["tests"].items():
        lines.append(f"| {name} | {r['passed']} | {r['failed']} | {r['skipped']} |")
        for f in r["failures"][:20]:
            lines.append(f"| &nbsp;&nbsp;failed: {f} | | | |")
    lines += ["", "## Sanitizers (reduced sizes)", "", "| run | errors |", "|---|---|"]
    for name, errors in s["sanitizers"].items():
        lines.append(f"| {name} | {'no summary' if errors is None else errors} |")
    lines += ["", "## Stat-set throughput (CUDA backend)", "",
              "| case | GB/s | read kernel GB/s | ratio |", "|---|---|---|---|"]
    for r in s["stats"]:
        lines.append(f"| {r.get('case')} | {fmt(r.get('gbps'))} | {fmt(r.get('read_bw_gbps'))} "
                     f"| {fmt(r.get('ratio_to_read_bw'))} |")
    for c in (s["capture"], s.get("capture_separate"), s.get("capture_rules")):
        if not c:
            continue
        needs = ", with the in-process rules" if c.get("in_process_rules") else ""
        lines += ["", f"## Capture of CUDA tensors ({c.get('allocations')} allocation(s){needs})", "",
                  f"{c.get('tensors')} tensors x {c.get('elements')} f32, {c.get('steps')} steps: "
                  f"EndStep median {c.get('end_step_s', 0) * 1e6:.1f} us (p90 "
                  f"{c.get('end_step_p90_s', 0) * 1e6:.1f}, max {c.get('end_step_max_s', 0) * 1e6:.1f}); "
                  f"behind a {fmt(c.get('busy_ms'))} ms kernel {c.get('busy_end_step_s', 0) * 1e6:.1f} us, "
                  f"returned before it ended: {c.get('returned_while_busy')}; device time per step "
                  f"{c.get('device_step_s', 0) * 1e6:.1f} us."]
    lines += ["", "## Steps", "", "| step | status | s | note |", "|---|---|---|---|"]
    for st in s["steps"]:
        lines.append(f"| {st['step']} | {st['status']} | {st['seconds']} | {st['note']} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    bundle = sys.argv[2] if len(sys.argv) > 2 else None
    manifest = None
    if bundle:
        try:
            with open(os.path.join(bundle, "MANIFEST"), encoding="utf-8") as f:
                manifest = f.readline().strip()
        except OSError:
            pass
    s = {
        "bundle": manifest,
        "device": read_json(os.path.join(out, "device.json")),
        "steps": read_steps(out),
        "tests": gtest_results(out),
        "sanitizers": sanitizer_results(out),
        "stats": read_json_lines(os.path.join(out, "bench", "stats.jsonl")),
        "capture": read_json(os.path.join(out, "bench", "capture_cuda.json")),
        "capture_separate": read_json(os.path.join(out, "bench", "capture_cuda_separate.json")),
        "capture_rules": read_json(os.path.join(out, "bench", "capture_cuda_rules.json")),
    }
    s["targets"] = targets(s["device"], s["stats"], s["capture"], s["capture_separate"],
                           s["sanitizers"])
    test_failures = sum(r["failed"] for r in s["tests"].values())
    failed_steps = [st for st in s["steps"] if st["status"] not in ("ok", "skipped")]
    sanitizer_errors = [k for k, v in s["sanitizers"].items() if v != 0]
    s["all_passed"] = bool(s["device"]) and bool(s["tests"]) and test_failures == 0 \
        and not failed_steps and not sanitizer_errors
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(s, f, indent=1)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(markdown(s))
    print(markdown(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
