#!/usr/bin/env python3
"""Builds the tstat Python package's C++ module (_tstat) for the Python that
runs this script, against a libtstat.so that is already built: what the GPU
bundle does on a GPU machine whose Python is not the one the bundle's own
module was built for (Debian 12's 3.11). A CUDA PyTorch there usually comes
with its own Python; its wheel ships pybind11's headers, and nvcc's host
compiler is the C++ compiler.

    gpu_build_module.py --src DIR --lib LIBTSTAT --out DIR [--rpath RPATH]
                        [--pybind11 DIR] [--jobs N] [--timeout S]

--src      a folder holding python/src/*.cc and include/tstat/ (the
           repository root, or the bundle's python/module-src/)
--lib      the libtstat.so to link (its SONAME is what the module needs)
--out      where _tstat<this Python's extension suffix> is written
--rpath    the module's run path (the bundle: $ORIGIN/../../lib)
--pybind11 pybind11's include folder (default: torch's, the pybind11
           package's, or /usr/include, the first that has pybind11/pybind11.h)

The compiler is $CXX, else c++, else g++. Exit 0 with the module's path on
the last line; 1 with the reason (no Python.h, no pybind11, no compiler, a
failed compile) on stderr."""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path


class BuildError(Exception):
    pass


def extension_suffix():
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def python_include():
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        raise BuildError(f"{include}/Python.h is missing: this Python "
                         f"({sys.executable}) has no development headers")
    return include


def pybind11_include(given=None):
    """pybind11's headers: `given`, else torch's wheel's (found without
    importing torch, which takes seconds), the pybind11 package's, or the
    system's."""
    candidates = [Path(given)] if given else []
    if not given:
        spec = importlib.util.find_spec("torch")
        for location in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(Path(location) / "include")
        if importlib.util.find_spec("pybind11") is not None:
            import pybind11
            candidates.append(Path(pybind11.get_include()))
        candidates.append(Path("/usr/include"))
    for c in candidates:
        if (c / "pybind11" / "pybind11.h").is_file():
            return c
    raise BuildError("no pybind11 headers in " + ", ".join(str(c) for c in candidates))


def compiler():
    for name in (os.environ.get("CXX"), "c++", "g++"):
        path = shutil.which(name) if name else None
        if path:
            return path
    raise BuildError("no C++ compiler ($CXX, c++ or g++) on PATH")


def build(src, lib, out, rpath=None, pybind11=None, jobs=None, timeout=240):
    """Compiles python/src/*.cc under `src` and links them with `lib` into
    out/_tstat<suffix>; returns its path. Raises BuildError."""
    src, lib, out = Path(src), Path(lib), Path(out)
    sources = sorted((src / "python" / "src").glob("*.cc"))
    if not sources:
        raise BuildError(f"no module sources in {src}/python/src")
    if not (src / "include" / "tstat").is_dir():
        raise BuildError(f"no tstat headers in {src}/include/tstat")
    if not lib.is_file():
        raise BuildError(f"{lib} is not a file")
    cxx = compiler()
    includes = [f"-I{p}" for p in (src, src / "include", python_include(), pybind11_include(pybind11))]
    flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-DNDEBUG"]
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"_tstat{extension_suffix()}"
    with tempfile.TemporaryDirectory() as tmp:
        objects = [Path(tmp) / (s.stem + ".o") for s in sources]
        pending = list(zip(sources, objects))
        running = []
        jobs = max(1, jobs or os.cpu_count() or 1)
        while pending or running:
            while pending and len(running) < jobs:
                s, o = pending.pop(0)
                running.append((s, subprocess.Popen([cxx, *flags, *includes, "-c", str(s), "-o", str(o)],
                                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                    text=True)))
            s, p = running.pop(0)
            try:
                output, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                raise BuildError(f"compiling {s.name} took over {timeout} s") from None
            if p.returncode != 0:
                raise BuildError(f"compiling {s.name} failed:\n{output[-4000:]}")
        link = [cxx, "-shared", *[str(o) for o in objects], str(lib), "-o", str(target)]
        if rpath:
            link.insert(2, f"-Wl,-rpath,{rpath}")
        done = subprocess.run(link, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise BuildError(f"linking {target.name} failed:\n{done.stdout[-4000:]}")
    return target


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rpath", default=None)
    p.add_argument("--pybind11", default=None)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--timeout", type=float, default=240)
    a = p.parse_args()
    try:
        target = build(a.src, a.lib, a.out, a.rpath, a.pybind11, a.jobs, a.timeout)
    except (BuildError, OSError, subprocess.SubprocessError) as e:
        print(f"gpu_build_module.py: {e}", file=sys.stderr)
        return 1
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
