#!/usr/bin/python3
"""How fast `tstat serve` shows a live run: a second process trains a small
PyTorch model under tstat.pytorch.Hook, flushing every step, and logs when
each step ended; this script polls /data.json every 20 ms and reports, for
every step, the time from its end to the first data that shows it (what the
dashboard then draws at its next poll, at most half an interval later), and
the time to the first page (GET /).

    /usr/bin/python3 benchmarks/serve_latency.py [--tstat build/bin/tstat]
        [--interval 0.5] [--seconds 10] [--step-ms 50]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tstat", default="build/bin/tstat")
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--step-ms", type=float, default=50)
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="tstat-serve-latency-")
    run, log, stop = f"{tmp}/run", f"{tmp}/steps.log", f"{tmp}/stop"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time, torch, tstat.pytorch
        model = torch.nn.Linear(16, 4)
        loss_fn = torch.nn.MSELoss()
        with tstat.pytorch.Hook(out_dir={run!r}, rules=False, config={{
                "save_config": {{"save_interval": 1}},
                "pipeline": {{"flush_interval_steps": 1}}}}) as hook, open({log!r}, "w") as log:
            hook.register_module(model)
            hook.register_loss(loss_fn)
            step = 0
            while not os.path.exists({stop!r}):
                loss_fn(model(torch.randn(8, 16)), torch.zeros(8, 4)).backward()
                log.write(f"{{step}} {{time.time()}}\\n")
                log.flush()
                step += 1
                time.sleep({args.step_ms / 1000})
    """)])
    while not os.path.exists(f"{run}/worker-00000"):
        time.sleep(0.05)
    time.sleep(0.5)
    serve = subprocess.Popen([args.tstat, "serve", run, "--port", "0", "--interval",
                              str(args.interval)], stdout=subprocess.PIPE, text=True)
    url = serve.stdout.readline().split()[2]
    t0 = time.time()
    page = urllib.request.urlopen(url).read()
    first_page = time.time() - t0
    seen = {}  # last step in the data -> when it was first seen
    end = time.time() + args.seconds
    while time.time() < end:
        data = json.loads(urllib.request.urlopen(url + "data.json").read())
        last = max((s["x"][-1] for r in data["runs"] for s in r["series"] if s["x"]), default=-1)
        seen.setdefault(last, time.time())
        time.sleep(0.02)
    open(stop, "w").close()
    writer.wait()
    serve.terminate()
    serve.wait()
    written = {int(a): float(b) for a, b in (line.split() for line in open(log))}
    # Per step written while polling: the first time the data held it.
    shown = sorted(seen.items())
    latencies = []
    for step, at in written.items():
        first = next((t for last, t in shown if last >= step), None)
        if first is not None and at >= shown[0][1]:
            latencies.append(first - at)
    print(f"tstat serve --interval {args.interval}: first page {first_page * 1000:.0f} ms "
          f"({len(page)} bytes); {len(seen)} data updates in {args.seconds:.0f} s; from a step's "
          f"end to the data showing it ({len(latencies)} steps): median {statistics.median(latencies):.2f} s, max "
          f"{max(latencies):.2f} s (the page draws it at its next poll, <= "
          f"{args.interval / 2:.2f} s later)")


if __name__ == "__main__":
    sys.exit(main())
