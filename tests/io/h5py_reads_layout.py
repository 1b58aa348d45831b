#!/usr/bin/python3
"""h5py reads a tstat run using only docs/storage-format.md -- no tstat code.

Runs tests/io/crash_writer (path in argv[1]) twice: once to completion and
once killed with SIGKILL after some flushes. Then, for every seg-*.h5 file
(never *.tmp), it checks the seal as docs/storage-format.md describes (zlib.crc32 over the
bytes after the 512-byte header), opens the file with plain h5py, and compares
every table with the values crash_writer wrote -- the formulas of
tests/io/crash_formula.h, re-implemented here.
Exit status 0 on success; failures raise AssertionError.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import h5py
import numpy as np

TENSORS = 8
LOSS_ID = 8
LATE_STEP = 3
MODES = {1: "TRAIN", 2: "EVAL", 3: "PREDICT", 4: "GLOBAL"}


def step_key(g):
    if g % 5 == 4:
        return 2, g // 5          # EVAL
    return 1, g - (g + 1) // 5    # TRAIN


def recorded(t, g):
    return t < TENSORS - 1 or g >= LATE_STEP


def expected_stats(t, g):
    count = 1000 + t
    nan = (g + t) % 3
    mn = -(g + 1) - t * 0.5
    mx = (g + 1) * 2.0 + t
    return dict(count=count, finite_count=count - nan, nan_count=nan, pos_inf_count=0,
                neg_inf_count=0, zero_count=t, neg_count=(g * 7 + t) % 100, subnormal_count=0,
                band_lo_count=0, band_hi_count=0, small_count=0, min=mn, max=mx,
                mean=g * 0.25 + t * 0.125, m2=(t + 1) * 10.0 + g, l1=(g + 1) * (t + 1) * 1.5,
                amax=max(abs(mn), abs(mx)))


def expected_exp_hist(t, g):
    bins = np.zeros(279, dtype=np.uint64)
    bins[140 + t] += g + 1
    bins[150] += t + 2
    return bins


def check_seal(path):
    data = open(path, "rb").read()
    header = data[:512]
    text = header.split(b"\0", 1)[0].decode()
    m = re.fullmatch(r"TSTAT-SEGMENT 1\nlength (\d+)\ncrc32 ([0-9a-f]{8})\n", text)
    assert m, f"{path}: bad seal {text!r}"
    assert int(m.group(1)) == len(data), f"{path}: length mismatch"
    assert zlib.crc32(data[512:]) == int(m.group(2), 16), f"{path}: crc mismatch"


def read_worker(worker_dir):
    """Everything of one worker, per docs/storage-format.md."""
    names = sorted(n for n in os.listdir(worker_dir) if re.fullmatch(r"seg-\d{12}\.h5", n))
    steps, stats, hist, scalars, raws, registry = {}, {}, {}, {}, {}, {}
    counters = None
    for n in names:
        path = os.path.join(worker_dir, n)
        check_seal(path)
        with h5py.File(path, "r") as f:
            # Every string is fixed-length (format_version 3): h5py gives bytes.
            assert f.attrs["format"].decode() == "tstat-run"
            assert f.attrs["format_version"] == 4
            assert f.attrs["rank"] == 0 and f.attrs["world_size"] == 1
            assert f.attrs["host"].decode() == "crash-host"
            for name in ("tensors", "drops"):
                if name in f:
                    for member, (dt, _) in f[name].dtype.fields.items():
                        info = h5py.check_string_dtype(dt)
                        assert info is None or info.length is not None, (name, member)
            assert h5py.check_string_dtype(f["config"].dtype).length is not None
            # The header table repeats the attributes (tstat reads the table).
            header = f["header"][:]
            assert len(header) == 1, header
            for member in header.dtype.names:
                assert header[0][member] == f.attrs[member], (member, header[0][member])
            assert f.attrs["segment_index"] == int(n[4:16])
            assert f.userblock_size == 512
            assert f["config"][()].decode() == '{"writer": "crash_writer"}'
            shapes = f["tensor_shapes"][:]
            collections = [c.decode("utf-8") for c in f["collections"][:]]
            members = {}
            for row in f["tensor_collections"][:]:
                members.setdefault(int(row["tensor_id"]), []).append(
                    collections[int(row["collection"])])
            for row in f["tensors"][:]:
                off, rank = int(row["shape_offset"]), int(row["rank"])
                tid = int(row["id"])
                registry[tid] = (row["name"].decode("utf-8"), int(row["kind"]),
                                 row["dtype"].decode(), [int(x) for x in shapes[off:off + rank]],
                                 members.get(tid, []))
            for row in f["steps"][:]:
                steps[int(row["global_step"])] = (int(row["mode"]), int(row["mode_step"]))
            st = f["stats"][:]
            # Format 4: rows grouped by tensor; stats_tensors gives each
            # tensor's range (steps ascending), stats_capture_index each
            # row's position in its step's capture order.
            covered = 0
            for t in f["stats_tensors"][:]:
                a, b = int(t["first_row"]), int(t["first_row"]) + int(t["row_count"])
                assert a == covered, (a, covered)
                rows = st[a:b]
                assert (rows["tensor_id"] == t["tensor_id"]).all()
                assert (np.diff(rows["global_step"]) > 0).all()
                covered = b
            assert covered == len(st)
            position = f["stats_capture_index"][:]
            assert position.dtype == np.uint32 and len(position) == len(st)
            for g in np.unique(st["global_step"]):
                at_step = np.sort(position[st["global_step"] == g])
                assert (at_step == np.arange(len(at_step))).all(), (g, at_step)
            for row in st:
                key = (int(row["global_step"]), int(row["tensor_id"]))
                stats[key] = {k: row[k] for k in st.dtype.names}
            eh = f["exp_hist"][:]
            counts = f["exp_hist_counts"][:]
            # The narrowest unsigned width that holds the segment's counts.
            assert counts.dtype.kind == "u" and counts.dtype.itemsize in (2, 4, 8), counts.dtype
            assert counts.max() < 65536 or counts.dtype.itemsize > 2, counts.dtype
            assert counts.max() >= 65536 or counts.dtype.itemsize == 2, counts.dtype
            for row in eh:
                bins = np.zeros(279, dtype=np.uint64)
                first, num, off = int(row["first_bin"]), int(row["num_bins"]), int(row["offset"])
                bins[first:first + num] = counts[off:off + num]
                hist[(int(row["global_step"]), int(row["tensor_id"]))] = bins
            for row in f["scalars"][:]:
                scalars[int(row["global_step"])] = (int(row["scalar_id"]), float(row["value"]))
            if "raw_index" in f:
                raw_shapes = f["raw_shapes"][:]
                for row in f["raw_index"][:]:
                    assert row["dtype"].decode() == "f32"
                    off, rank = int(row["shape_offset"]), int(row["rank"])
                    shape = [int(d) for d in raw_shapes[off:off + rank]]
                    if row["dataset"].decode() == "raw/packed":
                        # Small snapshots: a byte range of the shared uint8 dataset.
                        packed = f["raw/packed"]
                        assert packed.dtype == np.uint8 and packed.ndim == 1
                        off, n = int(row["byte_offset"]), int(row["byte_count"])
                        assert n == 4 * int(np.prod(shape)), (n, shape)
                        value = packed[off:off + n].view("<f4").reshape(shape)
                    else:
                        ds = f[row["dataset"].decode()]
                        assert ds.attrs["dtype"] == "f32"
                        assert list(ds.shape) == shape
                        assert int(row["byte_offset"]) == int(row["byte_count"]) == 0
                        value = ds[()]
                    raws[int(row["global_step"])] = value
            counters = f["counters"][0]
    return names, registry, steps, stats, hist, scalars, raws, counters


def check_worker(worker_dir, must_have, closed):
    names, registry, steps, stats, hist, scalars, raws, counters = read_worker(worker_dir)
    assert len(steps) >= must_have + 1, (len(steps), must_have)
    assert sorted(steps) == list(range(len(steps))), "steps must be a gap-free prefix"
    for t in range(TENSORS):
        if t in registry:
            want = ["weights"] if t < TENSORS - 1 else []
            assert registry[t] == (f"layer{t}/weight", 0, "f32", [4, 4], want), registry[t]
    if steps:
        assert registry[LOSS_ID] == ("loss", 1, "f64", [], []), registry[LOSS_ID]
    for g, key in steps.items():
        assert key == step_key(g), (g, key)
        for t in range(TENSORS):
            if not recorded(t, g):
                assert (g, t) not in stats
                continue
            row = stats[(g, t)]
            assert row["mode"] == key[0] and row["mode_step"] == key[1]
            assert row["has_stats"] == 1
            for field, want in expected_stats(t, g).items():
                assert row[field] == want, (g, t, field, row[field], want)
            # Derived fields, as docs/storage-format.md defines them.
            n = row["finite_count"]
            assert row["mean"] * n == (g * 0.25 + t * 0.125) * n
            np.testing.assert_array_equal(hist[(g, t)], expected_exp_hist(t, g))
        assert scalars[g] == (LOSS_ID, 1.0 / (g + 1)), (g, scalars[g])
        if g % 5 == 0:
            np.testing.assert_array_equal(
                raws[g], (g * 100 + np.arange(16, dtype=np.float32)).reshape(4, 4))
    if counters is not None:
        # crash_writer's capture totals: two steps ended per saved step.
        n = len(steps)
        assert (counters["capture_steps"], counters["capture_steps_saved"]) == (2 * n, n), counters
        assert counters["capture_step_seconds"] == 0.5 * n, counters
        assert counters["capture_seconds"] == 0.0625 * n, counters
    if closed:
        marker = open(os.path.join(worker_dir, "CLOSED")).read()
        assert '"segments": %d' % len(names) in marker, marker
        assert counters["segments_written"] == len(names)
        n = len(steps)
        assert ('"capture_steps": %d, "capture_steps_saved": %d, "capture_step_seconds": %.17g, '
                '"capture_seconds": %.17g' % (2 * n, n, 0.5 * n, 0.0625 * n)) in marker, marker
    return len(steps), len(names)


def run_writer(writer, run, steps, flush_every, step_us, kill_after=None):
    proc = subprocess.Popen([writer, run, str(steps), str(flush_every), str(step_us)],
                            stdout=subprocess.PIPE)
    if kill_after is None:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, proc.returncode
        return out.decode()
    # Killed `kill_after` seconds after its first flush: a fixed delay from the
    # start failed under ASan on a loaded machine (no flush yet at 0.4 s).
    lines = []
    flushed = threading.Event()

    def read():
        for raw in proc.stdout:
            lines.append(raw.decode())
            if lines[-1].startswith("flushed "):
                flushed.set()

    reader = threading.Thread(target=read)
    reader.start()
    got_flush = flushed.wait(timeout=60)
    if got_flush:
        time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    reader.join(timeout=60)
    assert got_flush, "no flush within 60 s: " + "".join(lines)
    assert proc.returncode == -signal.SIGKILL
    return "".join(lines)


def main():
    writer = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        done = os.path.join(tmp, "done")
        out = run_writer(writer, done, 23, 4, 0)
        assert out.strip().endswith("closed"), out
        nsteps, nsegs = check_worker(os.path.join(done, "worker-00000"), 22, True)
        assert (nsteps, nsegs) == (23, 6), (nsteps, nsegs)

        killed = os.path.join(tmp, "killed")
        out = run_writer(writer, killed, 10**9, 2, 300, kill_after=0.4)
        flushed = [int(m) for m in re.findall(r"^flushed (\d+)$", out, re.M)]
        assert flushed, "no flush before the kill"
        wdir = os.path.join(killed, "worker-00000")
        assert not os.path.exists(os.path.join(wdir, "CLOSED"))
        nsteps, nsegs = check_worker(wdir, flushed[-1], False)
        print(f"complete run: 23 steps in 6 segments; killed run: {nsteps} steps in {nsegs} "
              f"segments, last reported flush {flushed[-1]}")
    print("h5py_reads_layout: OK")


if __name__ == "__main__":
    main()
