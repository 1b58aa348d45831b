# Reads a tstat run with h5py alone (docs/reading.md: "With h5py").
# Usage: /usr/bin/python3 readme_h5py.py RUN
import glob, os, sys
import h5py, numpy as np

MODES = {1: "TRAIN", 2: "EVAL", 3: "PREDICT", 4: "GLOBAL"}
run = sys.argv[1]
for worker in sorted(glob.glob(os.path.join(run, "worker-*"))):
    for path in sorted(glob.glob(os.path.join(worker, "seg-*.h5"))):  # never *.h5.tmp
        with h5py.File(path, "r") as f:
            names = {int(r["id"]): r["name"].decode() for r in f["tensors"][:]}
            if "stats" in f:  # a table with no rows in this segment is absent
                s = f["stats"][:]
                n = s["finite_count"].astype(np.float64)
                l2 = np.sqrt(s["m2"] + n * np.where(n > 0, s["mean"], 0.0) ** 2)
                for r, norm in zip(s, l2):
                    print(names[int(r["tensor_id"])], MODES[int(r["mode"])], int(r["mode_step"]),
                          f"mean={r['mean']:.6g} l2={norm:.6g}", sep="\t")
            if "exp_hist" in f:  # bin i counts finite non-zero x with floor(log2|x|) == i - 150
                counts = f["exp_hist_counts"][:]
                for h in f["exp_hist"][:]:
                    bins = np.zeros(279, np.uint64)
                    first, num, off = int(h["first_bin"]), int(h["num_bins"]), int(h["offset"])
                    bins[first:first + num] = counts[off:off + num]
                    row = s[(s["tensor_id"] == h["tensor_id"]) & (s["global_step"] == h["global_step"])]
                    assert bins.sum() == row["finite_count"][0] - row["zero_count"][0]
            if "scalars" in f:
                for r in f["scalars"][:]:
                    print(names[int(r["scalar_id"])], MODES[int(r["mode"])], int(r["mode_step"]),
                          f"value={r['value']:.6g}", sep="\t")
