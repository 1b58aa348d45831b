#!/usr/bin/python3
"""What tstat.pytorch.Hook costs a PyTorch training loop, measured as ratios
in one process (the machine is shared and noisy):

1. overhead: the CNN of `tstat bench overhead` (ResNet-style blocks, 3x32x32
   synthetic images, SGD, CPU; --model mlp: an MLP of 4 x Linear(1024, 1024)
   on 256 features, whose tensors are mostly parameters and gradients,
   --batch 64) trained in Python without and with the hook,
   in interleaved blocks, per save_interval; the median slowdown of the
   repeats, with their range: of whole blocks (a hook made for the block,
   its close() included), and of the block's steady steps (after the first,
   before close()), with what the first step and close() cost once. With
   --cpp, `tstat bench overhead` is run on the same cases and printed beside.
2. per tensor: --tensors small tensors (16 float32 each) saved with
   hook.save_tensor and captured at every step, against the same loop with
   no hook: the capture cost per tensor (--tensors 0: not measured).

    /usr/bin/python3 benchmarks/overhead_python.py [--steps 60] [--repeats 3]
        [--intervals 1,10,100] [--model cnn|mlp] [--batch 16 (CNN), 64 (MLP)]
        [--threads 0] [--device cpu|cuda]
        [--tensors 1000] [--cpp PATH] [--no-rules] [--no-functional-activations]
        [--processes 1] [--json]

--processes N runs the measurements in N fresh processes, one after the
other, and pools their repeats: on this machine one process's figure sits
up to ~5% away from another's for the same code (where the allocator puts
the model's and torch's buffers differs from process to process), more
than repeats within one process vary. The ranges printed are then of the
processes' medians.

Stats of every tensor at every step: weights, biases, gradients, the
outputs of every module and of the ReLUs between them (F.relu), the loss,
labels and predictions, and the default in-process rules (what a user gets
with no config). Rules off: --no-rules; ReLU outputs not read:
--no-functional-activations.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tstat.pytorch

CLASSES = 10


class ResidualBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


class Net(nn.Module):
    """32x32x16 -> 32x32x16 -> 16x16x32 -> 16x16x32 -> 8x8x64 -> 8x8x64."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.blocks = nn.Sequential(*[ResidualBlock(a, b, s) for a, b, s in
                                      ((16, 16, 1), (16, 32, 2), (32, 32, 1), (32, 64, 2),
                                       (64, 64, 1))])
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.head(self.blocks(F.relu(self.stem(x))).mean((2, 3)))


class WideMLP(nn.Module):
    """256 -> 1024 -> 1024 -> 1024 -> 1024 -> 10, ReLU modules between:
    3.4 M parameters, 13 MiB of them and 13 MiB of gradients per step,
    against 0.25 MiB per layer output at batch 64."""

    def __init__(self, features=256, width=1024):
        super().__init__()
        layers, n = [], features
        for _ in range(4):
            layers += [nn.Linear(n, width), nn.ReLU()]
            n = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


MODELS = {"cnn": (Net, (3, 32, 32)), "mlp": (WideMLP, (256,))}


def synthetic_batch(batch, seed=1, shape=(3, 32, 32)):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (batch,), generator=g)
    patterns = torch.randn(CLASSES, *shape, generator=g)
    return torch.randn(batch, *shape, generator=g) + patterns[labels], labels


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_block(net, opt, images, labels, steps, hook):
    """Seconds per step of `steps` steps, the hook's close() included (the
    writer's backlog belongs to the captured block); and per step of the
    steps after the first, close() excluded (the steady state of a run whose
    one-off costs, registration at its first step and close(), are spread
    over many steps), with those one-off seconds."""
    device = images.device
    sync(device)
    t0 = time.perf_counter()
    t1 = t0
    for step in range(steps):
        opt.zero_grad()
        logits = net(images)
        loss = F.cross_entropy(logits, labels)
        if hook is not None:
            hook.save_tensor("loss", loss, "losses")
            hook.save_labels(labels, logits)
        loss.backward()
        opt.step()
        if step == 0:
            sync(device)
            t1 = time.perf_counter()
    sync(device)
    t2 = time.perf_counter()
    if hook is not None:
        hook.close()
    sync(device)
    t3 = time.perf_counter()
    return {"all": (t3 - t0) / steps, "steady": (t2 - t1) / max(1, steps - 1),
            "first": t1 - t0, "close": t3 - t2}


def make_hook(out_dir, interval, rules, functional_activations=True, pipeline=None):
    config = {"save_config": {"save_interval": interval}}
    if pipeline:
        config["pipeline"] = pipeline
    return tstat.pytorch.Hook(out_dir=out_dir, num_classes=CLASSES, rules=rules,
                              functional_activations=functional_activations, config=config)


def overhead(args, tmp):
    device = torch.device(args.device)
    model, shape = MODELS[args.model]
    net = model().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    images, labels = synthetic_batch(args.batch, shape=shape)
    images, labels = images.to(device), labels.to(device)
    train_block(net, opt, images, labels, 3, None)  # warm-up
    cases = []
    for interval in args.intervals:
        steps = -(-args.steps // interval) * interval
        ratios, steady, base_s, hook_s, once = [], [], [], [], []
        for r in range(args.repeats):
            before = train_block(net, opt, images, labels, steps, None)
            out = os.path.join(tmp, f"i{interval}_r{r}")
            hook = make_hook(out, interval, not args.no_rules, not args.no_functional_activations,
                             args.pipeline)
            hook.register_module(net)
            captured = train_block(net, opt, images, labels, steps, hook)
            after = train_block(net, opt, images, labels, steps, None)
            base = (before["all"] + after["all"]) / 2
            ratios.append(captured["all"] / base)
            steady.append(captured["steady"] / ((before["steady"] + after["steady"]) / 2))
            # What the first step and close() cost beyond steady steps.
            once.append(captured["first"] - captured["steady"] + captured["close"])
            base_s.append(base)
            hook_s.append(captured["all"])
            shutil.rmtree(out, ignore_errors=True)
        cases.append(summarize({"case": "stats_all", "model": args.model,
                                "device": args.device, "save_interval": interval,
                                "steps": steps, "ratios": ratios, "steady_ratios": steady,
                                "once_s": once, "base_s": base_s, "hook_s": hook_s}))
    return cases


def summarize(case):
    """The case's medians and ranges, from its repeats' figures."""
    ratios, steady = case["ratios"], case["steady_ratios"]
    case.update({"step_ms": 1e3 * statistics.median(case["base_s"]),
                 "hook_step_ms": 1e3 * statistics.median(case["hook_s"]),
                 "slowdown": statistics.median(ratios), "slowdown_min": min(ratios),
                 "slowdown_max": max(ratios),
                 "steady_slowdown": statistics.median(steady),
                 "steady_slowdown_min": min(steady), "steady_slowdown_max": max(steady),
                 "once_ms": 1e3 * statistics.median(case["once_s"])})
    return case


def pooled(runs):
    """The processes' cases pooled per save_interval: medians over every
    repeat of every process; ranges of the processes' medians."""
    out = []
    for interval in sorted({c["save_interval"] for run in runs for c in run["cases"]}):
        cases = [c for run in runs for c in run["cases"] if c["save_interval"] == interval]
        merged = dict(cases[0])
        for key in ("ratios", "steady_ratios", "once_s", "base_s", "hook_s"):
            merged[key] = [x for c in cases for x in c[key]]
        summarize(merged)
        for key in ("slowdown", "steady_slowdown"):
            merged[key + "_min"] = min(c[key] for c in cases)
            merged[key + "_max"] = max(c[key] for c in cases)
        merged["processes"] = len(cases)
        out.append(merged)
    smalls = [run["small"] for run in runs if run["small"] is not None]
    small = None
    if smalls:
        small = dict(smalls[0])
        small["costs_s"] = [x for m in smalls for x in m["costs_s"]]
        small["us_per_tensor"] = 1e6 * statistics.median(small["costs_s"])
        small["us_per_tensor_min"] = min(m["us_per_tensor"] for m in smalls)
        small["us_per_tensor_max"] = max(m["us_per_tensor"] for m in smalls)
    return out, small


def in_processes(args):
    """Runs this script --processes times, one process after the other,
    with the same measurement arguments; their JSON lines."""
    cmd = [sys.executable, os.path.abspath(__file__), "--json", "--steps", str(args.steps),
           "--repeats", str(args.repeats), "--intervals", ",".join(str(i) for i in args.intervals),
           "--batch", str(args.batch), "--threads", str(args.threads), "--device", args.device,
           "--tensors", str(args.tensors), "--model", args.model]
    cmd += ["--no-rules"] if args.no_rules else []
    cmd += ["--no-functional-activations"] if args.no_functional_activations else []
    cmd += ["--pipeline", json.dumps(args.pipeline)] if args.pipeline else []
    runs = []
    for _ in range(args.processes):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"overhead_python.py: a measuring process failed (exit {done.returncode}):\n"
                     f"{done.stderr[-2000:]}")
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        runs.append({"cases": [r for r in rows if r["case"] == "stats_all"],
                     "small": next((r for r in rows if r["case"] == "small_tensors"), None)})
    return pooled(runs)


def per_tensor(args, tmp):
    """Capture cost per small tensor: K tensors saved and captured at every
    step, against the same Python loop without a hook."""
    tensors = [torch.randn(16) for _ in range(args.tensors)]
    names = [f"t{i:05d}" for i in range(args.tensors)]
    steps = 50

    def loop(hook):
        t0 = time.perf_counter()
        for _ in range(steps):
            for name, t in zip(names, tensors):
                if hook is not None:
                    hook.save_tensor(name, t)
            if hook is not None:
                hook.step()
        if hook is not None:
            hook.close()
        return (time.perf_counter() - t0) / steps

    costs = []
    for r in range(args.repeats):
        base = loop(None)
        out = os.path.join(tmp, f"small_{r}")
        hook = tstat.pytorch.Hook(out_dir=out, rules=False,
                                  config={"save_config": {"save_interval": 1}})
        costs.append((loop(hook) - base) / args.tensors)
        shutil.rmtree(out, ignore_errors=True)
    return {"case": "small_tensors", "tensors": args.tensors, "elements": 16, "costs_s": costs,
            "us_per_tensor": 1e6 * statistics.median(costs),
            "us_per_tensor_min": 1e6 * min(costs), "us_per_tensor_max": 1e6 * max(costs)}


def cpp_figures(args):
    """`tstat bench overhead` on the same cases, for the figures beside."""
    cmd = [args.cpp, "bench", "overhead", "--configs", "stats_all", "--json",
           "--steps", str(args.steps), "--repeats", str(args.repeats), "--batch", str(args.batch),
           "--threads", str(args.threads),
           "--intervals", ",".join(str(i) for i in args.intervals)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["save_interval"]: r for r in rows if r.get("config") == "stats_all"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--intervals", default="1,10,100")
    p.add_argument("--model", choices=sorted(MODELS), default="cnn",
                   help="cnn: `tstat bench overhead`'s; mlp: 4 x Linear(1024, 1024)")
    p.add_argument("--batch", type=int, default=0, help="0: 16 for the CNN, 64 for the MLP")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda: the model on the GPU")
    p.add_argument("--tensors", type=int, default=1000,
                   help="small tensors for the per-tensor cost (0: not measured)")
    p.add_argument("--cpp", default="", help="the tstat binary: its figures beside")
    p.add_argument("--no-rules", action="store_true")
    p.add_argument("--no-functional-activations", action="store_true",
                   help="Hook(functional_activations=False): the ReLUs' outputs not read")
    p.add_argument("--pipeline", default="",
                   help='the hook\'s pipeline config, JSON: \'{"early_capture_evict": false}\'')
    p.add_argument("--processes", type=int, default=1,
                   help="measure in this many fresh processes and pool their repeats")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    try:
        args.intervals = [int(i) for i in args.intervals.split(",")]
    except ValueError:
        p.error(f"--intervals: comma-separated whole numbers, not {args.intervals!r}")
    try:
        args.pipeline = json.loads(args.pipeline) if args.pipeline else {}
    except ValueError as e:
        p.error(f"--pipeline: not JSON ({e})")
    if not isinstance(args.pipeline, dict):
        p.error("--pipeline: a JSON object, such as '{\"early_capture_evict\": false}'")
    if args.batch == 0:
        args.batch = 16 if args.model == "cnn" else 64
    for name in ("steps", "repeats", "batch", "processes"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.cpp and args.model != "cnn":
        p.error("--cpp: `tstat bench overhead` trains the CNN only (--model cnn)")
    if any(i < 1 for i in args.intervals):
        p.error("--intervals must all be at least 1")
    if args.tensors < 0 or args.threads < 0:
        p.error("--tensors and --threads must not be negative")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.processes > 1:
        cases, small = in_processes(args)
    else:
        tmp = tempfile.mkdtemp(prefix="tstat-overhead-python-")
        try:
            cases = overhead(args, tmp)
            small = per_tensor(args, tmp) if args.tensors > 0 else None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    cpp = cpp_figures(args) if args.cpp else {}
    if args.json:
        for c in cases:
            if c["save_interval"] in cpp:
                c["cpp_slowdown"] = cpp[c["save_interval"]]["slowdown"]
            print(json.dumps(c))
        if small is not None:
            print(json.dumps(small))
        return
    what = "3x32x32 images (CNN)" if args.model == "cnn" else "256 features (MLP)"
    print(f"tstat.pytorch.Hook overhead: torch {torch.__version__}, {args.device}, "
          f"{torch.get_num_threads()} torch thread(s), batch {args.batch} of {what}, rules "
          f"{'off' if args.no_rules else 'on (default set)'}, ReLU outputs "
          f"{'not read' if args.no_functional_activations else 'read'}"
          + (f", pipeline {json.dumps(args.pipeline)}" if args.pipeline else "")
          + (f", {args.processes} processes of {args.repeats} repeats pooled (ranges: of the "
             f"processes' medians)" if args.processes > 1 else ""))
    print(f"{'case':<12} {'save_interval':>13} {'step ms':>9} {'hooked ms':>9} {'slowdown':>9}"
          f"  {'range':<15} {'steady':>8}  {'range':<15} {'once ms':>8} {'C++ adapter':>11}")
    for c in cases:
        other = cpp.get(c["save_interval"])
        print(f"{c['case']:<12} {c['save_interval']:>13} {c['step_ms']:>9.2f} "
              f"{c['hook_step_ms']:>9.2f} {c['slowdown']:>8.3f}x  "
              f"[{c['slowdown_min']:.3f}, {c['slowdown_max']:.3f}] "
              f"{c['steady_slowdown']:>7.3f}x  "
              f"[{c['steady_slowdown_min']:.3f}, {c['steady_slowdown_max']:.3f}] "
              f"{c['once_ms']:>8.1f} "
              f"{(format(other['slowdown'], '.3f') + 'x') if other else '-':>11}")
    print("slowdown: blocks of save_interval-rounded --steps steps, the hook's first step and "
          "close() included; steady: the steps after the first, close() excluded; once ms: "
          "what the first step and close() cost beyond steady steps")
    if small is None:
        return
    print(f"capture cost per small tensor ({small['tensors']} tensors of 16 float32, every step):"
          f" {small['us_per_tensor']:.2f} us [{small['us_per_tensor_min']:.2f}, "
          f"{small['us_per_tensor_max']:.2f}]")


if __name__ == "__main__":
    sys.exit(main())
