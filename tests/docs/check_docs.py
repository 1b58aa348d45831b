# Checks the user documentation (README.md, docs/*.md) against the code:
#   - every relative link points at a file that exists, and every #anchor at
#     a heading of that page (GitHub's slugs);
#   - every example runs or is accepted by tstat itself:
#       json    session configs are created by libtstat.so (C API, dry run);
#               rules configs (and single rules) by `tstat check`; the rest
#               must parse
#       python  runs against a real run (`run`, `path` of one of its
#               segments, the variables an excerpt names)
#       cpp     compiled against include/ and libtstat.so and run on that run
#       cmake   every command is in the install-consumer project CI builds
#       sh, and "$ " lines of transcripts: the program exists; for
#               `tstat SUB`, the subcommand exists and its --help lists
#               every flag the line uses
#   Blocks marked "<!-- path -->" are copies of tested files
#   (readme_example_sync) and are skipped here.
# With --self-test, checks instead that a page with one broken thing of each
# kind fails with each of them.
# Usage: python3 check_docs.py SOURCE_DIR TSTAT_CLI LIBTSTAT_SO README_EXAMPLE_BIN WORK_DIR [--self-test]
import ctypes
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import unicodedata

SOURCE, TSTAT, LIBTSTAT, README_EXAMPLE, WORK = sys.argv[1:6]
SELF_TEST = sys.argv[6:] == ["--self-test"]
failures = []
checked = {}  # kind of block -> how many


def fail(where, message):
    failures.append(f"{where}: {message}")


def pages():
    return [os.path.join(SOURCE, "README.md")] + sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md")))


def rel(path):
    return os.path.relpath(path, SOURCE)


# ---------------------------------------------------------------- blocks


def blocks(path):
    """(line, language, text, marked) of each fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            marked = i > 0 and lines[i - 1].startswith("<!--")
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((i + 1, lang, "\n".join(lines[i + 1:j]), marked))
            i = j + 1
        else:
            i += 1
    return out


# ---------------------------------------------------------------- links


def slug(heading):
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c).startswith("L"))
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    inside = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            inside = not inside
            continue
        m = None if inside else re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            out.add(s if n == 0 else f"{s}-{n}")
            seen[s] = n + 1
    return out


def check_links(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = f"{rel(path)}: link {target}"
        if not os.path.exists(dest):
            fail(where, "no such file")
            continue
        if anchor and dest.endswith(".md") and anchor not in anchors(dest):
            fail(where, f"no heading with anchor #{anchor} in {rel(dest)}")


# ---------------------------------------------------------------- examples

run_dir = os.path.join(WORK, "run")
subprocess.run(["rm", "-rf", WORK], check=True)
os.makedirs(WORK)
subprocess.run([README_EXAMPLE, run_dir], check=True, stdout=subprocess.DEVNULL)
segment = sorted(glob.glob(os.path.join(run_dir, "worker-00000", "seg-*.h5")))[0]

lib = ctypes.CDLL(LIBTSTAT)
lib.tstat_last_error.restype = ctypes.c_char_p
lib.tstat_session_create_json.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                          ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.tstat_session_close.argtypes = [ctypes.c_void_p]
lib.tstat_session_destroy.argtypes = [ctypes.c_void_p]
counter = [0]


def scratch(name):
    counter[0] += 1
    return os.path.join(WORK, f"{counter[0]:03d}-{name}")


def check_session_config(where, config):
    out_dir = scratch("session")
    session = ctypes.c_void_p()
    if lib.tstat_session_create_json(json.dumps(config).encode(), out_dir.encode(), -1, -1,
                                     ctypes.byref(session)) != 0:
        fail(where, "tstat refuses this session config: " + lib.tstat_last_error().decode())
        return
    lib.tstat_session_close(session)
    lib.tstat_session_destroy(session)


def check_rules_config(where, config):
    path = scratch("rules.json")
    with open(path, "w") as f:
        json.dump(config, f)
    r = subprocess.run([TSTAT, "check", run_dir, "--config", path], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        fail(where, "tstat check refuses this rules config: " + r.stderr.strip())


def check_json(where, text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = json.loads("{" + text + "}")  # a member of a config, e.g. "save_config": {...}
        except json.JSONDecodeError as e:
            fail(where, f"not JSON: {e}")
            return
    if not isinstance(value, dict):
        return
    if "event" in value and "rule" in value:
        return  # a findings log line: parsed above
    if isinstance(value.get("rules"), list) or "defaults" in value:
        check_rules_config(where, value)
    elif "name" in value and ("when" in value or "type" in value):
        check_rules_config(where, {"rules": [value]})
    else:
        check_session_config(where, value)


def check_python(where, text):
    # The Python package's examples need it built (TSTAT_HAVE_PYTHON is set
    # by ctest when it is).
    if re.search(r"^\s*(from tstat\b|import tstat\b)", text, re.M) and \
            os.environ.get("TSTAT_HAVE_PYTHON") != "1":
        checked["python (package not built: skipped)"] = \
            checked.get("python (package not built: skipped)", 0) + 1
        return
    import h5py
    import numpy as np
    namespace = {"run": run_dir, "path": segment, "np": np}
    with h5py.File(segment, "r") as f:  # the variables of excerpts
        h = f["exp_hist"][0]
        namespace.update(first_bin=int(h["first_bin"]), num_bins=int(h["num_bins"]),
                         offset=int(h["offset"]), exp_hist_counts=f["exp_hist_counts"][:])
    try:
        exec(compile(text, where, "exec"), namespace)
    except Exception as e:  # noqa: BLE001 - reported as the example's failure
        fail(where, f"raises {type(e).__name__}: {e}")


def check_cpp(where, text):
    source = scratch("example.cc")
    binary = source[:-3]
    body = text.replace('"/runs/exp1"', json.dumps(run_dir))
    with open(source, "w") as f:
        f.write('#include <cstdio>\n#include <string>\n#include "tstat/session.h"\n'
                '#include "tstat/trial.h"\n\n'
                "tstat::Status Example() {\n" + body + "\n  return tstat::Status::OK();\n}\n\n"
                "int main() {\n  const tstat::Status s = Example();\n"
                '  if (!s.ok()) std::fprintf(stderr, "%s\\n", s.ToString().c_str());\n'
                "  return s.ok() ? 0 : 1;\n}\n")
    lib_dir = os.path.dirname(LIBTSTAT)
    r = subprocess.run(["c++", "-std=c++17", "-I", os.path.join(SOURCE, "include"), source,
                        "-o", binary, "-L", lib_dir, "-ltstat", f"-Wl,-rpath,{lib_dir}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(where, "does not compile:\n" + r.stderr[-3000:])
        return
    r = subprocess.run([binary], capture_output=True, text=True)
    if r.returncode != 0:
        fail(where, f"fails on a real run: {r.stderr.strip()}")


def check_cmake(where, text):
    consumer = open(os.path.join(SOURCE, "tests/host/install_consumer/CMakeLists.txt")).read()
    normalized = re.sub(r"\s+", " ", re.sub(r"#.*", "", consumer))
    for line in text.split("\n"):
        command = re.sub(r"\s+", " ", re.sub(r"#.*", "", line)).strip()
        if not command:
            continue
        # The target and source names are the page's own.
        pattern = re.escape(command)
        pattern = re.sub(r"^(add_executable|target_link_libraries)\\\(\w+", r"\1\\(\\w+", pattern)
        pattern = re.sub(r"\w+\\\.cc\\\)$", r"\\S+\\)", pattern)
        if not re.search(pattern, normalized):
            fail(where, f"`{command}` is not in tests/host/install_consumer/CMakeLists.txt")


help_cache = {}


def tstat_help(words):
    key = tuple(words)
    if key not in help_cache:
        r = subprocess.run([TSTAT] + list(words) + ["--help"], capture_output=True, text=True)
        help_cache[key] = (r.returncode, r.stdout + r.stderr)
    return help_cache[key]


def subcommands(words):
    code, text = tstat_help(words)
    listed = text.split("Subcommands:", 1)[1] if "Subcommands:" in text else ""
    return set(re.findall(r"^  (\w[\w-]*)\s", listed, flags=re.M))


def check_command(where, line):
    line = re.sub(r"\s+#.*$", "", line).strip()
    if not line or line.startswith("#"):
        return
    try:
        words = shlex.split(line)
    except ValueError as e:
        fail(where, f"cannot split `{line}`: {e}")
        return
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before the program
    if not words:
        return
    program = words[0]
    if program in ("tstat", "build/bin/tstat"):
        sub = []
        for w in words[1:3]:  # the subcommands listed by the help of the level above
            if w not in subcommands(sub):
                break
            sub.append(w)
        code, text = tstat_help(sub)
        if not sub or code != 0:
            fail(where, f"`{line}`: no such tstat subcommand")
            return
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", " ".join(words)):
            if flag not in text:
                fail(where, f"`{line}`: tstat {' '.join(sub)} has no flag {flag}")
    elif "/" in program and not program.startswith("/"):
        if program.startswith("build/"):
            return  # built by CMake: CI builds and runs it
        if not os.access(os.path.join(SOURCE, program), os.X_OK):
            fail(where, f"`{line}`: {program} is not an executable of the repository")


def check_shell(where, text, transcript):
    joined = text.replace("\\\n", " ")
    for n, line in enumerate(joined.split("\n")):
        if transcript:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = re.sub(r"(^|\s)#.*$", "", line)
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            check_command(f"{where}+{n}", part)


def check_pages():
    for page in pages():
        check_links(page)
        for line, lang, text, marked in blocks(page):
            where = f"{rel(page)}:{line}"
            if marked:
                continue
            checked[lang or "transcript"] = checked.get(lang or "transcript", 0) + 1
            if lang == "json":
                check_json(where, text)
            elif lang == "python":
                check_python(where, text)
            elif lang == "cpp":
                check_cpp(where, text)
            elif lang == "cmake":
                check_cmake(where, text)
            elif lang in ("sh", "bash"):
                check_shell(where, text, transcript=False)
            elif lang == "":
                check_shell(where, text, transcript=True)
            else:
                fail(where, f"a ```{lang} block: this test does not know how to check it")


BROKEN_PAGE = """# Broken

A [missing file](nowhere.md) and a [missing heading](#no-such-heading).

```json
{"pipeline": {"queue_capacity": -5}}
```

```json
{"rules": [{"name": "x", "when": "l2 >"}]}
```

```python
raise RuntimeError("broken example")
```

```cpp
this is not C++;
```

```cmake
add_subdirectory(not_in_the_consumer)
```

```sh
tstat no-such-subcommand RUN
tstat check RUN --no-such-flag
tools/no-such-script.sh
```

```toml
x = 1
```
"""
EXPECTED = ["no such file", "no heading with anchor", "refuses this session config",
            "tstat check refuses", "raises RuntimeError", "does not compile",
            "not in tests/host/install_consumer", "no such tstat subcommand", "has no flag",
            "not an executable of the repository", "does not know how to check"]


def self_test():
    global SOURCE
    real = SOURCE
    SOURCE = os.path.join(WORK, "source")
    os.makedirs(os.path.join(SOURCE, "docs"))
    os.makedirs(os.path.join(SOURCE, "tests/host/install_consumer"))
    os.symlink(os.path.join(real, "include"), os.path.join(SOURCE, "include"))
    subprocess.run(["cp", os.path.join(real, "tests/host/install_consumer/CMakeLists.txt"),
                    os.path.join(SOURCE, "tests/host/install_consumer/")], check=True)
    with open(os.path.join(SOURCE, "README.md"), "w") as f:
        f.write(BROKEN_PAGE)
    check_pages()
    missing = [e for e in EXPECTED if not any(e in f for f in failures)]
    for f in failures:
        print("found:", f)
    if missing:
        print("the broken page's problems not found:", missing)
        sys.exit(1)
    print(f"every one of {len(EXPECTED)} kinds of problem found")
    sys.exit(0)


if SELF_TEST:
    self_test()
check_pages()
for f in failures:
    print("FAIL", f)
kinds = ", ".join(f"{n} {k}" for k, n in sorted(checked.items()))
print(f"{len(pages())} pages checked ({kinds} blocks), {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
