#!/usr/bin/python3
"""Compare tstat's stat set with the same statistics computed by numpy.

Generates float32 data (standard normal, default 256 MiB), writes it to a temp
file, times numpy computing the stat set on it (median of a few repeats), runs
`tstat bench stats --input FILE --dtype f32 --json` on the same file, prints
both speeds and "tstat is N x numpy", and checks that both agree on the values.

Run with Debian's interpreter (it has numpy): /usr/bin/python3 stats_numpy.py
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# tstat's defaults (tstat/stats.h: StatsOptions, ExponentHistogram).
BAND_LO = -0.97
BAND_HI = 0.97
SMALL_EPS = 1e-7
EXP_HIST_MIN_EXP = -150
EXP_HIST_BINS = 279

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def f32_threshold(value, up):
    """The float32 t such that comparing float32 x with t answers exactly what
    comparing x with the double `value` answers (x >= value <=> x >= t when
    up, x <= value <=> x <= t otherwise). tstat compares in float32 this way."""
    t = np.float32(value)
    if up and float(t) < value:
        t = np.nextafter(t, np.float32(np.inf))
    if not up and float(t) > value:
        t = np.nextafter(t, np.float32(-np.inf))
    return t


def numpy_stats(x):
    """The stat set of float32 array x, written the natural numpy way."""
    s = {"count": x.size}
    s["nan_count"] = int(np.count_nonzero(np.isnan(x)))
    s["pos_inf_count"] = int(np.count_nonzero(x == np.inf))
    s["neg_inf_count"] = int(np.count_nonzero(x == -np.inf))
    finite = np.isfinite(x)
    f = x if finite.all() else x[finite]
    s["finite_count"] = f.size
    s["zero_count"] = int(np.count_nonzero(f == 0))
    s["neg_count"] = int(np.count_nonzero(x < 0))
    s["band_lo_count"] = int(np.count_nonzero(x <= f32_threshold(BAND_LO, up=False)))
    s["band_hi_count"] = int(np.count_nonzero(x >= f32_threshold(BAND_HI, up=True)))
    a = np.abs(f)
    s["small_count"] = int(np.count_nonzero(a < f32_threshold(SMALL_EPS, up=True)))
    if f.size:
        s["min"] = float(f.min())
        s["max"] = float(f.max())
        s["sum"] = float(f.sum(dtype=np.float64))
        s["mean"] = s["sum"] / f.size
        s["variance"] = float(f.var(dtype=np.float64))
        s["l1"] = float(a.sum(dtype=np.float64))
        s["l2"] = math.sqrt(float(np.square(f, dtype=np.float64).sum()))
        s["amax"] = float(a.max())
    # Exponent histogram: frexp gives |x| = m * 2^e with m in [0.5, 1), so
    # floor(log2|x|) = e - 1.
    _, e = np.frexp(f[f != 0])
    hist = np.bincount(e.astype(np.int64) - 1 - EXP_HIST_MIN_EXP, minlength=EXP_HIST_BINS)
    s["exponent_histogram"] = {
        str(b + EXP_HIST_MIN_EXP): int(c) for b, c in enumerate(hist) if c}
    return s


def make_data(elements, seed, specials):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(elements, dtype=np.float32)
    if specials:
        # A few of each special value at random positions.
        values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-42, 3e38],
                          dtype=np.float32)
        pos = rng.choice(elements, size=min(elements, 8 * 16), replace=False)
        x[pos] = np.resize(values, pos.size)
    return x


def time_numpy(x, repeats):
    seconds = []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = numpy_stats(x)
        seconds.append(time.perf_counter() - t0)
    return result, seconds


def run_tstat(args, path):
    cmd = [args.tstat, "bench", "stats", "--input", path, "--dtype", "f32", "--json",
           "--repeats", str(args.tstat_repeats)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"stats_numpy: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        sys.exit(f"stats_numpy: no JSON from tstat:\n{proc.stdout}{proc.stderr}")
    return json.loads(lines[-1])


def compare(mine, theirs):
    """Returns (checked, mismatches) between numpy's and tstat's stats."""
    if not theirs:
        return 0, []
    exact = ["count", "finite_count", "nan_count", "pos_inf_count", "neg_inf_count",
             "zero_count", "neg_count", "band_lo_count", "band_hi_count", "small_count",
             "min", "max", "amax", "exponent_histogram"]
    # Relative tolerance; sum and mean are near 0, so they are judged against
    # the scale of their terms (l1).
    scale = {"sum": mine.get("l1", 0.0), "mean": mine.get("l1", 0.0) / max(mine["count"], 1)}
    close = ["sum", "mean", "variance", "l1", "l2"]
    checked, bad = 0, []
    for key in exact + close:
        if key not in theirs or key not in mine:
            continue
        checked += 1
        a, b = mine[key], theirs[key]
        if key in exact:
            ok = a == b
        else:
            ok = b is not None and abs(a - b) <= 1e-6 * max(abs(a), scale.get(key, 0.0))
        if not ok:
            bad.append(f"{key}: numpy {a!r} vs tstat {b!r}")
    return checked, bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=float, default=256.0, help="data size (default 256)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--repeats", type=int, default=3, help="numpy repeats (default 3)")
    p.add_argument("--tstat-repeats", type=int, default=5, help="tstat repeats (default 5)")
    p.add_argument("--threads", type=int, default=0, help="tstat CPU threads (0: default)")
    p.add_argument("--specials", action="store_true",
                   help="sprinkle NaN, +-Inf, zeros and subnormals into the data")
    p.add_argument("--tstat", default=os.path.join(REPO, "build", "bin", "tstat"),
                   help="path to the tstat binary (default: build/bin/tstat)")
    args = p.parse_args()
    if args.size_mib <= 0 or args.repeats < 1 or args.tstat_repeats < 1:
        p.error("--size-mib, --repeats and --tstat-repeats must be positive")
    if not os.access(args.tstat, os.X_OK):
        p.error(f"no tstat binary at {args.tstat} (build it, or pass --tstat)")

    elements = int(args.size_mib * 2**20) // 4
    x = make_data(elements, args.seed, args.specials)
    with tempfile.TemporaryDirectory(prefix="tstat_numpy_") as tmp:
        path = os.path.join(tmp, "data.f32")
        x.astype("<f4", copy=False).tofile(path)
        print(f"data: {elements} float32 values ({x.nbytes / 2**20:g} MiB), standard normal, "
              f"seed {args.seed}{', with specials' if args.specials else ''}")
        ref, np_seconds = time_numpy(x, args.repeats)
        tst = run_tstat(args, path)

    np_median = statistics.median(np_seconds)
    np_gbps = x.nbytes / np_median / 1e9
    print(f"numpy {np.__version__}: {np_median:.4f} s (median of {args.repeats}, best "
          f"{min(np_seconds):.4f} s) = {np_gbps:.3f} GB/s")
    print(f"tstat {tst['backend_description']}: {tst['seconds']:.4f} s (median of "
          f"{tst['repeats']}, best {tst['best_seconds']:.4f} s) = {tst['gbps']:.3f} GB/s; "
          f"read bandwidth {tst['read_bw_gbps']:.2f} GB/s, ratio {tst['ratio_to_read_bw']:.3f}")
    print(f"tstat is {np_median / tst['seconds']:.1f}x numpy (medians; best vs best "
          f"{min(np_seconds) / tst['best_seconds']:.1f}x)")

    checked, bad = compare(ref, tst.get("stats"))
    if not checked:
        print("agreement: tstat printed no statistics; compared speeds only")
    elif bad:
        print(f"agreement: {len(bad)} of {checked} values DIFFER:")
        for line in bad:
            print("  " + line)
        return 1
    else:
        print(f"agreement: all {checked} compared values agree (counts, min/max and the "
              "exponent histogram exactly, moments within 1e-6)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
