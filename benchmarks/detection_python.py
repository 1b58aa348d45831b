#!/usr/bin/env python3
"""The default rules on PyTorch trainings that `tstat bench detection` does not
have: a synthetic task harder than the digits (classes from a random linear
teacher, optionally with label noise, on a finite training set), SGD without
momentum, small learning rates, long learning-rate warmups, Adam and momentum;
healthy, healthy with gradient accumulation, with learning rates annealed to ~0 at the end, healthy under dynamic loss scaling (as torch.cuda.amp.GradScaler
does it, with fp16's range emulated on the CPU: updates whose gradients
overflow are skipped), other architectures (LSTM, GRU, CNN, Conv1d, transformer,
a feed-forward layer on tokens),
fine-tuned (trained on after 1,500 steps without the
hook: a fresh hook on a model at its plateau, as a job restarted from its
checkpoint numbers its steps from 0), and with the learning rate 0 (nothing
learns) and shuffled labels (nothing to learn but memorizing); and faults
with the rule expected to find each (a learning rate that diverges, a deep
sigmoid net whose gradients vanish, ReLUs killed by their biases (all of an MLP's;
70% of a token MLP's units or of a Conv1d's channels), tanh units
saturated by a large initialization, a deep ReLU net initialized with 5.6x
He's standard deviation, a NaN in the input, 95% of the labels one class).
Every run
attaches tstat.pytorch.Hook with the default configuration, as a user who
writes no rules config would, and register_loss(nn.CrossEntropyLoss()),
which gives the hook the labels too; fine-tuned and learning-rate-0 runs
also without labels (register_loss(..., labels=False)) and with them given
by save_labels (Hook(num_classes=)).

Target: no finding on any healthy run (a critical one would stop it), slow
ones included; fine-tuned runs with labels without a finding, and without
labels not stopped (loss_not_decreasing may report their plateau as an
error: nothing tells it from a network that learns nothing); the runs with
learning rate 0 (run 1,040 steps) found by loss_not_decreasing after its
horizon, and stopped once flat for its stop_horizon when their labels show
the loss began at chance. Shuffled labels are shown, not judged: a network memorizes them, so
their training loss falls (overfit needs a validation loss, which these runs
do not save). Every fault found by its rule (critical ones stopped within 3
steps).

Usage: detection_python.py [--steps N] [--seeds K] [--only SUBSTRING] [--functional] [--json]
(--functional: the MLPs call torch.relu, torch.tanh or torch.sigmoid between their
layers, not nn.ReLU, nn.Tanh or nn.Sigmoid.)
Prints one line per run (or one JSON object) and a summary; exit 0 when the
target is met, 1 otherwise.
"""

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
import warnings

import torch

import tstat.pytorch
from tstat import trials

# A skipped first update calls the scheduler before the optimizer, as under GradScaler.
warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\(\)` before")

D_IN, CLASSES, ROWS, BATCH = 20, 10, 2000, 64

# (optimizer, peak learning rate, warmup steps). Healthy: ordinary settings,
# small learning rates and long warmups, and learning rates 10-30x below the
# usual ones for these nets (plain SGD at 0.003, Adam at 3e-5), whose loss
# moves less than 1% in 200 steps but steadily: slow is not broken.
HEALTHY = [
    ("sgd", 0.01, 1), ("momentum", 0.01, 1), ("momentum", 0.001, 1), ("adam", 1e-3, 1),
    ("adam", 1e-4, 1), ("adam", 1e-3, 200), ("adam", 1e-3, 1000), ("momentum", 0.1, 200),
    ("momentum", 0.1, 1000), ("sgd", 0.003, 1), ("adam", 3e-5, 1),
]
SHUFFLED = [("adam", 1e-3, 1), ("momentum", 0.1, 1), ("sgd", 0.1, 1)]
# Dynamic loss scaling: the initial scales of torch's GradScaler (2^16) and of
# DeepSpeed/Megatron (2^32), which overflow at the start, several in a row;
# the scale doubles after 100 good steps (torch: 2000), so it overflows again.
LOSS_SCALING = [("adam", 1e-3, 1, 2.0 ** 16), ("adam", 1e-3, 200, 2.0 ** 32),
                ("momentum", 0.01, 1, 2.0 ** 32), ("sgd", 0.01, 1, 2.0 ** 16)]
FP16_MAX = 65504.0
# Gradient accumulation: micro-batches per optimizer step, each a hook step
# (the hook's automatic steps), so most steps change no weight.
ACCUMULATED = [("adam", 1e-3, 1, 8), ("momentum", 0.01, 1, 16)]
# Schedules that end with a learning rate near 0 (OneCycle ends at 1/250,000 of
# its peak; "fade" decays by 0.85 a step): updates fade in the last steps.
ANNEALED = [("adam", 1e-3, 1, "fade"), ("momentum", 0.02, 1, "fade"), ("adam", 3e-4, 1, "onecycle")]
# Other architectures on the same task (each row of D_IN values read as a
# sequence, or as a 4x5 image): (optimizer, learning rate, warmup, architecture).
ARCHITECTURES = [("adam", 1e-3, 1, "lstm"), ("momentum", 0.01, 1, "gru"),
                 ("adam", 1e-3, 1, "cnn"), ("momentum", 0.01, 1, "cnn"),
                 ("adam", 3e-4, 1, "transformer_gelu"), ("adam", 3e-4, 100, "transformer_relu"),
                 ("adam", 1e-3, 1, "token_mlp"), ("momentum", 0.01, 1, "cnn1d")]
# Trained on from a plateau: 1,500 steps before the hook. Labels: "loss"
# (register_loss's own), "save" (save_labels), "none" (labels=False).
FINETUNE_PRETRAIN = 1500
# loss_not_decreasing's defaults: it judges from its horizon and may stop a
# run (critical) once the loss has been flat for stop_horizon steps; the
# runs with learning rate 0 run past that.
LEARNING_HORIZON, STOP_HORIZON = 200, 1000
LR0_STEPS = STOP_HORIZON + 40
LABELLING = ("none", "save", "loss")
FINETUNED = [(opt, lr, 1, how) for opt, lr in (("adam", 1e-3), ("momentum", 0.01))
             for how in LABELLING]
# Faults: (optimizer, learning rate, warmup, fault, the rule that must find it,
# whether it must stop the run). The model changes with the fault (FAULT_MODELS).
FAULTS = [
    ("sgd", 50.0, 1, "diverging", "exploding_tensor", True),
    ("sgd", 0.01, 1, "vanishing", "vanishing_gradient", False),
    ("momentum", 0.01, 1, "dead_relu", "dead_relu", False),
    ("sgd", 0.01, 1, "saturated", "saturated_activation", False),
    ("adam", 1e-4, 1, "too_wide_init", "poor_weight_initialization", False),
    ("adam", 1e-3, 1, "nan_input", "nan_origin", True),
    ("adam", 1e-3, 1, "imbalanced", "class_imbalance", False),
    ("momentum", 0.01, 1, "dead_relu_tokens", "dead_relu", False),
    ("momentum", 0.01, 1, "dead_relu_cnn1d", "dead_relu", False),
]
# Faults in other architectures: fault -> (architecture, what breaks it).
# 70% of the units dead: along the tokens (or the length) every position
# would still look 30% alive; the units are the features (the channels).
FAULT_ARCHITECTURES = {
    "dead_relu_tokens": ("token_mlp", lambda m: m.ffn1.bias.data[:45].fill_(-20.0)),
    "dead_relu_cnn1d": ("cnn1d", lambda m: m.bn1.bias.data[:12].fill_(-20.0)),
}
# fault -> (activation, hidden layers, weight std (None: torch's default), bias (None: default))
FAULT_MODELS = {
    "vanishing": (torch.nn.Sigmoid, 12, None, None),
    "dead_relu": (torch.nn.ReLU, 2, None, -20.0),
    "saturated": (torch.nn.Tanh, 2, 30.0, None),
    "too_wide_init": (torch.nn.ReLU, 6, 1.0, None),  # He's std for 64 inputs is 0.18
}
NAN_STEP = 50


def make_task(task, shuffled, g):
    teacher = torch.randn(D_IN, CLASSES, generator=g)
    x = torch.randn(ROWS, D_IN, generator=g)
    logits = x @ teacher
    if task == "noisy":
        logits = logits + 2.0 * torch.randn(ROWS, CLASSES, generator=g)
    y = logits.argmax(1)
    if shuffled:
        y = y[torch.randperm(ROWS, generator=g)]
    return x, y


# The functions that --functional calls in place of the activation modules.
FUNCTIONS = {torch.nn.ReLU: torch.relu, torch.nn.Tanh: torch.tanh, torch.nn.Sigmoid: torch.sigmoid}


class FunctionalMLP(torch.nn.Module):
    """Linear layers with an activation called as a function between them
    (torch.relu, torch.tanh, torch.sigmoid), not a module."""

    def __init__(self, linears, function):
        super().__init__()
        self.layers = torch.nn.ModuleList(linears)
        self.function = function

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.function(layer(x))
        return self.layers[-1](x)


class Recurrent(torch.nn.Module):
    """An LSTM or GRU over the row's values as a sequence; the last hidden
    state classified."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(1, 32, batch_first=True)
        self.head = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        out, _ = self.rnn(x.unsqueeze(-1))
        return self.head(out[:, -1])


class SmallCNN(torch.nn.Module):
    """The row as a 1x4x5 image: two convolutions with BatchNorm and F.relu
    (called as a function), dropout, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.conv2, self.bn2 = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(16 * D_IN, CLASSES)

    def forward(self, x):
        h = torch.nn.functional.relu(self.bn1(self.conv1(x.view(-1, 1, 4, 5))))
        h = torch.nn.functional.relu(self.bn2(self.conv2(h)))
        return self.head(self.drop(h.flatten(1)))


class SmallTransformer(torch.nn.Module):
    """The row's values as tokens (a linear embedding and learned positions),
    two encoder layers (their activation a function inside the layer), the
    mean token classified."""

    def __init__(self, activation):
        super().__init__()
        self.embed = torch.nn.Linear(1, 32)
        self.position = torch.nn.Parameter(0.02 * torch.randn(D_IN, 32))
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation=activation,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)
        self.head = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x.unsqueeze(-1)) + self.position).mean(1))


class TokenMLP(torch.nn.Module):
    """The row's values as tokens ([batch, tokens, features]): a linear
    embedding, a residual feed-forward layer with an nn.ReLU module, the
    mean token classified."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(1, 32)
        self.ffn1, self.act, self.ffn2 = (torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, 32))
        self.head = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        h = self.embed(x.unsqueeze(-1))
        h = h + self.ffn2(self.act(self.ffn1(h)))
        return self.head(h.mean(1))


class SmallCNN1d(torch.nn.Module):
    """The row as a 1-channel signal ([batch, channels, length]): two Conv1d
    with BatchNorm1d and nn.ReLU modules, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv1d(1, 16, 3, padding=1), torch.nn.BatchNorm1d(16)
        self.conv2, self.bn2 = torch.nn.Conv1d(16, 16, 3, padding=1), torch.nn.BatchNorm1d(16)
        self.act1, self.act2 = torch.nn.ReLU(), torch.nn.ReLU()
        self.head = torch.nn.Linear(16 * D_IN, CLASSES)

    def forward(self, x):
        h = self.act1(self.bn1(self.conv1(x.unsqueeze(1))))
        h = self.act2(self.bn2(self.conv2(h)))
        return self.head(h.flatten(1))


def make_architecture(name):
    if name in ("lstm", "gru"):
        return Recurrent(torch.nn.LSTM if name == "lstm" else torch.nn.GRU)
    if name == "cnn":
        return SmallCNN()
    if name == "token_mlp":
        return TokenMLP()
    if name == "cnn1d":
        return SmallCNN1d()
    return SmallTransformer(name.split("_")[1])


def make_model(activation, hidden, weight_std, bias, functional=False):
    layers, width = [], D_IN
    for _ in range(hidden):
        layers += [torch.nn.Linear(width, 64), activation()]
        width = 64
    layers.append(torch.nn.Linear(width, CLASSES))
    if functional:
        model = FunctionalMLP([m for m in layers if isinstance(m, torch.nn.Linear)],
                              FUNCTIONS[activation])
        layers = list(model.layers)
    else:
        model = torch.nn.Sequential(*layers)
    for m in layers:
        if isinstance(m, torch.nn.Linear) and weight_std is not None:
            torch.nn.init.normal_(m.weight, 0.0, weight_std)
        if isinstance(m, torch.nn.Linear) and bias is not None and m is not layers[-1]:
            torch.nn.init.constant_(m.bias, bias)
    return model


def run(case, steps, out_dir):
    if case["kind"] == "lr0":
        steps = max(steps, LR0_STEPS)
    torch.manual_seed(case["seed"])
    g = torch.Generator().manual_seed(case["seed"] + 100)
    x_all, y_all = make_task(case["task"], case["kind"] == "shuffled", g)
    fault = case.get("fault")
    if fault == "imbalanced":  # 95% of the rows class 0
        rare = torch.rand(ROWS, generator=g) >= 0.95
        y_all = torch.where(rare, y_all, torch.zeros_like(y_all))
    if case.get("architecture"):
        model = make_architecture(case["architecture"])
    elif fault in FAULT_ARCHITECTURES:
        architecture, breaks = FAULT_ARCHITECTURES[fault]
        model = make_architecture(architecture)
        breaks(model)
    else:
        model = make_model(*FAULT_MODELS.get(fault, (torch.nn.ReLU, 2, None, None)),
                           functional=case.get("functional", False))
    lr = 0.0 if case["kind"] == "lr0" else case["lr"]
    if case["opt"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr,
                              momentum=0.9 if case["opt"] == "momentum" else 0.0)
    warm = case["warm"]
    schedules = torch.optim.lr_scheduler
    if case.get("schedule") == "onecycle":
        sched = schedules.OneCycleLR(opt, lr, total_steps=steps)
    elif case.get("schedule") == "fade":  # by 0.85 a step over the last 60%
        start = int(0.4 * steps)
        sched = schedules.LambdaLR(opt, lambda s: 1.0 if s < start else 0.85 ** (s - start))
    else:
        sched = schedules.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    scale, good, skipped = case.get("scale"), 0, 0
    if scale:  # before the hook's own: tstat sees the overflowed gradients
        for p in model.parameters():
            p.register_hook(lambda gr: torch.where(gr.abs() > FP16_MAX, gr.sign() * float("inf"), gr))
    perm, cursor = torch.randperm(ROWS, generator=g), 0
    for _ in range(case.get("pretrain", 0)):  # to the plateau, before any hook
        if cursor + BATCH > ROWS:
            perm, cursor = torch.randperm(ROWS, generator=g), 0
        idx = perm[cursor:cursor + BATCH]
        cursor += BATCH
        opt.zero_grad()
        loss_fn(model(x_all[idx]), y_all[idx]).backward()
        opt.step()
    labels = case.get("labels", "loss")
    t0 = time.perf_counter()
    with tstat.pytorch.Hook(out_dir=out_dir, num_classes=CLASSES if labels == "save" else 0) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn, labels=labels == "loss")
        for step in range(steps):
            if cursor + BATCH > ROWS:
                perm, cursor = torch.randperm(ROWS, generator=g), 0
            idx = perm[cursor:cursor + BATCH]
            cursor += BATCH
            micro = case.get("accumulate", 1)
            if step % micro == 0:
                opt.zero_grad()
            x = x_all[idx]
            if fault == "nan_input" and step == NAN_STEP:
                x = x.clone()
                x[3, 5] = float("nan")
            logits = model(x)
            if labels == "save":
                hook.save_labels(y_all[idx], logits)
            loss = loss_fn(logits, y_all[idx])
            if micro > 1:
                (loss / micro).backward()
                if (step + 1) % micro == 0:
                    opt.step()
                    sched.step()
            elif scale:
                (loss * scale).backward()
                if all(torch.isfinite(p.grad).all() for p in model.parameters()):
                    for p in model.parameters():
                        p.grad /= scale
                    opt.step()
                    good += 1
                    scale *= 2 if good % 100 == 0 else 1
                else:  # an overflow: skip the update, halve the scale
                    skipped += 1
                    good = 0
                    scale /= 2
            else:
                loss.backward()
                opt.step()
            if micro == 1:
                sched.step()
            losses.append(loss.item())
            if hook.should_stop():
                break
    found = trials.create_trial(out_dir).findings()
    findings = [] if found.empty else [
        {"rule": r.type, "severity": r.severity, "first_step": int(r.first_step),
         "tensor": r.tensor} for r in found.itertuples()]
    findings.sort(key=lambda f: f["first_step"])
    head, tail = losses[:20], losses[-20:]
    return {"steps": steps, "steps_run": len(losses), "first_loss": sum(head) / max(1, len(head)),
            "last_loss": sum(tail) / max(1, len(tail)), "findings": findings, "skipped": skipped,
            "seconds": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--functional", action="store_true",
                    help="the MLPs call their activation as a function instead of a module")
    a = ap.parse_args()
    if a.steps < 250:
        ap.error("--steps must be at least 250 (loss_not_decreasing judges from step 200)")
    torch.set_num_threads(1)
    cases = []
    for task in ("teacher", "noisy"):
        for kind, configs in (("healthy", HEALTHY), ("architecture", ARCHITECTURES),
                              ("scaled", LOSS_SCALING),
                              ("accumulated", ACCUMULATED), ("annealed", ANNEALED),
                              ("finetuned", FINETUNED), ("shuffled", SHUFFLED),
                              ("lr0", [("sgd", 0.01, 1, how) for how in LABELLING]),
                              ("fault", FAULTS)):
            for opt, lr, warm, *extra in configs:
                for seed in range(a.seeds):
                    c = {"kind": kind, "task": task, "opt": opt, "lr": lr, "warm": warm,
                         "seed": seed, "functional": a.functional}
                    c["name"] = f"{kind}/{task}/{opt}-lr{lr:g}-warmup{warm}/s{seed}"
                    if kind == "fault":
                        c["fault"], c["expect"], c["must_stop"] = extra
                        c["name"] = f"fault/{task}/{extra[0]}/s{seed}"
                    if kind in ("finetuned", "lr0"):
                        c["labels"] = extra[-1]
                        c["pretrain"] = FINETUNE_PRETRAIN if kind == "finetuned" else 0
                        c["name"] += {"none": "/unlabelled", "save": "/save_labels",
                                      "loss": "/loss_labels"}[extra[-1]]
                    if kind == "scaled":
                        c["scale"] = extra[0]
                        c["name"] += f"/scale2^{int(math.log2(extra[0]))}"
                    elif kind == "annealed":
                        c["schedule"] = extra[0]
                        c["name"] += f"/{extra[0]}"
                    elif kind == "architecture":
                        c["architecture"] = extra[0]
                        c["name"] += f"/{extra[0]}"
                    elif kind == "accumulated":
                        c["accumulate"] = extra[0]
                        c["name"] += f"/accumulate{extra[0]}"
                    if a.only in c["name"]:
                        cases.append(c)
    root = tempfile.mkdtemp(prefix="tstat-detection-python-")
    failed = []
    healthy = clean = stopped_lr0 = lr0 = found_lr0 = finetuned = finetuned_clean = 0
    finetuned_not_stopped = faults = faults_found = 0
    try:
        for i, c in enumerate(cases):
            r = run(c, a.steps, f"{root}/run{i}")
            rules = sorted({f["rule"] for f in r["findings"]})
            ok = True
            if c["kind"] in ("healthy", "architecture", "scaled", "accumulated", "annealed"):
                healthy += 1
                ok = not r["findings"] and r["steps_run"] == a.steps
                clean += ok
            elif c["kind"] == "finetuned":
                finetuned += 1
                finetuned_clean += not r["findings"]
                stopped = any(f["severity"] == "critical" for f in r["findings"])
                finetuned_not_stopped += not stopped and r["steps_run"] == a.steps
                # Labelled: the labels show the plateau began learned, so no
                # finding; unlabelled: at most loss_not_decreasing's error.
                ok = not r["findings"] if c["labels"] != "none" else (
                    not stopped and r["steps_run"] == a.steps and
                    {f["rule"] for f in r["findings"]} <= {"loss_not_decreasing"})
            elif c["kind"] == "lr0":
                lr0 += 1
                ldn = [f for f in r["findings"] if f["rule"] == "loss_not_decreasing"]
                # Reported from its horizon (step 199) as an error; critical,
                # and stopped, once flat for its stop_horizon (1,000 steps).
                stopped = bool(ldn) and ldn[0]["first_step"] == LEARNING_HORIZON - 1 and \
                    any(f["severity"] == "critical" for f in ldn) and \
                    r["steps_run"] <= STOP_HORIZON + 1
                found_lr0 += bool(ldn)
                stopped_lr0 += stopped
                ok = stopped if c["labels"] != "none" else \
                    bool(ldn) and r["steps_run"] == r["steps"] and \
                    all(f["severity"] == "error" for f in ldn)
            elif c["kind"] == "fault":
                faults += 1
                hits = [f for f in r["findings"] if f["rule"] == c["expect"]]
                ok = bool(hits)
                if ok and c["must_stop"]:
                    ok = hits[0]["severity"] == "critical" and \
                        r["steps_run"] <= hits[0]["first_step"] + 3
                faults_found += ok
            if not ok:
                failed.append(c["name"])
            row = dict(c, **r, passed=ok)
            if a.json:
                print(json.dumps(row), flush=True)
            else:
                first = min((f["first_step"] for f in r["findings"]), default=None)
                skipped = f"  ({r['skipped']} updates skipped)" if r["skipped"] else ""
                print(f"{c['name']:44s} loss {r['first_loss']:.3f} -> {r['last_loss']:.3f} "
                      f"steps {r['steps_run']:4d}  {'ok    ' if ok else 'FAILED'} "
                      f"{','.join(rules) or '-'}{'' if first is None else f' from step {first}'}"
                      f"{skipped}",
                      flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {"kind": "summary", "healthy": healthy, "healthy_clean": clean,
               "finetuned": finetuned, "finetuned_clean": finetuned_clean,
               "finetuned_not_stopped": finetuned_not_stopped, "lr0": lr0,
               "lr0_found": found_lr0, "lr0_stopped": stopped_lr0, "faults": faults,
               "faults_found": faults_found, "passed": not failed}
    if a.json:
        print(json.dumps(summary))
    else:
        print(f"\nhealthy runs without findings: {clean}/{healthy}; fine-tuned runs not stopped: "
              f"{finetuned_not_stopped}/{finetuned} (without findings: {finetuned_clean}); "
              f"learning rate 0 found by loss_not_decreasing: {found_lr0}/{lr0}, stopped (the "
              f"labelled ones): {stopped_lr0}; faults found by their rule: {faults_found}/{faults}")
        for n in failed:
            print(f"  FAILED {n}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
