"""`tstat export tensorboard` read back by an independent reader: the
TFRecord framing and its masked CRC-32C, and the protobuf wire format of
Event / Summary / HistogramProto, decoded here from the bytes (field numbers
from TensorBoard's event.proto and summary.proto), compared with the run as
tstat.trials reads it. Runs are written by tstat.pytorch.Hook. Run by ctest
(tstat.python.tensorboard_export) with TSTAT_CLI set."""

import glob
import math
import os
import struct
import subprocess

import numpy as np
import pytest
import torch

import tstat.pytorch
from tstat import modes, trials

CLI = os.environ.get("TSTAT_CLI", "")


# --- An independent reader ----------------------------------------------

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert header_crc == masked(crc32c(header)), f"length CRC at {pos}"
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert len(body) == length and body_crc == masked(crc32c(body)), f"data CRC at {pos}"
        yield body
        pos += 16 + length


def varint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def fields(buf):
    """(field number, wire type, value) of a message: ints for varints,
    bytes for length-delimited, raw 8/4 bytes for fixed64/fixed32."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"wire type {wire}")
        yield number, wire, value


def doubles(packed):
    return list(struct.unpack(f"<{len(packed) // 8}d", packed))


def histogram(buf):
    h = {"bucket_limit": [], "bucket": [], "min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0,
         "sum_squares": 0.0}  # proto3 defaults
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in fields(buf):
        if number in names:
            h[names[number]] = struct.unpack("<d", value)[0]
        elif number == 6:
            h["bucket_limit"] += doubles(value) if wire == 2 else [struct.unpack("<d", value)[0]]
        elif number == 7:
            h["bucket"] += doubles(value) if wire == 2 else [struct.unpack("<d", value)[0]]
    return h


def events(path):
    out = []
    for body in records(path):
        e = {"values": {}, "step": 0, "wall_time": 0.0}  # proto3 defaults
        for number, _wire, value in fields(body):
            if number == 1:
                e["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2:
                e["step"] = value
            elif number == 3:
                e["file_version"] = value.decode()
            elif number == 5:
                for vn, _w, v in fields(value):
                    assert vn == 1
                    tag, item = None, None
                    for n, _w2, x in fields(v):
                        if n == 1:
                            tag = x.decode()
                        elif n == 2:
                            item = struct.unpack("<f", x)[0]
                        elif n == 5:
                            item = histogram(x)
                    e["values"][tag] = item
        out.append(e)
    return out


def test_the_reader_knows_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


# --- The export ---------------------------------------------------------

def write_run(path, steps=8):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    config = {"save_config": {"save_interval": 1},
              "collections": [{"name": "weights", "stats": {"histogram_bins": 8}}]}
    with tstat.pytorch.Hook(out_dir=str(path), config=config, rules=False) as hook:
        hook.register_module(model)
        for step in range(steps):
            hook.set_mode(modes.EVAL if step in (3, 4) else modes.TRAIN)
            loss = model(torch.randn(5, 6)).pow(2).mean()
            hook.save_scalar("lr", 0.1 / (step + 1))
            if step in (3, 4):
                hook.step()
            else:
                loss.backward()
                opt.step()
                opt.zero_grad()


def export(run, out, *args):
    r = subprocess.run([CLI, "export", "tensorboard", str(run), str(out), *args],
                       capture_output=True, text=True)
    return r


def test_export_reads_back_as_the_run(tmp_path):
    write_run(tmp_path / "run")
    r = export(tmp_path / "run", tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    files = glob.glob(str(tmp_path / "tb" / "worker-0" / "events.out.tfevents.*"))
    assert len(files) == 1
    evs = events(files[0])
    assert evs[0]["file_version"] == "brain.Event:2"
    by_step = {e["step"]: e for e in evs[1:]}
    trial = trials.create_trial(str(tmp_path / "run"))
    assert sorted(by_step) == trial.steps()
    times = [e["wall_time"] for e in evs[1:]]
    assert times == sorted(times) and times[0] > 1.6e9  # capture times, in order
    # Stat series as scalars (float32), TRAIN under the name, EVAL prefixed.
    for name in ("0.weight", "gradient/2.weight", "0.Linear_output"):
        for stat in ("l2", "mean", "std", "min", "max"):
            series = trial.series(name, stat)
            for step, value in series.items():
                mode = modes.EVAL if step in (3, 4) else modes.TRAIN
                tag = ("EVAL/" if mode == modes.EVAL else "") + f"{name}/{stat}"
                assert by_step[step]["values"][tag] == pytest.approx(value, rel=1e-6), (tag, step)
    assert "EVAL/gradient/2.weight/l2" not in by_step[3]["values"]  # no gradients in EVAL
    # Scalars.
    for step in range(8):
        tag = ("EVAL/" if step in (3, 4) else "") + "lr"
        assert by_step[step]["values"][tag] == pytest.approx(0.1 / (step + 1), rel=1e-6)
    # Exponent histograms: tstat's bins as bucket limits 2^(e+1).
    for step in (0, 5):
        exps, counts = trial.tensor("0.weight").histogram(step)
        h = by_step[step]["values"]["0.weight/exponent_histogram"]
        assert h["bucket_limit"] == [2.0 ** (e + 1) for e in exps]
        assert h["bucket"] == [float(c) for c in counts]
        stats = trial.tensor("0.weight").stats(step)
        assert h["num"] == sum(counts) and h["max"] == stats["amax"]
        assert h["sum"] == pytest.approx(stats["l1"]) and h["min"] == 2.0 ** exps[0]
        assert h["sum_squares"] == pytest.approx(stats["l2"] ** 2)
    # Linear histograms (the weights collection asked for 8 bins).
    h = by_step[0]["values"]["0.weight/histogram"]
    stats = trial.tensor("0.weight").stats(0)
    assert len(h["bucket"]) == 8 and sum(h["bucket"]) == stats["count"] == 96
    assert h["bucket_limit"][-1] == pytest.approx(stats["max"])
    assert h["min"] == pytest.approx(stats["min"]) and h["sum"] == pytest.approx(stats["sum"])
    assert all(b > a for a, b in zip(h["bucket_limit"], h["bucket_limit"][1:]))


def test_export_options(tmp_path):
    write_run(tmp_path / "run")
    r = export(tmp_path / "run", tmp_path / "tb", "--collection", "weights", "--stats", "l2,nan_count",
               "--every", "3", "--no-histograms")
    assert r.returncode == 0, r.stderr
    evs = events(glob.glob(str(tmp_path / "tb" / "worker-0" / "*tfevents*"))[0])
    steps = [e["step"] for e in evs[1:]]
    assert steps == [0, 3, 6]
    tags = set().union(*(e["values"] for e in evs[1:]))
    assert tags == {"0.weight/l2", "0.weight/nan_count", "2.weight/l2", "2.weight/nan_count",
                    "EVAL/0.weight/l2", "EVAL/0.weight/nan_count", "EVAL/2.weight/l2",
                    "EVAL/2.weight/nan_count", "lr", "EVAL/lr"}
    # A second export into the same directory adds a file, never overwrites.
    assert export(tmp_path / "run", tmp_path / "tb").returncode == 0
    assert len(glob.glob(str(tmp_path / "tb" / "worker-0" / "*tfevents*"))) == 2


def test_export_bad_input(tmp_path):
    write_run(tmp_path / "run", steps=2)
    r = export(tmp_path / "nothing", tmp_path / "tb")
    assert r.returncode == 1 and "nothing" in r.stderr
    (tmp_path / "file").write_text("x")
    r = export(tmp_path / "run", tmp_path / "file")
    assert r.returncode == 1 and "not a directory" in r.stderr
    r = export(tmp_path / "run", tmp_path / "tb", "--regex", "(")
    assert r.returncode == 1 and "regex" in r.stderr
    r = export(tmp_path / "run", tmp_path / "tb", "--collection", "no_such")
    assert r.returncode == 1 and "no_such" in r.stderr
    r = export(tmp_path / "run", tmp_path / "tb", "--stats", "l2,loudness")
    assert r.returncode == 2 and "loudness" in r.stderr
    r = export(tmp_path / "run", tmp_path / "tb", "--every", "0")
    assert r.returncode == 2
