#!/usr/bin/env python3
"""Fails on an #include that points up or across the layers of the tree.

The stages, bottom to top (docs/architecture.md draws them): the public
headers (include/tstat), proto, kernels, io, rules, host, python, benchmarks,
tools.
A file may include its own stage and those below it. Inside io and rules the
folders are layered too: io's codec and h5 at the bottom (h5 may use codec),
then format, then write and read side by side (neither includes the other),
tensorboard (event files) beside them and export (a run read, written as
event files) above read and tensorboard;
rules' engine, then tensor and run side by side, then runtime; kernels' top
(the shared maths) and plan/ (launch plans the CUDA backend and its CPU
emulation share), with cpu/ and cuda/ never including each other; host's
config, device and pipeline side by side, then session, then c_api and torch.

Usage: check_layers.py SOURCE_DIR   (exit 1 and one line per violation)
       check_layers.py --self-test    (the check catches what it should)
"""
import os
import re
import sys

STAGES = ["tstat", "proto", "kernels", "io", "rules", "host", "python", "benchmarks", "tools"]
FOLDERS = {  # stage -> {folder ("" for the stage's own top): what it may include}
    "kernels": {
        "": {"", "plan"},
        "plan": {"", "plan"},
        "cpu": {"", "cpu"},
        "cuda": {"", "plan", "cuda"},
    },
    "io": {
        "codec": {"codec"},
        "h5": {"codec", "h5"},
        "format": {"codec", "h5", "format"},
        "write": {"codec", "h5", "format", "write"},
        "read": {"codec", "h5", "format", "read"},
        "tensorboard": {"h5", "tensorboard"},
        "export": {"codec", "h5", "format", "read", "tensorboard", "export"},
    },
    "host": {
        "config": {"config"},
        "device": {"device"},
        "pipeline": {"pipeline"},
        "session": {"config", "device", "pipeline", "session"},
        "c_api": {"config", "device", "pipeline", "session", "c_api"},
        "torch": {"config", "device", "pipeline", "session", "torch"},
    },
    "rules": {
        "engine": {"engine"},
        "tensor": {"engine", "tensor"},
        "run": {"engine", "run"},
        "runtime": {"engine", "tensor", "run", "runtime"},
    },
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".h", ".cc", ".cu", ".cuh")


def stage_of_file(rel):
    top = rel.split("/", 1)[0]
    if top == "include":
        return "tstat"
    return top if top in STAGES else None


def stage_of_include(path):
    top = path.split("/", 1)[0]
    return top if top in STAGES else None


def check(root):
    problems = []
    checked = 0
    for stage_dir in ["include"] + STAGES[1:]:
        base = os.path.join(root, stage_dir)
        for dirpath, _, names in os.walk(base):
            for name in names:
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                stage = stage_of_file(rel)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                checked += 1
                for inc in INCLUDE.findall(text):
                    target = stage_of_include(inc)
                    if target is None:
                        continue  # a system or third-party header, or tests/
                    if STAGES.index(target) > STAGES.index(stage):
                        problems.append(f"{rel}: includes {inc} ({target} is above {stage})")
                        continue
                    if stage in FOLDERS and target == stage:
                        allowed = FOLDERS[stage]
                        parts_from, parts_to = rel.split("/"), inc.split("/")
                        src = parts_from[1] if len(parts_from) >= 3 else ""
                        dst = parts_to[1] if len(parts_to) >= 3 else ""
                        if src not in allowed:
                            problems.append(f"{rel}: {stage}/{src} is not a known folder"
                                            if src else
                                            f"{rel}: {stage} files live in its folders")
                        elif dst not in allowed[src]:
                            problems.append(
                                f"{rel}: includes {inc} ({stage}/{src} may not use {stage}/{dst})")
    return checked, problems


def self_test():
    """A tree with known violations, and one without."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        def put(rel, text=""):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)

        for i in range(100):
            put(f"rules/filler_{i}.cc", '#include "io/read/trial_impl.h"\n#include <vector>\n')
        put("io/read/reader.cc", '#include "io/write/writer.h"\n#include "io/format/x.h"\n')
        put("io/h5/wrap.cc", '#include "io/format/schema.h"\n')
        put("kernels/k.cc", '#include "host/session/session_impl.h"\n')
        put("include/tstat/api.h", '#include "io/read/trial_impl.h"\n')
        put("io/loose.cc", '#include "io/h5/h.h"\n')
        put("rules/engine/e.cc", '#include "rules/runtime/actions.h"\n')
        put("host/pipeline/p.cc", '#include "host/config/collection_set.h"\n')
        put("kernels/cpu/c.cc", '#include "kernels/cuda/cuda_backend.h"\n#include "kernels/hd.h"\n')
        put("rules/tensor/t.cc", '#include "rules/run/loss.h"\n#include "rules/engine/e.h"\n')
        _, problems = check(root)
        want = ["io/read/reader.cc: includes io/write/writer.h", "io/h5/wrap.cc: includes io/format",
                "kernels/k.cc: includes host/session/session_impl.h", "include/tstat/api.h: includes io/",
                "io/loose.cc: io files live in its folders",
                "rules/engine/e.cc: includes rules/runtime/actions.h",
                "host/pipeline/p.cc: includes host/config/collection_set.h",
                "kernels/cpu/c.cc: includes kernels/cuda/cuda_backend.h",
                "rules/tensor/t.cc: includes rules/run/loss.h"]
        missing = [w for w in want if not any(p.startswith(w) for p in problems)]
        if missing or len(problems) != len(want):
            print("self-test failed: missing", missing, "got", problems)
            return 1
    print("self-test: every planted violation found, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    checked, problems = check(root)
    for p in problems:
        print("layer violation:", p)
    if checked < 100:
        print(f"only {checked} files found under {root}: wrong directory?")
        return 1
    print(f"{checked} files checked, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
