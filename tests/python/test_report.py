"""`tstat report`: the data block of the page against the run (read with
tstat.trials), hostile names rendered as text, several runs compared, bad
input; and the page opened in Debian's headless Chromium: no script error,
every chart drawn with the series and point counts of the data, the heat
maps with their format lines, a screenshot that is not blank. Runs are
written by tstat.pytorch.Hook. Run by ctest (tstat.python.report) with
TSTAT_CLI set."""

import html
import json
import os
import re
import shutil
import subprocess

import pytest
import torch

import tstat.pytorch
from tstat import modes, trials

CLI = os.environ.get("TSTAT_CLI", "")
HOSTILE = "</script><script>alert(1)</script>"


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed (tools/setup.sh installs it)")
    return path


def write_run(path, steps=30, nan_at=None, lr=0.1, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with tstat.pytorch.Hook(out_dir=str(path), num_classes=3,
                            config={"save_config": {"save_interval": 1}}) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(steps):
            evaluating = step % 10 == 9
            hook.set_mode(modes.EVAL if evaluating else modes.TRAIN)
            if step == nan_at:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")
            x = torch.randn(16, 8)
            y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
            hook.save_tensor("inputs/" + HOSTILE, x[:, :2], "default")
            if evaluating:
                with torch.no_grad():
                    logits = model(x)
                    hook.save_labels(y, logits)
                    loss_fn(logits, y)
                hook.step()
            else:
                opt.zero_grad()
                logits = model(x)
                hook.save_labels(y, logits)
                loss_fn(logits, y).backward()
                opt.step()
            hook.save_scalar("lr", lr)
            hook.save_scalar(HOSTILE, float(step))  # a chart titled with it
            if hook.should_stop():
                break


def report(out, *runs):
    return subprocess.run([CLI, "report", *map(str, runs), "-o", str(out)],
                          capture_output=True, text=True)


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="tstat-data" type="application/json">(.*?)</script>', text, re.S)
    assert m, "no data block"
    return text, json.loads(m.group(1))


def open_in_chromium(page, tmp_path):
    """The page's #tstat-check summary (after its script ran) and the DOM."""
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--virtual-time-budget=5000", "--dump-dom", "file://" + str(page)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="tstat-check"[^>]*>(.*?)</pre>', r.stdout, re.S)
    assert m, "the page's script did not run"
    return json.loads(html.unescape(m.group(1))), r.stdout


def test_report_of_a_faulty_run(tmp_path):
    write_run(tmp_path / "run", nan_at=14)
    out = tmp_path / "report.html"
    r = report(out, tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stdout
    text, data = page_data(out)
    assert len(data["runs"]) == 1
    run = data["runs"][0]
    trial = trials.create_trial(str(tmp_path / "run"))
    # Findings: the NaN, at its step, with the tensor.
    nan = [e for e in run["episodes"] if e["type"] == "nan_origin"]
    assert nan and nan[0]["first_global_step"] == 14
    # Losses per mode, with every saved point (no downsampling at 30 steps).
    loss = {s["mode"]: s for s in run["series"] if s["name"] == "loss"}
    assert set(loss) == {"TRAIN", "EVAL"}
    expected = trial.series("loss", "mean", mode=None)
    got = dict(zip(loss["TRAIN"]["x"] + loss["EVAL"]["x"], loss["TRAIN"]["y"] + loss["EVAL"]["y"]))
    assert sorted(got) == list(expected.index)
    for step, value in expected.items():
        if value == value:  # NaN is null in JSON
            assert got[step] == pytest.approx(value)
    # Layers ranked: the one that got the NaN first (its gradient went non-finite).
    assert run["layers"][0]["name"] == "0.weight" and run["layers"][0]["score"] == "inf"
    assert {l["name"] for l in run["layers"]} == {"0.weight", "2.weight"}
    # Updates (the deltas the default rules capture) and their ratio to the weight.
    series = {s["id"]: s for s in run["series"]}
    top = run["layers"][0]
    update, ratio, weight = series[top["update"]], series[top["ratio"]], series[top["weight"]]
    w = dict(zip(weight["x"], weight["y"]))
    assert len(update["x"]) >= 10 and all(v > 0 for v in update["y"][:10])
    for x, u, q in zip(update["x"][:10], update["y"], ratio["y"]):
        assert q == pytest.approx(u / w[x])
    # Activations: the share of zeros of the ReLU's output, as the stats say.
    relu = next(a for a in run["activations"] if a["name"] == "1.ReLU_output")
    zero = series[relu["zero"]]
    stats = trial.tensor("1.ReLU_output").stats(zero["x"][2])
    assert zero["y"][2] == pytest.approx(stats["zero_count"] / stats["count"])
    assert 0.2 < zero["y"][2] < 0.8  # about half of a ReLU's outputs are 0
    # Dead units: the default dead_relu rule has per-unit stats captured; a
    # unit is dead at a step when all its outputs are 0 (of 16 samples).
    dead = series[relu["dead_units"]]
    assert len(dead["x"]) > 5 and all(0 <= v < 0.5 for v in dead["y"][:10])
    # Heat maps: exponent histograms at sampled steps, as trials reads them.
    h = next(h for h in run["heatmaps"] if h["name"] == "gradient/2.weight")
    step = h["steps"][3]
    exps, counts = trial.tensor("gradient/2.weight").histogram(step)
    row = h["counts"][3]
    for e, c in zip(exps, counts):
        assert row[e - h["first_exp"]] == c
    assert sum(row) == sum(counts)
    # Bands: the moments the page draws TensorBoard's distribution bands from.
    band = run["bands"][0]
    stats = trial.tensor(band["name"]).stats(band["x"][3])
    assert band["std"][3] == pytest.approx(stats["std"]) and band["min"][3] == stats["min"]
    assert band["mean"][3] == pytest.approx(stats["mean"]) and band["max"][3] == stats["max"]
    # Labels and the confusion matrix at the last labelled step.
    labels = run["labels"][0]
    assert labels["name"] == "labels" and labels["confusion"]["classes"] == 3
    # (NaN logits after the fault: predictions counted as invalid.)
    assert sum(labels["counts"]) == 16 == sum(labels["confusion"]["counts"]) + \
        labels["confusion"]["invalid"]
    # Health.
    assert run["workers"][0]["closed"] and run["workers"][0]["records_lost"] == 0
    # The hostile name is data, never markup.
    assert HOSTILE not in text and "<script>alert(1)" not in text
    assert any(s["name"] == HOSTILE for s in run["series"])


def test_report_in_chromium(tmp_path):
    write_run(tmp_path / "run", nan_at=14)
    out = tmp_path / "report.html"
    assert report(out, tmp_path / "run").returncode == 0
    _, data = page_data(out)
    run = data["runs"][0]
    check, dom = open_in_chromium(out, tmp_path)
    assert check["errors"] == []
    titles = {c["title"]: c for c in check["charts"]}
    # One chart per loss/scalar (its modes as series), per charted layer, per band.
    assert titles["loss"]["series"] == [
        {"label": s["mode"], "points": len(s["x"])} for s in run["series"] if s["name"] == "loss"]
    assert titles["loss"]["markers"] == len(run["episodes"])
    assert titles["lr"]["series"][0]["points"] == len(
        next(s for s in run["series"] if s["name"] == "lr" and s["mode"] == "TRAIN")["x"])
    for layer in run["layers"]:
        assert layer["name"] in titles
    assert len(check["heatmaps"]) == len(run["heatmaps"]) > 0
    assert all(h["format_lines"] > 0 for h in check["heatmaps"])
    # Findings table and the hostile name as text.
    assert "nan_origin" in dom
    assert HOSTILE in titles  # drawn as a chart's title, as text
    assert html.escape(HOSTILE, quote=False) in dom and "<script>alert(1)" not in dom
    # A screenshot that shows something.
    png = tmp_path / "report.png"
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--virtual-time-budget=5000", "--window-size=1280,2400",
                        "--screenshot=" + str(png), "file://" + str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]
    from PIL import Image
    image = Image.open(png).convert("RGB")
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 100, "a blank screenshot"


def test_report_compares_runs(tmp_path):
    write_run(tmp_path / "a", steps=20, seed=1)
    write_run(tmp_path / "b", steps=20, seed=2, lr=0.01)
    out = tmp_path / "both.html"
    r = report(out, tmp_path / "a", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    _, data = page_data(out)
    assert [r["name"] for r in data["runs"]] == ["a", "b"]
    check, _ = open_in_chromium(out, tmp_path)
    assert check["errors"] == []
    compared = [c for c in check["charts"] if c["title"] == "loss (TRAIN)"]
    assert compared and [s["label"] for s in compared[0]["series"]] == ["a", "b"]


def test_report_bad_input(tmp_path):
    r = report(tmp_path / "x.html", tmp_path / "nothing")
    assert r.returncode == 1 and "nothing" in r.stderr
    # A run with no losses and no findings (rules off) still has a page.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "plain"), rules=False) as hook:
        hook.register_module(model)
        model(torch.randn(2, 4)).sum().backward()
    out = tmp_path / "plain.html"
    assert report(out, tmp_path / "plain").returncode == 0
    _, data = page_data(out)
    assert data["runs"][0]["episodes"] == []
    check, dom = open_in_chromium(out, tmp_path)
    assert check["errors"] == [] and "No losses or scalars were saved." in dom
    # Findings but no losses: a NaN in a model whose loss was never given.
    model = torch.nn.Linear(4, 2)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "noloss")) as hook:
        hook.register_module(model)
        for step in range(4):
            if step == 2:
                with torch.no_grad():
                    model.weight[0, 0] = float("nan")
            model(torch.randn(2, 4)).sum().backward()
    out = tmp_path / "noloss.html"
    assert report(out, tmp_path / "noloss").returncode == 0
    _, data = page_data(out)
    assert data["runs"][0]["episodes"] and not [s for s in data["runs"][0]["series"]
                                                if s["kind"] in ("loss", "scalar")]
    check, dom = open_in_chromium(out, tmp_path)
    assert check["errors"] == [] and "No losses or scalars were saved." in dom and "nan_origin" in dom
    # An empty run: a hook closed before any step.
    tstat.pytorch.Hook(out_dir=str(tmp_path / "empty"), rules=False).close()
    out = tmp_path / "empty.html"
    r = report(out, tmp_path / "empty")
    assert r.returncode == 0, r.stderr
    _, data = page_data(out)
    assert data["runs"][0]["series"] == [] and data["runs"][0]["layers"] == []
    check, dom = open_in_chromium(out, tmp_path)
    assert check["errors"] == [] and "No rule recorded a finding." in dom
    # Not writable: a directory in the way.
    (tmp_path / "dir.html").mkdir()
    r = report(tmp_path / "dir.html", tmp_path / "plain")
    assert r.returncode == 1


def test_series_are_downsampled_keeping_extremes_and_dead_layers_rank_high(tmp_path):
    torch.manual_seed(3)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.live = torch.nn.Linear(4, 4)
            self.dead = torch.nn.Linear(4, 4)  # its output is multiplied by 0: zero gradient

        def forward(self, x):
            return self.live(x).sum() + 0 * self.dead(x).sum()

    model = Net()
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), rules=False,
                            config={"save_config": {"save_interval": 1}}) as hook:
        hook.register_module(model)
        for step in range(300):
            model(torch.randn(2, 4)).backward()
            hook.save_scalar("spiky", 1000.0 if step == 137 else -5.0 if step == 211 else
                             float(step % 7))
    out = tmp_path / "r.html"
    r = subprocess.run([CLI, "report", str(tmp_path / "run"), "-o", str(out), "--max-points", "50"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _, data = page_data(out)
    run = data["runs"][0]
    spiky = next(s for s in run["series"] if s["name"] == "spiky")
    assert spiky["points"] == 300 and len(spiky["x"]) <= 80
    kept = dict(zip(spiky["x"], spiky["y"]))
    # The extremes, the first and the last point survive the downsampling.
    # (saved after the backward pass: each value belongs to the next step)
    assert max(spiky["y"]) == 1000.0 and min(spiky["y"]) == -5.0
    assert spiky["x"][0] == 1 and spiky["x"][-1] == 300
    assert spiky["x"] == sorted(spiky["x"])
    layers = {l["name"]: l for l in run["layers"]}
    assert layers["dead.weight"]["score"] == 30 and layers["dead.weight"]["gradient_l2"] == 0
    assert run["layers"][0]["name"] == "dead.weight" and layers["live.weight"]["score"] < 30


def test_report_lists_what_the_rules_recognised_and_did_not_report(tmp_path):
    # One update skipped for Inf gradients (as a loss scaler does at an
    # overflow): a note, not an episode.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    overflow = [False]
    model[2].weight.register_hook(lambda g: g * float("inf") if overflow[0] else g)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(20):
            overflow[0] = step == 5
            x = torch.randn(16, 8)
            opt.zero_grad()
            loss_fn(model(x), (x[:, 0] > 0).long()).backward()
            if not overflow[0]:
                opt.step()
    out = tmp_path / "report.html"
    r = report(out, tmp_path / "run")
    assert r.returncode == 0, r.stderr
    text, data = page_data(out)
    run = data["runs"][0]
    assert run["episodes"] == []
    assert any(n.startswith("rule nan_origin: 1 update(s) skipped") and n.endswith(": step 5")
               for n in run["notes"]), run["notes"]
    assert not any("skipped" in w for w in run["could_not_judge"])
