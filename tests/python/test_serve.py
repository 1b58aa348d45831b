"""`tstat serve`: the live dashboard. Its two paths and nothing else (no
file outside the runs, no method but GET/HEAD), a port in use, and the page
in headless Chromium following a run that a second process is still
writing: a step written after the page loaded is drawn. Run by ctest
(tstat.python.serve) with TSTAT_CLI set."""

import html
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
import torch

import tstat.pytorch

CLI = os.environ.get("TSTAT_CLI", "")


def start_serve(*args):
    p = subprocess.Popen([CLI, "serve", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://([\d.]+):(\d+)/", line)
    if not m:
        p.kill()
        raise AssertionError("no URL: " + line + p.stderr.read())
    return p, m.group(1), int(m.group(2))


def stop(p):
    p.terminate()
    assert p.wait(timeout=30) == 0


def write_run(path, steps=5):
    model = torch.nn.Linear(4, 2)
    with tstat.pytorch.Hook(out_dir=str(path), rules=False,
                            config={"save_config": {"save_interval": 1}}) as hook:
        hook.register_module(model)
        hook.register_loss(torch.nn.MSELoss())
        for _ in range(steps):
            model(torch.randn(3, 4)).sum().backward()


def request(host, port, method, path):
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request(method, path, body=b"x" if method in ("POST", "PUT") else None)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), body


def test_serve_paths_and_methods(tmp_path):
    write_run(tmp_path / "run")
    p, host, port = start_serve(tmp_path / "run", "--port", 0)
    try:
        assert host == "127.0.0.1"
        status, ctype, body = request(host, port, "GET", "/")
        assert status == 200 and ctype.startswith("text/html") and b"tstat-data" in body
        status, ctype, body = request(host, port, "GET", "/data.json")
        data = json.loads(body)
        assert status == 200 and data["live"]["revision"] >= 1 and data["runs"][0]["name"] == "run"
        assert data["runs"][0]["heatmaps"]  # the report's defaults: 6 tensors
        for path in ("/../../etc/passwd", "/etc/passwd", "/run/worker-00000", "/%2e%2e/%2e%2e/etc/passwd",
                     "/report.js"):
            assert request(host, port, "GET", path)[0] in (400, 404), path
        for method in ("POST", "PUT", "DELETE"):
            assert request(host, port, method, "/")[0] in (400, 405), method
    finally:
        stop(p)


def test_serve_takes_the_reports_page_options(tmp_path):
    write_run(tmp_path / "run")
    p, host, port = start_serve(tmp_path / "run", "--port", 0, "--heatmaps", 0, "--max-points", 10)
    try:
        data = json.loads(request(host, port, "GET", "/data.json")[2])
        assert data["runs"][0]["heatmaps"] == []
    finally:
        stop(p)


def test_serve_port_in_use_and_bad_runs(tmp_path):
    write_run(tmp_path / "run", steps=2)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        r = subprocess.run([CLI, "serve", str(tmp_path / "run"), "--port",
                            str(taken.getsockname()[1])], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "in use" in r.stderr
    finally:
        taken.close()
    r = subprocess.run([CLI, "serve", str(tmp_path / "nothing"), "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "nothing" in r.stderr


def test_the_dashboard_draws_steps_written_after_it_loaded(tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed (tools/setup.sh installs it)")
    run = tmp_path / "run"
    stop_file = tmp_path / "stop"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import os, time, torch, tstat.pytorch
        model = torch.nn.Linear(4, 2)
        loss_fn = torch.nn.MSELoss()
        with tstat.pytorch.Hook(out_dir={str(run)!r}, rules=False, config={{
                "save_config": {{"save_interval": 1}},
                "pipeline": {{"flush_interval_steps": 1}}}}) as hook:
            hook.register_module(model)
            hook.register_loss(loss_fn)
            step = 0
            while not os.path.exists({str(stop_file)!r}) and step < 5000:
                loss_fn(model(torch.randn(3, 4)), torch.zeros(3, 2)).backward()
                step += 1
                time.sleep(0.05)
    """))
    writer = subprocess.Popen([sys.executable, str(script)])
    serve = None
    try:
        deadline = time.time() + 60
        while not (run / "worker-00000").exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        serve, host, port = start_serve(run, "--port", 0, "--interval", 0.3)
        t0 = time.time()
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
                            "--dump-dom", f"http://{host}:{port}/"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        m = re.search(r'<pre id="tstat-check"[^>]*>(.*?)</pre>', r.stdout, re.S)
        check = json.loads(html.unescape(m.group(1)))
        assert check["errors"] == []
        # Redrawn as steps arrived; the last drawing shows later steps than the first.
        assert check["renders"] >= 3, check["renders"]
        assert check["last_steps"][-1] > check["last_steps"][0], check["last_steps"]
        assert check["first_render_ms"] < 2000
        print(f"first chart after {check['first_render_ms']:.0f} ms; data "
              f"{min(check['staleness_s']):.2f}-{max(check['staleness_s']):.2f} s old when drawn; "
              f"{check['renders']} renders in {time.time() - t0:.1f} s")
        # Once the writer is done, the data built step by step as the run grew
        # is the data of one build of the finished run.
        stop_file.write_text("")
        assert writer.wait(timeout=60) == 0
        # serve rebuilds every 0.3 s; wait for the build that saw the run closed
        # (under a loaded machine one build can take seconds).
        deadline = time.time() + 60
        while True:
            live = json.loads(urllib.request.urlopen(f"http://{host}:{port}/data.json").read())
            if live["runs"][0]["complete"] or time.time() > deadline:
                break
            time.sleep(0.3)
        out = tmp_path / "once.html"
        assert subprocess.run([CLI, "report", str(run), "-o", str(out)]).returncode == 0
        once = json.loads(re.search(r'<script id="tstat-data" type="application/json">(.*?)</script>',
                                    out.read_text(), re.S).group(1))
        assert live["runs"][0]["complete"] and live["runs"] == once["runs"]
    finally:
        stop_file.write_text("")
        assert writer.wait(timeout=60) == 0
        if serve is not None:
            stop(serve)
