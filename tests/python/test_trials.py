"""tstat.trials against the run python_test_run_writer writes (its formulas,
repeated here in numpy), against h5py reading the same files, and on bad
input. Run by ctest (tstat.python.trials) with TSTAT_TEST_RUN_WRITER set."""

import glob
import math
import os
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pandas as pd
import pytest

import tstat
from tstat import modes, trials

WRITER = os.environ.get("TSTAT_TEST_RUN_WRITER", "")
STEPS = 12


def write_run(path, steps=STEPS, rank=0, world=1, step_ms=0):
    args = [WRITER, str(path), str(steps)]
    if world > 1 or step_ms:
        args += [str(rank), str(world), str(step_ms)]
    subprocess.run(args, check=True)


def mode_of_step(g):
    return modes.EVAL if g % 5 in (3, 4) else modes.TRAIN


def mode_steps(steps=STEPS):
    """(global step, mode, mode step) of every step."""
    counts = {modes.TRAIN: 0, modes.EVAL: 0}
    out = []
    for g in range(steps):
        m = mode_of_step(g)
        out.append((g, m, counts[m]))
        counts[m] += 1
    return out


def weight(g, rank=0):
    return ((g + 1) * (np.arange(12) - 5.5) / 8 + rank).astype(np.float32).reshape(3, 4)


def gradient(g):
    return ((np.arange(12) % 3 - 1) * 2.0 ** -(g + 1)).astype(np.float32).reshape(3, 4)


def bias(g):
    return np.array([g, -g, 0.25, 1e-3], dtype=np.float64)


def reference(values):
    """The stats tstat reports, from numpy in double precision."""
    x = np.asarray(values, dtype=np.float64).ravel()
    return {
        "count": x.size, "min": x.min(), "max": x.max(), "mean": x.mean(),
        "variance": x.var(), "std": x.std(), "sum": x.sum(), "l1": np.abs(x).sum(),
        "l2": math.sqrt((x * x).sum()), "amax": np.abs(x).max(),
        "zero_count": int((x == 0).sum()), "neg_count": int((x < 0).sum()),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("trials") / "run"
    write_run(path)
    return path


@pytest.fixture(scope="module")
def trial(run):
    return trials.create_trial(run)


def test_open_names_and_steps(trial):
    assert trial.workers() == [0]
    assert trial.loaded_all_steps
    assert trial.tensor_names() == ["fc1.bias", "fc1.weight", "gradient/fc1.weight"]
    assert trial.tensor_names(collection="gradients") == ["gradient/fc1.weight"]
    assert trial.tensor_names(regex="^fc1") == ["fc1.bias", "fc1.weight"]
    assert trial.scalar_names() == ["loss"]
    assert trial.steps() == list(range(STEPS))
    for m in (modes.TRAIN, modes.EVAL):
        want = [s for g, mm, s in mode_steps() if mm == m]
        assert trial.steps(mode=m) == want
        assert trial.steps(mode=m.name) == want  # by name too
    # Gradients are not saved in EVAL (the built-in collection, as smdebug).
    assert trial.tensor_names(mode=modes.TRAIN) == ["fc1.bias", "fc1.weight",
                                                    "gradient/fc1.weight"]
    assert trial.tensor_names(mode=modes.EVAL) == ["fc1.bias", "fc1.weight"]
    assert trial.tensor_names(mode=modes.PREDICT) == []
    info = trial.worker_info()[0]
    assert info["closed"] and info["world_size"] == 1 and info["segments"] >= 3
    assert int(trial.config()["save_config"]["save_interval"]) == 1


@pytest.mark.parametrize("stat", ["count", "min", "max", "mean", "variance", "std", "sum", "l1",
                                  "l2", "amax", "zero_count", "neg_count"])
def test_series_equals_numpy(trial, stat):
    for name, fn in (("fc1.weight", weight), ("gradient/fc1.weight", gradient),
                     ("fc1.bias", bias)):
        # Gradients: TRAIN steps only.
        saved = [(g, m, s_) for g, m, s_ in mode_steps()
                 if m == modes.TRAIN or not name.startswith("gradient/")]
        s = trial.series(name, stat)
        assert isinstance(s, pd.Series) and s.index.name == "step"
        assert list(s.index) == [g for g, _, _ in saved]
        want = [reference(fn(g))[stat] for g, _, _ in saved]
        np.testing.assert_allclose(s.to_numpy(), want, rtol=1e-12, atol=1e-300, err_msg=name)
        # By mode: indexed by the mode's steps.
        for m in (modes.TRAIN, modes.EVAL):
            sm = trial.series(name, stat, mode=m)
            rows = [(g, s_) for g, mm, s_ in saved if mm == m]
            assert list(sm.index) == [s_ for _, s_ in rows]
            np.testing.assert_allclose(sm.to_numpy(), [reference(fn(g))[stat] for g, _ in rows],
                                       rtol=1e-12, atol=1e-300)


def test_series_equals_h5py_reading_the_files(run, trial):
    """The l2 series against the stats rows h5py reads from the segments
    (format 4: mean and m2 stored; l2 = sqrt(m2 + n mean^2))."""
    ids = {}
    rows = []
    for path in sorted(glob.glob(str(run / "worker-00000" / "seg-*.h5"))):
        with h5py.File(path, "r") as f:
            for t in f["tensors"][...]:
                ids[t["name"].decode()] = int(t["id"])
            rows.append(f["stats"][...])
    rows = np.concatenate(rows)
    mine = rows[rows["tensor_id"] == ids["fc1.weight"]]
    mine = mine[np.argsort(mine["global_step"], kind="stable")]
    n, mean, m2 = mine["finite_count"], mine["mean"], mine["m2"]
    want = np.sqrt(m2 + n * mean * mean)
    s = trial.series("fc1.weight", "l2")
    assert list(s.index) == list(mine["global_step"])
    np.testing.assert_allclose(s.to_numpy(), want, rtol=1e-15)


def test_tensor_values_stats_and_histogram(trial):
    t = trial.tensor("fc1.weight")
    assert t.shape == (3, 4) and t.dtype == "f32" and "weights" in t.collections
    assert t.steps() == list(range(STEPS))
    assert t.steps(mode=modes.EVAL) == [s for g, m, s in mode_steps() if m == modes.EVAL]
    # Raw snapshots every 3rd mode step, exact, with the tensor's dtype and shape.
    raw_globals = [g for g, m, s in mode_steps() if s % 3 == 0]
    assert t.raw_steps() == raw_globals
    for g in raw_globals:
        v = t.value(g)
        assert v.dtype == np.float32 and v.shape == (3, 4)
        np.testing.assert_array_equal(v, weight(g))
    b = trial.tensor("fc1.bias").value(0)
    assert b.dtype == np.float64
    np.testing.assert_array_equal(b, bias(0))
    # A mode step: EVAL step 0 is global step 3.
    np.testing.assert_array_equal(t.value(0, mode=modes.EVAL), weight(3))
    ref = reference(weight(5))
    assert t.stat(5, "l2") == pytest.approx(ref["l2"], rel=1e-12)
    assert t.reduction_value(5, "l2") == pytest.approx(ref["l2"], rel=1e-12)
    assert t.reduction_value(5, "max", abs=True) == pytest.approx(ref["amax"], rel=1e-12)
    assert t.reduction_value(5, "sum", abs=True) == pytest.approx(ref["l1"], rel=1e-12)
    assert t.stats(5)["count"] == 12
    exponents, counts = t.histogram(5)
    x = np.abs(weight(5).astype(np.float64).ravel())
    x = x[x > 0]
    want = {}
    for e in np.floor(np.log2(x)).astype(int):
        want[e] = want.get(e, 0) + 1
    got = {int(e): int(c) for e, c in zip(exponents, counts) if c}
    assert got == want


def test_scalars_and_dataframes(trial):
    loss = trial.series("loss")
    np.testing.assert_allclose(loss.to_numpy(), [1 / (g + 1) for g in range(STEPS)], rtol=1e-15)
    assert list(trial.series("loss", mode=modes.EVAL).index) == [0, 1, 2, 3]
    df = trial.dataframe(stats=["l2", "mean"], collection="weights")
    assert list(df.columns) == [("fc1.weight", "l2"), ("fc1.weight", "mean")]
    assert df.index.name == "step" and list(df.index) == list(range(STEPS))
    np.testing.assert_allclose(df[("fc1.weight", "mean")], [weight(g).mean() for g in range(STEPS)])
    at = trial.step_stats(7)
    assert list(at.index) == ["fc1.weight", "gradient/fc1.weight", "fc1.bias"]  # capture order
    assert at.loc["fc1.bias", "max"] == 7
    assert trial.dataframe(names=[]).empty


def test_errors_are_tstat_errors_with_codes(run, trial, tmp_path):
    with pytest.raises(tstat.Error) as e:
        trials.create_trial(tmp_path / "nothing")
    assert e.value.code == "not_found" and "nothing" in e.value.message
    with pytest.raises(tstat.Error) as e:
        trial.tensor("no.such")
    assert e.value.code == "not_found" and "no.such" in str(e.value)
    assert not trial.has_tensor("no.such") and trial.has_tensor("fc1.weight")
    with pytest.raises(tstat.Error) as e:
        trial.series("fc1.weight", "l3")
    assert e.value.code == "invalid_argument" and "l2" in e.value.message  # lists the stats
    with pytest.raises(tstat.Error) as e:
        trial.steps(mode="TRAINING")
    assert e.value.code == "invalid_argument"
    with pytest.raises(tstat.Error) as e:
        trial.tensor("fc1.weight").value(1)  # no snapshot at global step 1
    assert e.value.code == "step_unavailable"
    with pytest.raises(tstat.Error) as e:
        trial.tensor("fc1.weight").stats(STEPS + 5)
    assert e.value.code == "step_unavailable"
    with pytest.raises(tstat.Error) as e:
        trial.tensor("fc1.weight").reduction_value(0, "prod")
    assert e.value.code == "not_supported"
    # A file that is not a run: every query still answers or raises, nothing crashes.
    (tmp_path / "worker-00000").mkdir()
    (tmp_path / "worker-00000" / "seg-000000000000.h5").write_bytes(b"\0" * 4096)
    with pytest.warns(RuntimeWarning, match="seg-000000000000.h5") as warned:
        damaged = trials.create_trial(tmp_path)
    assert warned[0].filename == __file__  # at the caller's line
    assert damaged.steps() == [] and damaged.tensor_names() == []


FINDING = ('{"rule":"grad_blowup","type":"expression","step":"%d","mode":"TRAIN",'
           '"mode_step":"%d","worker":0,"tensor":"gradient/fc1.weight",'
           '"values":{"l2":%s,"threshold":1000},"measure":"l2","message":"l2 above 1000",'
           '"time":1700000000.25,"event":"%s","episode":"%d","severity":"%s",'
           '"first_step":"%d","first_mode_step":"%d","reported_step":"%d",'
           '"reported_mode_step":"%d","steps":"%d","worst":{"l2":%s,"threshold":1000},'
           '"worst_step":"%d","worst_mode_step":"%d"}\n')


def finding(step, event, episode, severity, first, steps, worst, worst_step, value=2000):
    return FINDING % (step, step, value, event, episode, severity, first, first, first, first,
                      steps, worst, worst_step, worst_step)


def test_findings_read_the_runs_findings_log(run, tmp_path):
    t = trials.create_trial(run)
    assert t.findings().empty  # no rule recorded anything
    log = run / "findings.jsonl"
    try:
        log.write_text(finding(4, "open", 1, "error", 4, 1, 2000, 4) +
                       finding(6, "escalate", 1, "critical", 4, 3, 5000, 6, 5000) +
                       finding(7, "close", 1, "critical", 4, 3, 5000, 6) +
                       finding(9, "open", 2, "error", 9, 1, 1500, 9, 1500) +
                       '{"rule":"unfinished')  # a writer mid-line: left out
        f = t.findings()
        assert list(f["episode"]) == [1, 2]
        first = f.iloc[0]
        assert (first["rule"], first["type"], first["severity"]) == \
            ("grad_blowup", "expression", "critical")
        assert (first["first_step"], first["last_step"], first["steps"]) == (4, 7, 3)
        assert not first["open"] and f.iloc[1]["open"]
        assert (first["measure"], first["worst"], first["worst_step"]) == ("l2", 5000, 6)
        assert first["tensor"] == "gradient/fc1.weight" and first["mode"] == "TRAIN"
        # A damaged complete line is an error naming the file and the line.
        log.write_text(finding(4, "open", 1, "error", 4, 1, 2000, 4) + "{not json}\n")
        with pytest.raises(tstat.Error) as e:
            t.findings()
        assert e.value.code == "corruption" and "findings.jsonl" in e.value.message
        assert "2" in e.value.message  # the line
        # Not a regular file: refused without blocking.
        log.unlink()
        os.mkfifo(log)
        with pytest.raises(tstat.Error) as e:
            t.findings()
        assert e.value.code == "invalid_argument"
    finally:
        if log.exists() or log.is_fifo():
            log.unlink()


def test_two_workers(tmp_path):
    run = tmp_path / "run"
    write_run(run, steps=6, rank=0, world=2)
    write_run(run, steps=6, rank=1, world=2)
    t = trials.create_trial(run)
    assert t.workers() == [0, 1]
    assert t.loaded_all_steps
    # worker -1 answers from the lowest rank; a rank its own values.
    np.testing.assert_allclose(t.series("fc1.weight", "mean").to_numpy(),
                               [weight(g).mean() for g in range(6)])
    np.testing.assert_allclose(t.series("fc1.weight", "mean", worker=1).to_numpy(),
                               [weight(g, rank=1).astype(np.float64).mean() for g in range(6)])
    assert t.step_stats(2, worker=1).loc["fc1.weight", "min"] == weight(2, rank=1).min()


def test_live_run_from_another_process(tmp_path):
    """A run still being written (another process, a step every 40 ms):
    steps appear on refresh(), wait_for_steps waits for them, and the run
    reads whole once closed."""
    run = tmp_path / "run"
    writer = subprocess.Popen([WRITER, str(run), "40", "0", "1", "40"])
    try:
        deadline = time.monotonic() + 30
        while not os.path.isdir(run / "worker-00000"):
            assert time.monotonic() < deadline, "the writer made no run"
            time.sleep(0.02)
        t = trials.create_trial(run)
        seen = len(t.steps())
        assert t.wait_for_steps([10, 20], timeout=30)
        t.refresh()
        assert len(t.steps()) >= 21 and len(t.steps()) >= seen
        assert not t.wait_for_steps(10_000, timeout=0.2)  # not yet, not an error
        assert writer.wait(timeout=60) == 0
        t.refresh()
        assert t.loaded_all_steps and t.steps() == list(range(40))
        np.testing.assert_allclose(t.series("fc1.weight", "max").to_numpy(),
                                   [weight(g).max() for g in range(40)])
        with pytest.raises(tstat.Error) as e:
            t.wait_for_steps(10_000, timeout=5)  # closed without it
        assert e.value.code == "step_unavailable"
    finally:
        if writer.poll() is None:
            writer.kill()
