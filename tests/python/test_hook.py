"""tstat.pytorch.Hook on real training: the stats it stores against torch's
own values (norm, min, max, mean, var, zero counts) at several steps, steps
and modes, lazily created and unused gradients, a module used twice, labels,
a rule stopping a faulty run, live reading from a second process, and bad
input. Run by ctest (tstat.python.pytorch)."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tstat
import tstat.pytorch
import tstat.rules
from tstat import modes, trials

EVERY_STEP = {"save_config": {"save_interval": 1}}


def torch_stats(t):
    x = t.detach().double().flatten()
    return {
        "l2": x.norm().item(),
        "min": x.min().item(),
        "max": x.max().item(),
        "mean": x.mean().item(),
        "variance": x.var(unbiased=False).item(),
        "zero_count": int((x == 0).sum()),
        "count": x.numel(),
    }


def assert_stats(trial, name, step, ref, mode=None):
    got = trial.tensor(name).stats(step) if mode is None else \
        trial.tensor(name).stats(step, mode=mode)
    # Sums that cancel (a softmax's gradient has mean 0) differ by rounding
    # only: the absolute tolerance follows the values' magnitude.
    scale = max(abs(ref["min"]), abs(ref["max"])) if "min" in ref else 1.0
    for key, value in ref.items():
        tol = scale * scale if key == "variance" else scale
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-7 * tol), (name, step, key)


class Recorder:
    """torch's stats of module outputs, by step, taken by the test's own
    forward hooks (independent of tstat's)."""

    def __init__(self, modules):
        self.step = 0
        self.values = {}
        for name, m in modules.items():
            m.register_forward_hook(self._hook(name))

    def _hook(self, name):
        def on(_m, _i, out):
            self.values[(name, self.step)] = torch_stats(out)
        return on


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 32)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


class Transpose(torch.nn.Module):
    def forward(self, x):
        return x.transpose(1, 2)  # not contiguous


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.swap = Transpose()
        self.head = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        h = self.swap(self.features(x))
        return self.head(h.flatten(1))


def train(model, hook, steps, batch, seed=0, lr=0.05, per_step=None):
    """SGD on random data; per_step(step, model) after backward, before the
    optimizer (where tstat reads weights and gradients)."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for step in range(steps):
        x = torch.randn(*batch, generator=g)
        y = torch.randint(0, 3, (batch[0],), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        losses.append(loss.item())
        if per_step is not None:
            per_step(step, model)
        opt.step()
    return losses


def test_mlp_stats_match_torch(tmp_path):
    torch.manual_seed(1)
    model = MLP()
    rec = Recorder({"fc1": model.fc1, "relu": model.relu})
    refs = {}

    def per_step(step, m):
        for name, p in m.named_parameters():
            refs[(name, step)] = torch_stats(p)
            refs[("gradient/" + name, step)] = torch_stats(p.grad)
        rec.step = step + 1

    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        losses = train(model, hook, 6, (8, 10), per_step=per_step)
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.steps() == list(range(6))
    assert {"fc1.weight", "fc1.bias", "gradient/fc1.weight", "fc1_output", "relu_output",
            "relu_input", "fc2_output", "loss", "model_input"} <= set(trial.tensor_names())
    assert "gradient/fc1.weight" in trial.tensor_names(collection="gradients")
    assert "fc1.bias" in trial.tensor_names(collection="biases")
    assert "relu_output" in trial.tensor_names(collection="activations")
    assert "loss" in trial.tensor_names(collection="losses")
    for step in (0, 3, 5):
        for name in ("fc1.weight", "fc2.bias", "gradient/fc1.weight", "gradient/fc2.weight"):
            assert_stats(trial, name, step, refs[(name, step)])
        assert_stats(trial, "fc1_output", step, rec.values[("fc1", step)])
        assert_stats(trial, "relu_output", step, rec.values[("relu", step)])
        assert trial.tensor("loss").stat(step, "mean") == pytest.approx(losses[step], rel=1e-6)
    # ReLU zeroes about half: the zero counts are the real ones, not 0.
    assert rec.values[("relu", 3)]["zero_count"] > 0
    np.testing.assert_allclose(trial.series("loss", "mean").to_numpy(), losses, rtol=1e-6)


def test_cnn_stats_match_torch(tmp_path):
    torch.manual_seed(2)
    model = CNN()
    rec = Recorder({"conv": model.features[0], "relu": model.features[1],
                    "swap": model.swap})
    refs = {}

    def per_step(step, m):
        refs[step] = (torch_stats(m.features[0].weight), torch_stats(m.features[0].weight.grad),
                      torch_stats(m.head.weight.grad))
        rec.step = step + 1

    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(model, hook, 5, (6, 1, 8, 8), per_step=per_step)
    trial = trials.create_trial(str(tmp_path / "run"))
    names = set(trial.tensor_names())
    # Numbered paths carry the module's class, as the rules' regexes expect.
    assert {"features.0.Conv2d_output", "features.1.ReLU_output", "features.1.ReLU_input",
            "features.2.MaxPool2d_output", "swap_output", "features.0.weight",
            "gradient/features.0.weight"} <= names
    assert tuple(trial.tensor("features.0.weight").shape) == (4, 1, 3, 3)
    for step in (0, 2, 4):
        w, wg, hg = refs[step]
        assert_stats(trial, "features.0.weight", step, w)
        assert_stats(trial, "gradient/features.0.weight", step, wg)
        assert_stats(trial, "gradient/head.weight", step, hg)
        assert_stats(trial, "features.0.Conv2d_output", step, rec.values[("conv", step)])
        assert_stats(trial, "features.1.ReLU_output", step, rec.values[("relu", step)])
        # The transposed (non-contiguous) output: read through a copy.
        assert_stats(trial, "swap_output", step, rec.values[("swap", step)])


def test_modes_count_their_own_steps(tmp_path):
    torch.manual_seed(3)
    model = MLP()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    eval_losses = []
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for phase, steps in ((modes.TRAIN, 3), (modes.EVAL, 2), (modes.TRAIN, 2)):
            hook.set_mode(phase)
            for _ in range(steps):
                x, y = torch.randn(4, 10), torch.randint(0, 4, (4,))
                if phase == modes.TRAIN:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
                else:
                    with torch.no_grad():
                        eval_losses.append(loss_fn(model(x), y).item())
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.steps() == list(range(7))
    assert trial.steps(mode=modes.TRAIN) == [0, 1, 2, 3, 4]
    assert trial.steps(mode=modes.EVAL) == [0, 1]
    # Gradients are never saved in EVAL (smdebug's rule), losses are.
    assert list(trial.tensor("gradient/fc1.weight").steps()) == [0, 1, 2, 5, 6]
    np.testing.assert_allclose(trial.series("loss", "mean", mode=modes.EVAL).to_numpy(),
                               eval_losses, rtol=1e-6)


def test_gradients_count_only_when_a_backward_produced_them(tmp_path):
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(6, 6)
            self.a = torch.nn.Linear(6, 2)
            self.b = torch.nn.Linear(6, 2)
            self.use_b = False

        def forward(self, x):
            h = self.body(x)
            return self.a(h) + (self.b(h) if self.use_b else 0)

    torch.manual_seed(4)
    model = TwoHeads()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    b_grads = {}
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        hook.register_module(model)
        for step in range(6):
            model.use_b = step in (2, 3)   # b's gradient appears at step 2 (lazily)
            opt.zero_grad(set_to_none=False)  # at 4, 5 b.grad exists (zeros) but is stale
            model(torch.randn(3, 6)).sum().backward()
            if model.use_b:
                b_grads[step] = torch_stats(model.b.weight.grad)
            opt.step()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert list(trial.tensor("gradient/b.weight").steps()) == [2, 3]
    assert list(trial.tensor("gradient/a.weight").steps()) == list(range(6))
    for step in (2, 3):
        assert_stats(trial, "gradient/b.weight", step, b_grads[step])
    assert list(trial.tensor("b_output").steps()) == [2, 3]


def test_a_module_used_twice_in_a_step(tmp_path):
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = torch.nn.Linear(5, 5)

        def forward(self, x):
            return self.shared(torch.tanh(self.shared(x)))

    torch.manual_seed(5)
    model = Twice()
    outs = []
    model.shared.register_forward_hook(lambda _m, _i, o: outs.append(torch_stats(o)))
    grads = []
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        hook.register_module(model)
        for _ in range(3):
            model.zero_grad()
            model(torch.randn(4, 5)).pow(2).mean().backward()
            grads.append(torch_stats(model.shared.weight.grad))
    trial = trials.create_trial(str(tmp_path / "run"))
    for step in range(3):
        assert_stats(trial, "shared_output", step, outs[2 * step])
        assert_stats(trial, "shared#1_output", step, outs[2 * step + 1])
        # One gradient per step: both uses accumulated, as torch's .grad.
        assert_stats(trial, "gradient/shared.weight", step, grads[step])


def test_labels_and_predictions(tmp_path):
    torch.manual_seed(6)
    labels = torch.tensor([0, 1, 1, 2, 2, 2])
    logits = torch.randn(6, 3)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP,
                            num_classes=3) as hook:
        hook.save_labels(labels, logits)
        hook.step()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert "labels" in trial.step_stats(0).index
    counts, out_of_range = trial.tensor("labels").label_counts(0)
    assert list(counts) == [1, 2, 3] and out_of_range == 0
    expected = np.zeros((3, 3), dtype=np.uint64)
    for label, predicted in zip(labels.tolist(), logits.argmax(1).tolist()):
        expected[label, predicted] += 1
    np.testing.assert_array_equal(trial.tensor("labels").confusion(0), expected)
    assert trial.tensor("predictions").label_counts(0) is None


def test_a_rule_stops_a_faulty_run(tmp_path):
    torch.manual_seed(7)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    stopped_at = None
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run")) as hook:  # default rules
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(40):
            if step == 10:
                with torch.no_grad():
                    model.fc1.weight[0, 0] = float("nan")  # the fault
            opt.zero_grad()
            loss_fn(model(torch.randn(8, 10)), torch.randint(0, 4, (8,))).backward()
            opt.step()
            if hook.should_stop():
                stopped_at = step
                break
        reason = hook.stop_reason()
    # A finding at step s stops training before step s + 2 begins.
    assert stopped_at is not None and 10 <= stopped_at <= 11, stopped_at
    assert "nan" in reason.lower()
    found = trials.create_trial(str(tmp_path / "run")).findings()
    assert "nan_origin" in set(found["type"])
    assert found[found["type"] == "nan_origin"]["first_step"].min() == 10


def test_a_clean_run_has_no_findings(tmp_path):
    torch.manual_seed(8)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run")) as hook:
        train(CNN(), hook, 30, (8, 1, 8, 8), seed=3)
        assert not hook.should_stop()
    assert trials.create_trial(str(tmp_path / "run")).findings().empty


def pretrained_mlp():
    """An MLP trained to its plateau on a learnable task (the class is the
    argmax of a fixed linear map of x), and that task's batches."""
    g = torch.Generator().manual_seed(11)
    teacher = torch.randn(10, 4, generator=g)

    def batch():
        x = torch.randn(32, 10, generator=g)
        return x, (x @ teacher).argmax(1)

    torch.manual_seed(12)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(400):
        x, y = batch()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return model, batch


def resume(tmp_path, name, steps=240, labels=None, set_train=False, **hook_args):
    """Trains pretrained_mlp() on for `steps` steps under a hook with the
    default rules; returns (run, findings, rules summary, the losses).
    labels: "save" (save_labels), "loss" (register_loss's own), None (neither)."""
    model, batch = pretrained_mlp()
    # A small learning rate: the loss stays on its plateau, where the
    # minibatches' noise moves its window medians by +-30%.
    opt = torch.optim.SGD(model.parameters(), lr=0.002)
    loss_fn = torch.nn.CrossEntropyLoss()
    run = str(tmp_path / name)
    losses, seen = [], []
    with tstat.pytorch.Hook(out_dir=run, num_classes=4 if labels == "save" else 0,
                            **hook_args) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn, labels=labels == "loss")
        if set_train:
            hook.set_mode(modes.TRAIN)
        for _ in range(steps):
            x, y = batch()
            seen.append(y)
            opt.zero_grad()
            out = model(x)
            if labels == "save":
                hook.save_labels(y, out)
            loss = loss_fn(out, y)
            loss.backward()
            losses.append(loss.item())
            opt.step()
            if hook.should_stop():
                break
    with open(os.path.join(run, "rules-00000.json")) as f:
        summary = json.load(f)
    return trials.create_trial(run), summary, losses, torch.cat(seen)


def test_a_resumed_run_keeps_its_step_numbers_and_is_not_judged_from_its_start(tmp_path):
    # The resumed model is on its plateau (well below chance, ln 4 = 1.39).
    trial, summary, losses, _ = resume(tmp_path, "resumed", start_step=400)
    assert np.median(losses[:20]) < 0.3 and len(losses) == 240
    assert trial.steps() == list(range(400, 640))  # GLOBAL steps: no set_mode
    assert trial.findings().empty
    notes = "\n".join(summary.get("diagnostics", []))
    assert "(worker 0, GLOBAL) began at step 400 (a run resumed from a checkpoint)" in notes, notes
    # In TRAIN mode the first TRAIN step is numbered 400 too.
    trial, summary, _, _ = resume(tmp_path, "train", start_step=400, set_train=True)
    assert trial.steps(mode=modes.TRAIN) == list(range(400, 640))
    assert trial.findings().empty
    # Its training labels tell the rule the same without the step numbers:
    # the chance level is their entropy (the test's own count of them).
    # register_loss gives them by itself (a CrossEntropyLoss called with
    # scores [n, 4] and class ids [n]), save_labels explicitly.
    for how in ("save", "loss"):
        trial, summary, losses, labels = resume(tmp_path, f"labels_{how}", labels=how)
        assert trial.steps() == list(range(240)) and trial.findings().empty, how
        q = torch.bincount(labels[:20 * 2 * 32]).double() / (20 * 2 * 32)
        entropy = -(q[q > 0] * q[q > 0].log()).sum().item()
        notes = "\n".join(summary.get("diagnostics", []))
        assert "began learned" in notes and f"(their entropy, {entropy:.6g} nats)" in notes, notes
        counts, _ = trial.tensor("labels").label_counts(0)
        assert list(counts) == torch.bincount(labels[:32], minlength=4).tolist(), how
    # Neither (a job restarted from its checkpoint with its steps numbered
    # from 0, a loss without labels): the rule cannot tell the plateau from
    # a network that learns nothing, so it reports it as an error and does
    # not stop the run.
    trial, summary, losses, _ = resume(tmp_path, "fresh")
    found = trial.findings()
    assert list(found["type"]) == ["loss_not_decreasing"], found
    assert int(found["first_step"].iloc[0]) >= 199 and len(losses) == 240
    assert list(found["severity"]) == ["error"], found
    assert "does not stop training" in found["message"].iloc[0]


def teacher_run(tmp_path, name, opt_name, lr, warmup=1, steps=230, scaler=None, accumulate=1,
                trained=None, schedule=None, layer_norm=False, config=None, labels="loss"):
    """An MLP on classes drawn from a random linear teacher with label noise
    (harder than the digits), under a hook with the default rules; returns
    (the losses, the findings). `scaler(model)`: a LossScaler that makes the
    backward pass and the update; `accumulate`: micro-batches (hook steps)
    per optimizer step; `trained(model)`: the parameters the optimizer gets;
    `schedule(opt)`: the learning-rate scheduler (default: the warmup);
    `layer_norm`: a LayerNorm after the first layer (weights near 1);
    `labels`: "loss" (register_loss gives them), "save" (save_labels) or
    None (no labels)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(100)
    teacher = torch.randn(20, 10, generator=g)
    x_all = torch.randn(2000, 20, generator=g)
    y_all = (x_all @ teacher + 2.0 * torch.randn(2000, 10, generator=g)).argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 10))
    if layer_norm:
        model.insert(2, torch.nn.LayerNorm(64))
    params = list(trained(model) if trained else model.parameters())
    opt = torch.optim.Adam(params, lr=lr) if opt_name == "adam" else \
        torch.optim.SGD(params, lr=lr, momentum=0.9 if opt_name == "momentum" else 0)
    sched = schedule(opt) if schedule else \
        torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    scaling = scaler(model) if scaler else None  # its gradient hooks come first
    with tstat.pytorch.Hook(out_dir=str(tmp_path / name), config=config,
                            num_classes=10 if labels == "save" else 0) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn, labels=labels == "loss")
        for step in range(steps):
            idx = torch.arange(step * 64, step * 64 + 64) % 2000
            if step % accumulate == 0:
                opt.zero_grad()
            logits = model(x_all[idx])
            if labels == "save":
                hook.save_labels(y_all[idx], logits)
            loss = loss_fn(logits, y_all[idx])
            if scaling:
                scaling.step(step, loss, opt, list(model.parameters()))
            else:
                (loss / accumulate).backward()
                if (step + 1) % accumulate == 0:
                    opt.step()
            if (step + 1) % accumulate == 0:
                sched.step()
            losses.append(loss.item())
            if hook.should_stop():
                break
    return losses, trials.create_trial(str(tmp_path / name)).findings()


def test_slow_healthy_trainings_are_not_stopped_and_a_learning_rate_of_0_is(tmp_path):
    # Healthy trainings whose loss stays within 10% of its start for 60-300
    # steps (a hard task, plain SGD, a long warmup): a rule asking for 10% in
    # 40 steps stops each of them at step 39.
    for name, opt_name, lr, warmup in (("adam", "adam", 1e-3, 1), ("sgd", "sgd", 0.01, 1),
                                       ("warmup", "adam", 1e-3, 1000)):
        losses, found = teacher_run(tmp_path, name, opt_name, lr, warmup)
        assert len(losses) == 230 and found.empty, (name, found)
        assert np.median(losses[-20:]) < 0.99 * np.median(losses[:20]), name
    # Nothing learns: weight_update_ratio after 64 steps without any weight
    # changing, loss_not_decreasing at the horizon (200 steps), an error. With
    # the labels captured, which show the loss began at chance, it becomes
    # critical once the loss has been flat for stop_horizon steps (1,000; a
    # network may sit at chance that long before it learns): the run stops.
    # Without them it stays an error (it could be a plateau the run began on)
    # and the run goes on.
    stop_at_210 = {"rules": {"enabled": True, "config": {"defaults": True, "rules": [
        {"type": "loss_not_decreasing", "parameters": {"stop_horizon": 210}}]}}}
    for how in ("save", "loss"):  # save_labels, or register_loss's own
        losses, found = teacher_run(tmp_path, f"lr0_{how}", "sgd", 0.0, labels=how)
        rules = found.groupby("type")["first_step"].min().to_dict()
        assert set(rules) == {"weight_update_ratio", "loss_not_decreasing"}, (how, found)
        assert rules["loss_not_decreasing"] == 199 and len(losses) == 230, how
        assert set(found["severity"]) == {"error"}, found
        losses, found = teacher_run(tmp_path, f"lr0_{how}_stop", "sgd", 0.0, labels=how,
                                    config=stop_at_210)
        ld = found[found["type"] == "loss_not_decreasing"]
        assert int(ld["first_step"].min()) == 199 and len(losses) <= 212, (how, len(losses))
        assert "critical" in set(ld["severity"]), found
    losses, found = teacher_run(tmp_path, "lr0_unlabelled", "sgd", 0.0, labels=None)
    ld = found[found["type"] == "loss_not_decreasing"]
    assert list(ld["first_step"]) == [199] and list(ld["severity"]) == ["error"], found
    assert len(losses) == 230


def test_gradient_accumulation_is_not_a_finding_and_a_layer_left_untrained_is(tmp_path):
    # Each micro-batch is a hook step: 7 of every 8 change no weight.
    for k in (8, 32):
        losses, found = teacher_run(tmp_path, f"accumulate{k}", "adam", 1e-3, accumulate=k,
                                    steps=320)
        assert len(losses) == 320 and found.empty, (k, found)
    # A layer left out of the optimizer (a classic bug) while the others train.
    losses, found = teacher_run(tmp_path, "left_out", "adam", 1e-3, steps=40,
                                trained=lambda m: [p for n, p in m.named_parameters()
                                                   if not n.startswith("2.")])
    wur = found[found["type"] == "weight_update_ratio"]
    assert set(wur["tensor"]) == {"2.weight"} and wur["first_step"].min() == 1, found
    assert "it is not trained" in wur["message"].iloc[0]


def test_schedules_ending_near_zero_are_not_findings_and_a_sudden_drop_is(tmp_path):
    lr_sched = torch.optim.lr_scheduler
    # A learning rate annealed towards 0 at the end of training (as OneCycle
    # and cosine schedules do), here by 0.85 a step from step 100: from about
    # step 185 the updates fall through weight_update_ratio's threshold.
    def fade(opt):
        return lr_sched.LambdaLR(opt, lambda s: 1.0 if s < 100 else 0.85 ** (s - 100))

    for opt_name, lr in (("adam", 1e-3), ("momentum", 0.02)):
        losses, found = teacher_run(tmp_path, f"fade_{opt_name}", opt_name, lr, schedule=fade)
        assert len(losses) == 230 and found.empty, (opt_name, found)
        # Judging every small ratio (anneal_factor 0) shows those updates.
        _, every = teacher_run(tmp_path, f"fade_{opt_name}_all", opt_name, lr, schedule=fade,
                               config={"rules": {"enabled": True, "config": {
                                   "defaults": True, "rules": [{"type": "weight_update_ratio",
                                   "parameters": {"anneal_factor": 0}}]}}})
        assert set(every["type"]) == {"weight_update_ratio"}, (opt_name, every)
        assert every["first_step"].min() > 150, (opt_name, every)
    # A learning rate that falls at once to 1e-6 of itself at step 150 (1e-9:
    # most float32 updates round away, the ones of weights near 0 do not).
    losses, found = teacher_run(tmp_path, "drop", "adam", 1e-3, schedule=lambda o: (
        lr_sched.LambdaLR(o, lambda s: 1.0 if s < 150 else 1e-6)))
    wur = found[found["type"] == "weight_update_ratio"]
    assert len(wur) > 0 and wur["first_step"].min() in (150, 151), found


def test_start_step_numbers_manual_steps_and_rejects_bad_values(tmp_path):
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), step_on="manual", start_step=7) as hook:
        for v in (1.0, 2.0, 3.0):
            hook.save_scalar("loss", v)
            hook.step()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.steps() == [7, 8, 9]
    assert list(trial.series("loss").to_numpy()) == [1.0, 2.0, 3.0]
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(tstat.Error) as e:
            tstat.pytorch.Hook(out_dir=str(tmp_path / "bad"), start_step=bad)
        assert e.value.code == "invalid_argument" and "start_step" in e.value.message


class ResBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c)
        self.c2, self.b2 = torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


def test_conventional_architectures_have_no_findings(tmp_path):
    # Convolutions with a bias before BatchNorm (the bias's gradient is
    # rounding noise: not a vanishing gradient), residual blocks, dropout; a
    # small transformer encoder (GELU, LayerNorm, attention).
    torch.manual_seed(9)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), ResBlock(8),
        torch.nn.MaxPool2d(2), ResBlock(8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Dropout(0.3), torch.nn.Linear(8, 3))
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, activation="gelu",
                                             batch_first=True)
    encoder = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 2), torch.nn.Flatten(),
                                  torch.nn.LayerNorm(6 * 16), torch.nn.Linear(6 * 16, 3))
    for name, model, shape in (("cnn", cnn, (16, 1, 8, 8)), ("encoder", encoder, (16, 6, 16))):
        with tstat.pytorch.Hook(out_dir=str(tmp_path / name)) as hook:
            train(model, hook, 40, shape, seed=4, lr=0.02)
            assert not hook.should_stop()
        summary = json.load(open(tmp_path / name / "rules-00000.json"))
        assert trials.create_trial(str(tmp_path / name)).findings().empty, \
            (name, summary.get("diagnostics"))
        if name == "cnn":
            notes = "\n".join(summary.get("notes", []))
            assert "gradient/0.bias and 4 more bias(es) have no gradient" in notes, notes


class FunctionalReluNet(torch.nn.Module):
    """ReLUs called as functions: after a layer, and after a sum that two
    layers take in; and an nn.ReLU module whose output a layer takes in."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.skip = (torch.nn.Linear(10, 16), torch.nn.Linear(16, 16),
                                         torch.nn.Linear(10, 16))
        self.fc3, self.side, self.out = (torch.nn.Linear(16, 16), torch.nn.Linear(16, 3),
                                         torch.nn.Linear(16, 3))
        self.act = torch.nn.ReLU()

    def forward(self, x):
        h = torch.nn.functional.relu(self.fc1(x))  # fc1.relu_output, read where fc2 takes it
        s = (self.fc2(h) + self.skip(x)).relu()    # fc3_input.relu_output (side: not again)
        return self.out(self.act(self.fc3(s))) + self.side(s)


def test_relus_called_as_functions_are_captured_and_judged(tmp_path):
    torch.manual_seed(3)
    model = FunctionalReluNet()
    seen = {"fc2": [], "fc3": []}  # torch's own stats of what they take in, by step
    for name in seen:
        getattr(model, name).register_forward_pre_hook(
            lambda _m, i, name=name: seen[name].append(torch_stats(i[0])))
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(model, hook, 6, (8, 10), seed=1)
    trial = trials.create_trial(str(tmp_path / "run"))
    relus = sorted(n for n in trial.tensor_names() if n.endswith(".relu_output"))
    assert relus == ["fc1.relu_output", "fc3_input.relu_output"], relus
    # The module's output is captured once, as a module output (named by its
    # class: "act" does not say which activation it is).
    assert "act.ReLU_output" in trial.tensor_names()
    for step in (1, 4):
        assert_stats(trial, "fc1.relu_output", step, seen["fc2"][step])
        assert_stats(trial, "fc3_input.relu_output", step, seen["fc3"][step])
    assert seen["fc2"][4]["zero_count"] > 0
    assert trial.findings().empty

    # A layer whose every unit is dead: dead_relu names the ReLU after it.
    torch.manual_seed(3)
    dead = FunctionalReluNet()
    with torch.no_grad():
        dead.fc1.bias.fill_(-100.0)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "dead")) as hook:
        train(dead, hook, 6, (8, 10), seed=1)
    found = trials.create_trial(str(tmp_path / "dead")).findings()
    dead_relu = found[found["type"] == "dead_relu"]
    assert set(dead_relu["tensor"]) == {"fc1.relu_output"}, found[["type", "tensor"]]

    # functional_activations=False: not captured.
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "off"), config=EVERY_STEP,
                            functional_activations=False) as hook:
        train(FunctionalReluNet(), hook, 2, (8, 10))
    names = trials.create_trial(str(tmp_path / "off")).tensor_names()
    assert not [n for n in names if n.endswith(".relu_output")], names


class UnitsNet(torch.nn.Module):
    """Units on the last axis and on axis 1 of rank-3 tensors: a linear
    layer on tokens ([batch, tokens, features]) and an nn.ReLU module after
    it; Conv1d ([batch, channels, length]) with a ReLU called as a function;
    Conv1d, BatchNorm1d and an nn.ReLU module after them; a tanh gate on the
    tokens."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Linear(6, 32)
        self.tok_act = torch.nn.ReLU()
        self.conv1 = torch.nn.Conv1d(6, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv1d(6, 16, 3, padding=1)
        self.pool1 = torch.nn.AdaptiveAvgPool1d(1)  # takes the ReLU's output in
        self.bn2 = torch.nn.BatchNorm1d(16)
        self.act2 = torch.nn.ReLU()
        self.gate, self.gate_act = torch.nn.Linear(6, 20), torch.nn.Tanh()
        self.head = torch.nn.Linear(32 + 16 + 16 + 20, 3)

    def forward(self, x):  # x: [batch, tokens, 6]
        t = self.tok_act(self.tok(x)).mean(1)
        c = x.transpose(1, 2)
        c1 = self.pool1(torch.nn.functional.relu(self.conv1(c))).flatten(1)
        c2 = self.act2(self.bn2(self.conv2(c))).mean(2)
        g = self.gate_act(self.gate(x)).mean(1)
        return self.head(torch.cat([t, c1, c2, g], 1))


UNITS = {"tok_act.ReLU_output": (2, 32), "conv1.relu_output": (1, 16),
         "act2.ReLU_output": (1, 16)}  # name -> (units' axis, units)


def per_unit_rows(run):
    """name -> {step: rows of /channels} of a run, read with h5py."""
    import h5py
    out = {}
    for path in sorted((run / "worker-00000").glob("seg-*.h5")):
        with h5py.File(path, "r") as f:
            names = {int(t["id"]): t["name"].decode() for t in f["tensors"][...]}
            for row in f["channels"][...] if "channels" in f else []:
                out.setdefault(names[int(row["tensor_id"])], {}).setdefault(
                    int(row["global_step"]), []).append(row)
    return out


def test_units_are_a_sequences_features_and_a_conv1d_s_channels(tmp_path):
    torch.manual_seed(5)
    model = UnitsNet()
    zeros = {}  # (name, step) -> torch's zero count of each unit
    step = [0]

    def keep(name, axis):
        def on(_m, _i, out):
            dims = [d for d in range(out.dim()) if d != axis]
            zeros[(name, step[0])] = (out.detach() == 0).sum(dims).tolist()
        return on
    model.tok_act.register_forward_hook(keep("tok_act.ReLU_output", 2))
    model.act2.register_forward_hook(keep("act2.ReLU_output", 1))
    model.conv1.register_forward_hook(
        lambda _m, _i, out: zeros.__setitem__(("conv1.relu_output", step[0]),
                                              (out.detach() <= 0).sum((0, 2)).tolist()))
    weights = []  # tok.weight where tstat reads it (after the backward), by step

    def per_step(s, m):
        weights.append(m.tok.weight.detach().clone())
        step[0] = s + 1
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(model, hook, 4, (8, 12, 6), per_step=per_step)
    rows = per_unit_rows(tmp_path / "run")
    trial = trials.create_trial(str(tmp_path / "run"))
    for name, (axis, units) in UNITS.items():
        for s in (1, 3):
            got = sorted(rows[name][s], key=lambda r: int(r["channel"]))
            assert [int(r["axis"]) for r in got] == [axis] * units, (name, s)
            assert [int(r["count"]) for r in got] == [8 * 12] * units, (name, s)
            assert [int(r["zero_count"]) for r in got] == zeros[(name, s)], (name, s)
            # The same through the trial: a row per unit.
            df = trial.tensor(name).per_channel(s)
            assert df.attrs["axis"] == axis and len(df) == units, (name, s)
            assert df["zero_count"].tolist() == zeros[(name, s)], (name, s)
            assert df["max"].tolist() == pytest.approx([float(r["max"]) for r in got])
    assert trial.findings().empty
    assert trial.tensor("tok.weight").per_channel(1) is None
    # The weights' deltas (weight_update_ratio's): the update between two steps.
    for s in (1, 3):
        moved = (weights[s] - weights[s - 1]).double()
        d = trial.tensor("tok.weight").delta(s)
        assert d["count"] == moved.numel() and d["nonfinite_pairs"] == 0
        # changed: beyond delta_atol + delta_rtol * |previous| (1e-8, 1e-5)
        limit = 1e-8 + 1e-5 * weights[s - 1].double().abs()
        assert d["changed_count"] == int((moved.abs() > limit).sum())
        assert d["l2"] == pytest.approx(moved.norm().item(), rel=1e-6)
        assert d["l1"] == pytest.approx(moved.abs().sum().item(), rel=1e-6)
        assert d["amax"] == pytest.approx(moved.abs().max().item(), rel=1e-6)
    assert trial.tensor("tok_act.ReLU_output").delta(1) is None

    # Seen first under torch.no_grad() (a validation pass before training):
    # an nn.ReLU defined after a Conv1d takes its channels.
    seq = torch.nn.Sequential(torch.nn.Conv1d(6, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(),
                              torch.nn.Linear(16, 3))
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "eval_first"), config=EVERY_STEP) as hook:
        hook.register_module(seq)
        hook.set_mode(modes.EVAL)
        with torch.no_grad():
            seq(torch.randn(8, 6, 12))
        hook.set_mode(modes.TRAIN)
        seq(torch.randn(8, 6, 12)).sum().backward()
    rows = per_unit_rows(tmp_path / "eval_first")
    assert {int(r["axis"]) for step in rows["1.ReLU_output"].values() for r in step} == {1}

    # 70% of the units dead in each: along the tokens or the channels' length
    # every position would still look 30% alive.
    torch.manual_seed(5)
    dead = UnitsNet()
    with torch.no_grad():
        dead.tok.bias[:23] = -100.0
        dead.conv1.bias[:12] = -100.0
        dead.bn2.bias[:12] = -100.0
        dead.gate.weight[:14] *= 2000.0  # 70% of the gate's units saturated
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "dead")) as hook:
        train(dead, hook, 6, (8, 12, 6))
    dead_trial = trials.create_trial(str(tmp_path / "dead"))
    found = dead_trial.findings()
    assert set(found[found["type"] == "dead_relu"]["tensor"]) == set(UNITS), \
        found[["type", "tensor"]]
    assert set(found[found["type"] == "saturated_activation"]["tensor"]) == \
        {"gate_act.Tanh_input"}, found[["type", "tensor"]]
    # Which units: the ones whose biases were set.
    for name, killed in (("tok_act.ReLU_output", 23), ("conv1.relu_output", 12)):
        df = dead_trial.tensor(name).per_channel(5)
        never = df[df["zero_count"] + df["neg_count"] == df["count"]]
        assert list(never.index) == list(range(killed)), (name, list(never.index))


class BlitzNet(torch.nn.Module):
    """PyTorch's 60-minute blitz LeNet: every ReLU a function, the
    convolutions' pooled by F.max_pool2d before a layer takes them in, the
    second flattened too; fc1's through F.dropout."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(1, 6, 3), torch.nn.Conv2d(6, 16, 3)
        self.fc1, self.fc2 = torch.nn.Linear(16 * 6 * 6, 32), torch.nn.Linear(32, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), 0.2, training=self.training)
        return self.fc2(x)


def test_relus_reaching_a_layer_through_pooling_views_or_dropout_are_read(tmp_path):
    torch.manual_seed(6)
    model = BlitzNet()
    seen = {}  # torch's own stats of each ReLU's output, by step
    step = [0]
    for name in ("conv1", "conv2", "fc1"):
        getattr(model, name).register_forward_hook(
            lambda _m, _i, out, name=name: seen.__setitem__((name, step[0]),
                                                            torch_stats(F.relu(out))))
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(model, hook, 4, (8, 1, 30, 30),
              per_step=lambda s, _m: step.__setitem__(0, s + 1))
    trial = trials.create_trial(str(tmp_path / "run"))
    relus = sorted(n for n in trial.tensor_names() if n.endswith("relu_output"))
    assert relus == ["conv1.relu_output", "conv2.relu_output", "fc1.relu_output"], relus
    for name in ("conv1", "conv2", "fc1"):
        for s in (1, 3):
            assert_stats(trial, f"{name}.relu_output", s, seen[(name, s)])
    assert trial.tensor("conv2.relu_output").per_channel(2).attrs["axis"] == 1
    assert trial.findings().empty, trial.findings()[["type", "tensor"]]

    torch.manual_seed(6)
    dead = BlitzNet()
    with torch.no_grad():
        dead.conv2.bias.fill_(-100.0)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "dead")) as hook:
        train(dead, hook, 5, (8, 1, 30, 30))
    found = trials.create_trial(str(tmp_path / "dead")).findings()
    assert "conv2.relu_output" in set(found[found["type"] == "dead_relu"]["tensor"]), \
        found[["type", "tensor"]]


class FunctionalActivationNet(torch.nn.Module):
    """Activations other than ReLU called as functions: after a layer (tanh,
    sigmoid as a method, GELU); after a sum (a GELU keeps its input, a tanh
    its output), and after another activation that no layer takes in; and in
    place (its input is gone)."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (torch.nn.Linear(10, 16), torch.nn.Linear(16, 16),
                                        torch.nn.Linear(16, 16))
        self.fc4, self.fc5, self.fc6, self.out = (torch.nn.Linear(16, 16), torch.nn.Linear(16, 16),
                                                  torch.nn.Linear(16, 16), torch.nn.Linear(16, 3))
        self.skip, self.fc7 = torch.nn.Linear(10, 16), torch.nn.Linear(16, 16)
        with torch.no_grad():
            self.fc1.weight.mul_(scale)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))                       # fc1.tanh_input
        h = self.fc2(h).sigmoid()                         # fc2.sigmoid_input
        h = torch.nn.functional.gelu(self.fc3(h))         # fc3.gelu_input
        self.summed = self.fc4(h) + self.skip(x)
        s = torch.nn.functional.gelu(self.summed)         # fc5_input.gelu_input
        s = torch.tanh(self.fc5(s) + s)                   # fc7_input.tanh_output
        s = torch.sigmoid(torch.tanh(self.fc7(s)))        # fc6_input.sigmoid_output
        return self.out(self.fc6(s).tanh_())              # in place: not read


def test_activations_called_as_functions_have_their_inputs_captured(tmp_path):
    torch.manual_seed(4)
    model = FunctionalActivationNet()
    rec = Recorder({name: getattr(model, name) for name in ("fc1", "fc2", "fc3")})
    sums = []  # torch's stats of the sum that went into the GELU, by step
    model.fc5.register_forward_pre_hook(lambda _m, _i: sums.append(torch_stats(model.summed)))
    fed = {"fc7": [], "fc6": []}  # torch's stats of the tanh's and sigmoid's outputs
    for name in fed:
        getattr(model, name).register_forward_pre_hook(
            lambda _m, i, name=name: fed[name].append(torch_stats(i[0])))
    with pytest.warns(RuntimeWarning, match="fc6_output was changed in place"), \
            tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(model, hook, 5, (8, 10), seed=2,
              per_step=lambda step, _m: setattr(rec, "step", step + 1))
    trial = trials.create_trial(str(tmp_path / "run"))
    inputs = sorted(n for n in trial.tensor_names() if "." in n and n.endswith("_input"))
    assert inputs == ["fc1.tanh_input", "fc2.sigmoid_input", "fc3.gelu_input",
                      "fc5_input.gelu_input"], inputs
    assert set(inputs) <= set(trial.tensor_names(collection="inputs"))
    for step in (0, 3):
        for name, activation in (("fc1", "tanh"), ("fc2", "sigmoid"), ("fc3", "gelu")):
            assert_stats(trial, f"{name}.{activation}_input", step, rec.values[(name, step)])
        assert_stats(trial, "fc5_input.gelu_input", step, sums[step])
        assert_stats(trial, "fc7_input.tanh_output", step, fed["fc7"][step])
        assert_stats(trial, "fc6_input.sigmoid_output", step, fed["fc6"][step])
    outputs = sorted(n for n in trial.tensor_names() if "." in n and n.endswith("_output")
                     and not n.endswith("relu_output"))
    assert outputs == ["fc6_input.sigmoid_output", "fc7_input.tanh_output"], outputs
    assert trial.findings().empty, trial.findings()[["type", "tensor"]]

    # fc1's tanh saturated by its weights (inputs of std ~1,000):
    # saturated_activation and poor_weight_initialization name its input.
    torch.manual_seed(4)
    with pytest.warns(RuntimeWarning, match="fc6_output"), \
            tstat.pytorch.Hook(out_dir=str(tmp_path / "saturated")) as hook:
        train(FunctionalActivationNet(scale=2000.0), hook, 4, (64, 10), seed=2)
    found = trials.create_trial(str(tmp_path / "saturated")).findings()
    for rule in ("saturated_activation", "poor_weight_initialization"):
        assert set(found[found["type"] == rule]["tensor"]) == {"fc1.tanh_input"}, \
            found[["type", "tensor"]]

    # functional_activations=False: not captured.
    with pytest.warns(RuntimeWarning, match="fc6_output"), \
            tstat.pytorch.Hook(out_dir=str(tmp_path / "off"), config=EVERY_STEP,
                               functional_activations=False) as hook:
        train(FunctionalActivationNet(), hook, 2, (8, 10))
    names = trials.create_trial(str(tmp_path / "off")).tensor_names()
    assert not [n for n in names if "." in n and n.endswith("_input")], names


class SummedGate(torch.nn.Module):
    """A tanh and a sigmoid of sums (a residual, an LSTM-like gate): autograd
    keeps their outputs, not the sums."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.a, self.b = torch.nn.Linear(10, 16), torch.nn.Linear(10, 16)
        self.c, self.d = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 3)
        with torch.no_grad():
            self.a.weight.mul_(scale)

    def forward(self, x):
        h = torch.tanh(self.a(x) + self.b(x))         # c_input.tanh_output
        g = torch.sigmoid(self.c(h) + 1.0)            # d_input.sigmoid_output
        return self.out(self.d(g) * h)


def test_a_tanh_after_a_sum_is_judged_on_its_output(tmp_path):
    torch.manual_seed(5)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run")) as hook:
        train(SummedGate(), hook, 6, (64, 10))
    trial = trials.create_trial(str(tmp_path / "run"))
    assert {"c_input.tanh_output", "d_input.sigmoid_output"} <= set(trial.tensor_names())
    assert trial.findings().empty, trial.findings()[["type", "tensor"]]
    # The sum's weights scaled up: |a(x) + b(x)| in the thousands, the tanh
    # at +-1 (float32), no gradient through it.
    torch.manual_seed(5)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "saturated")) as hook:
        train(SummedGate(scale=2000.0), hook, 6, (64, 10))
    found = trials.create_trial(str(tmp_path / "saturated")).findings()
    sat = found[found["type"] == "saturated_activation"]
    assert set(sat["tensor"]) == {"c_input.tanh_output"}, found[["type", "tensor"]]
    assert "tanh output" in sat["message"].iloc[0], sat["message"].iloc[0]


class KeptActivation(torch.nn.Module):
    """A GELU's output made at the first step, in its loss (so the backward
    frees what the GELU kept), then fed again to a branch no loss uses."""

    def __init__(self):
        super().__init__()
        self.fc1, self.side = torch.nn.Linear(10, 16), torch.nn.Linear(16, 3)
        self.fc2, self.out = torch.nn.Linear(10, 16), torch.nn.Linear(16, 3)
        self.kept = None

    def forward(self, x):
        first = self.kept is None
        if first:
            self.kept = torch.nn.functional.gelu(self.fc1(x[:1]) + 1)
        side = self.side(self.kept)
        out = self.out(torch.nn.functional.gelu(self.fc2(x) + 1))
        return out + side if first else out


def test_an_activation_kept_from_a_freed_graph_does_not_stop_training(tmp_path):
    # Reading what the GELU kept raises once a backward freed it: the hook
    # reads nothing then, and training goes on.
    torch.manual_seed(7)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        losses = train(KeptActivation(), hook, 3, (8, 10))
    assert len(losses) == 3
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.tensor("side_input.gelu_input").steps() == [0], trial.tensor_names()
    assert trial.tensor("out_input.gelu_input").steps() == [0, 1, 2]


class GenericallyNamedActivations(torch.nn.Module):
    """Activation modules under names that do not say which (as timm's
    self.act and Hugging Face's act_fn are), and one that does."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.fc1, self.act = torch.nn.Linear(10, 16), torch.nn.Tanh()
        self.fc2, self.act_fn = torch.nn.Linear(16, 16), torch.nn.ReLU()
        self.fc3, self.gelu = torch.nn.Linear(16, 16), torch.nn.GELU()
        self.out = torch.nn.Linear(16, 3)
        with torch.no_grad():
            self.fc1.weight.mul_(scale)

    def forward(self, x):
        return self.out(self.gelu(self.fc3(self.act_fn(self.fc2(self.act(self.fc1(x)))))))


def test_activation_modules_are_named_by_their_class_when_their_name_does_not_say(tmp_path):
    torch.manual_seed(6)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        train(GenericallyNamedActivations(), hook, 3, (8, 10))
    names = trials.create_trial(str(tmp_path / "run")).tensor_names()
    for name in ("act.Tanh_input", "act.Tanh_output", "act_fn.ReLU_input", "act_fn.ReLU_output",
                 "gelu_input", "gelu_output"):
        assert name in names, names
    assert not {"act_input", "act_fn_output", "gelu.GELU_input"} & set(names), names
    # So the rules select them: a tanh saturated by fc1's weights.
    torch.manual_seed(6)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "saturated")) as hook:
        train(GenericallyNamedActivations(scale=2000.0), hook, 4, (64, 10))
    found = trials.create_trial(str(tmp_path / "saturated")).findings()
    assert set(found[found["type"] == "saturated_activation"]["tensor"]) == {"act.Tanh_input"}, \
        found[["type", "tensor"]]


def test_frozen_parameters_are_not_judged_while_frozen(tmp_path):
    # Fine-tuning with a frozen first layer, unfrozen at step 20: its weight
    # and gradient are captured from then on (steps 20-29), and
    # weight_update_ratio does not read the frozen weight's update of 0 as
    # too small.
    torch.manual_seed(5)
    model = MLP()
    for p in model.fc1.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(30):
            if step == 20:
                for p in model.fc1.parameters():
                    p.requires_grad = True
            opt.zero_grad()
            loss_fn(model(torch.randn(8, 10)), torch.randint(0, 4, (8,))).backward()
            last_grad = model.fc1.weight.grad.clone() if model.fc1.weight.grad is not None \
                else None
            opt.step()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.findings().empty, trial.findings()
    assert list(trial.tensor("fc1.weight").steps()) == list(range(20, 30))
    assert list(trial.tensor("fc2.weight").steps()) == list(range(30))
    # Its gradient too, from the first backward after it was unfrozen, with
    # torch's values (the last step's, read before the optimizer's update).
    assert list(trial.tensor("gradient/fc1.weight").steps()) == list(range(20, 30))
    assert_stats(trial, "gradient/fc1.weight", 29, torch_stats(last_grad))


def test_live_reading_from_a_second_process(tmp_path):
    run = tmp_path / "run"
    go = tmp_path / "go"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import os, time, torch, tstat.pytorch
        model = torch.nn.Linear(4, 2)
        hook = tstat.pytorch.Hook(out_dir={str(run)!r}, config={{
            "save_config": {{"save_interval": 1}},
            "pipeline": {{"flush_interval_steps": 1}}}}, rules=False)
        hook.register_module(model)
        step = 0
        while not os.path.exists({str(go)!r}) and step < 3000:
            model(torch.randn(3, 4)).sum().backward()
            step += 1
            time.sleep(0.01)
        hook.close()
    """))
    child = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.time() + 60
        while not run.exists() and time.time() < deadline:
            time.sleep(0.05)
        trial = None
        while trial is None and time.time() < deadline:
            try:
                trial = trials.create_trial(str(run))
            except tstat.Error:
                time.sleep(0.05)
        assert trial is not None
        assert trial.wait_for_steps([5], timeout=30)
        first = trial.steps()
        assert not trial.loaded_all_steps
        assert trial.wait_for_steps([first[-1] + 5], timeout=30)
        assert len(trial.steps()) > len(first)
        assert trial.series("gradient/weight", "l2").index[-1] >= first[-1] + 5
    finally:
        go.write_text("")
        assert child.wait(timeout=60) == 0
    trial.refresh()
    assert trial.loaded_all_steps


def test_bad_input_raises_or_warns_and_training_goes_on(tmp_path):
    with pytest.raises(tstat.Error) as e:
        tstat.pytorch.Hook(out_dir=str(tmp_path / "a"), config={"save_config": {"save_intervall": 1}})
    assert e.value.code == "invalid_argument" and "save_intervall" in e.value.message
    with pytest.raises(tstat.Error) as e:
        tstat.pytorch.Hook(out_dir=str(tmp_path / "a"), config="{not json")
    assert e.value.code == "invalid_argument"
    with pytest.raises(tstat.Error):
        tstat.pytorch.Hook(out_dir=str(tmp_path / "a"), step_on="sometimes")
    with pytest.raises(tstat.Error) as e:
        tstat.pytorch.Hook.create_from_json_file(str(tmp_path / "missing.json"))
    assert "missing.json" in e.value.message

    model = MLP()
    hook = tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP)
    with pytest.raises(tstat.Error) as e:
        hook.register_module("not a module")
    assert e.value.code == "invalid_argument"
    hook.register_module(model)
    with pytest.raises(tstat.Error):
        hook.save_tensor("x", [1, 2, 3])
    with pytest.raises(tstat.Error):
        hook.save_scalar("lr", "fast")
    with pytest.raises(tstat.Error):
        hook.set_mode("sideways")
    with pytest.raises(tstat.Error) as e:
        hook.save_labels(torch.tensor([1]), torch.randn(1, 2))
    assert "num_classes" in e.value.message
    # A dtype tstat does not reduce: a warning naming it, and the step goes on.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hook.save_tensor("mask", torch.ones(3, dtype=torch.bool))
        hook.save_tensor("shapeless", torch.empty(3, device="meta"))  # no storage to read
        hook.save_tensor("wide", torch.randn(4, 6).t())  # non-contiguous: read through a copy
        model(torch.randn(2, 10)).sum().backward()
    messages = [str(w.message) for w in caught]
    assert any("mask" in m and "torch.bool" in m for m in messages), messages
    assert any("shapeless" in m and "device 'meta'" in m for m in messages), messages
    # A parameter that is gone after registration is skipped, not read.
    model.fc2 = torch.nn.Linear(32, 4)
    model(torch.randn(2, 10)).sum().backward()
    hook.close()
    with pytest.raises(tstat.Error) as e:
        hook.save_scalar("lr", 0.1)
    assert e.value.code == "failed_precondition"
    with pytest.raises(tstat.Error):
        hook.step()
    model(torch.randn(2, 10)).sum().backward()  # hooks removed: nothing happens
    hook.close()  # twice: nothing

    trial = trials.create_trial(str(tmp_path / "run"))
    assert "mask" not in trial.tensor_names() and "shapeless" not in trial.tensor_names()
    assert list(trial.tensor("fc2.weight").steps()) == [0]
    assert list(trial.tensor("fc1.weight").steps()) == [0, 1]
    assert tuple(trial.tensor("wide").shape) == (6, 4)

    # A sparse gradient (nn.Embedding(sparse=True)) is read as its stored
    # rows, rows given twice summed: its norm is the dense gradient's.
    emb = torch.nn.Embedding(50, 4, sparse=True)
    grads = []
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "sparse"), config=EVERY_STEP) as h:
        h.register_module(emb)
        for ids in ([[1, 2], [3, 1]], [[7, 7], [7, 2]]):
            emb(torch.tensor(ids)).pow(2).sum().backward()  # accumulates: rows 1 2 3 7
            grads.append(emb.weight.grad.clone())
    trial = trials.create_trial(str(tmp_path / "sparse"))
    assert list(trial.tensor("weight").steps()) == [0, 1]
    for step, rows in ((0, 3), (1, 4)):
        values = grads[step].coalesce().values()
        assert tuple(values.shape) == (rows, 4)
        assert_stats(trial, "gradient/weight", step, torch_stats(values))
        got = trial.tensor("gradient/weight").stats(step)["l2"]
        assert got == pytest.approx(grads[step].to_dense().norm().item(), rel=1e-6)


def test_an_output_that_cannot_be_read_is_a_warning_not_an_error_in_the_forward(tmp_path):
    """The leaf modules' hooks (the outputs' _tstat.OutputHook, in C++; the
    activations' inputs', in Python): a tensor they cannot read - here a
    tensor subclass whose is_cuda raises - is a warning naming it, once; the
    forward goes on, the other tensors are captured, and the hook's lock is
    left free for other threads."""
    class Unreadable(torch.Tensor):
        @property
        def is_cuda(self):
            raise RuntimeError("no device today")

    class Odd(torch.nn.Module):
        def forward(self, x):
            return (x * 2).as_subclass(Unreadable)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Odd(), torch.nn.ReLU())
    hook = tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP, rules=False)
    hook.register_module(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            model(torch.randn(3, 4)).as_subclass(torch.Tensor).sum().backward()
    for name in ("1.Odd_output", "2.ReLU_input"):  # the C++ hook's, the Python one's
        messages = [str(w.message) for w in caught if name in str(w.message)]
        assert len(messages) == 1, (name, [str(w.message) for w in caught])
        assert "is not captured" in messages[0] and "no device today" in messages[0]
    free = []

    def take_and_give_back():
        free.append(hook._lock.acquire(timeout=5))
        if free[-1]:
            hook._lock.release()

    other = threading.Thread(target=take_and_give_back)
    other.start()
    other.join()
    assert free == [True]
    hook.close()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert list(trial.tensor("0.Linear_output").steps()) == [0, 1]
    assert list(trial.tensor("1.Odd_output").steps()) == []  # named when registered, never read

    # The hook type itself refuses what is not a hook's.
    with pytest.raises(TypeError):
        tstat._tstat.OutputHook(hook, "not a session", "p", True, True, torch.Tensor)
    with pytest.raises(TypeError):
        tstat._tstat.OutputHook(hook, hook._session, "p", True, True, 3)
    made = tstat._tstat.OutputHook(hook, hook._session, "p", True, True, torch.Tensor)
    with pytest.raises(TypeError):
        made(model, (torch.ones(1),))
    assert made(model, (torch.ones(1),), torch.ones(1)) is None  # closed: nothing


def test_large_outputs_are_read_at_once_and_not_held(tmp_path):
    """A CPU layer output of >= 8192 values is reduced when the layer
    returns (due; the first time on the training thread, then on tstat's
    capture thread where there are two processors) or dropped (not due):
    the hook does not keep it alive past the forward. Smaller ones wait for
    the step's one reduction."""
    import gc
    import weakref

    class Wide(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc = torch.nn.Linear(10, width)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            return self.relu(self.fc(x)).sum()

    for width, held in ((1024, False), (64, True)):
        torch.manual_seed(9)
        model = Wide(width)
        refs, stats = [], []

        def on_fc(_m, _i, out):
            refs.append(weakref.ref(out))  # the output ReLU does not save for backward
            stats.append(torch_stats(out))

        model.fc.register_forward_hook(on_fc)
        out_dir = tmp_path / f"run{width}"
        with tstat.pytorch.Hook(out_dir=str(out_dir),
                                config={"save_config": {"save_interval": 2}}, rules=False) as hook:
            hook.register_module(model)
            for step in range(5):
                loss = model(torch.randn(16, 10))
                gc.collect()
                assert (refs[-1]() is not None) == held, (width, step)
                loss.backward()
            background = hook.counters()["background_captures"]
        # Steps 2 and 4: fc_output, relu_input, relu_output and (10,240
        # values) fc.weight.
        if len(os.sched_getaffinity(0)) > 1:
            assert background == (0 if held else 8), (width, background)
        else:
            assert background == 0
        trial = trials.create_trial(str(out_dir))
        assert list(trial.tensor("fc_output").steps()) == [0, 2, 4]
        for step in (0, 2, 4):
            assert_stats(trial, "fc_output", step, stats[step])


class InPlaceBlock(torch.nn.Module):
    """torchvision's residual pattern: BatchNorm, an in-place residual add on
    its output, then ReLU(inplace=True)."""

    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)
        self.bn = torch.nn.BatchNorm1d(n)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.bn(self.fc(x))
        h += x
        return self.relu(h)


def test_tensors_changed_in_place_are_read_before_the_change_or_not_at_all(tmp_path):
    """An activation with inplace=True overwrites its input: the hook reads
    the input as it enters. A layer output changed in place later in the step
    (h += x) is not read with the changed values: at the first step it is
    dropped, with a warning and a counter; from then on it is read when the
    layer returns. Small (batched at the step's end) and large (read at once)
    tensors alike."""
    for n, batch in ((16, 8), (128, 128)):  # 128 and 16,384 values
        torch.manual_seed(3)
        model = InPlaceBlock(n)
        ref = {}

        def pre_relu(_m, inputs):
            ref.setdefault("relu_input", []).append(torch_stats(inputs[0]))

        def post_bn(_m, _i, out):
            ref.setdefault("bn_output", []).append(torch_stats(out))

        def post_relu(_m, _i, out):
            ref.setdefault("relu_output", []).append(torch_stats(out))

        model.relu.register_forward_pre_hook(pre_relu)
        model.bn.register_forward_hook(post_bn)
        model.relu.register_forward_hook(post_relu)
        out_dir = str(tmp_path / f"n{n}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tstat.pytorch.Hook(out_dir=out_dir, config=EVERY_STEP, rules=False) as hook:
                hook.register_module(model)
                for _ in range(3):
                    model(torch.randn(batch, n)).sum().backward()
                changed = hook.counters()["changed_in_place"]
        trial = trials.create_trial(out_dir)
        for step in range(3):
            assert_stats(trial, "relu_input", step, ref["relu_input"][step])
            assert_stats(trial, "relu_output", step, ref["relu_output"][step])
            assert trial.tensor("relu_input").stats(step)["min"] < 0  # not the rectified values
        messages = [str(w.message) for w in caught if "changed in place" in str(w.message)]
        if n * batch < 8192:  # held for the step's end, then changed by h += x
            assert changed == 1 and len(messages) == 1, (changed, messages)
            assert "bn_output was changed in place" in messages[0], messages
            assert list(trial.tensor("bn_output").steps()) == [1, 2]
        else:  # read when the layer returned
            assert changed == 0 and not messages, messages
            assert list(trial.tensor("bn_output").steps()) == [0, 1, 2]
            assert_stats(trial, "bn_output", 0, ref["bn_output"][0])
        for step in (1, 2):
            assert_stats(trial, "bn_output", step, ref["bn_output"][step])


class LateInPlace(torch.nn.Module):
    """A large layer output changed in place only from step 2 on."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 1024)
        self.mutate = False

    def forward(self, x):
        h = self.fc(x)
        if self.mutate:
            h += 1000.0
        return torch.tanh(h).sum()


def test_a_large_output_changed_in_place_while_read_in_the_background_is_dropped(tmp_path):
    """A large output left unchanged at first is then read on the capture
    thread; when code starts changing it in place, that step's read may have
    raced with the change: it is dropped (warning, counter), and from the
    next step on the output is read when the layer returns, before the
    change. Never are the changed values recorded."""
    torch.manual_seed(5)
    model = LateInPlace()
    ref = []
    model.fc.register_forward_hook(lambda _m, _i, out: ref.append(torch_stats(out)))
    out_dir = str(tmp_path / "run")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tstat.pytorch.Hook(out_dir=out_dir, config=EVERY_STEP, rules=False) as hook:
            hook.register_module(model)
            for step in range(5):
                model.mutate = step >= 2
                model(torch.randn(16, 8)).backward()
            changed = hook.counters()["changed_in_place"]
    trial = trials.create_trial(out_dir)
    messages = [str(w.message) for w in caught if "changed in place" in str(w.message)]
    if len(os.sched_getaffinity(0)) > 1:
        assert changed == 1 and len(messages) == 1, (changed, messages)
        assert "fc_output was changed in place" in messages[0]
        assert list(trial.tensor("fc_output").steps()) == [0, 1, 3, 4]
    else:  # no capture thread: every read is on the training thread
        assert changed == 0 and not messages, messages
        assert list(trial.tensor("fc_output").steps()) == [0, 1, 2, 3, 4]
    for step in trial.tensor("fc_output").steps():
        assert_stats(trial, "fc_output", step, ref[step])
        assert trial.tensor("fc_output").stats(step)["max"] < 100


class ClampedInForward(torch.nn.Module):
    """A large weight, clamped in place inside the forward from step 2 on
    (after the step began and its parameters were handed to the capture
    thread)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(128, 96)  # 12,288 weights
        self.clamp = False

    def forward(self, x):
        if self.clamp:
            with torch.no_grad():
                self.fc.weight.clamp_(-0.02, 0.02)
        return self.fc(x).square().mean()


class LateSet:
    """A session whose set() starts 50 ms late: the capture thread has read
    the parameters queued when the step began before the model's input is
    set, and before the forward clamps them."""

    def __init__(self, session):
        self._session = session

    def __getattr__(self, name):
        return getattr(self._session, name)

    def set(self, *args, **kwargs):
        time.sleep(0.05)
        return self._session.set(*args, **kwargs)


@pytest.mark.parametrize("late_set", [False, True])
def test_large_parameters_are_read_in_the_background_as_they_are_when_the_step_ends(
        tmp_path, late_set):
    """CPU parameters of 8,192 values or more are handed to the capture
    thread when a step begins (nothing changes them before the optimizer
    steps, after the step ends). Their records are the values at the step's
    end (their deltas too: tests/host/capture_early_test.cc), as torch sees
    them there; one changed in place
    during the step (clamped in the forward) is read again when the step
    ends: its record is the clamped values, and nothing is dropped. Also
    when their read finished before the forward began (late_set: a read
    taken back early was kept, unclamped, once in CI)."""
    torch.manual_seed(11)
    model = ClampedInForward()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ref = []
    out_dir = str(tmp_path / "run")
    config = {"save_config": {"save_interval": 1},
              "collections": [{"name": "weights", "stats": {"delta": True}}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tstat.pytorch.Hook(out_dir=out_dir, config=config, rules=False) as hook:
            hook.register_module(model)
            if late_set:  # the Python hooks' calls (the leaf modules' hook keeps the session)
                hook._session = LateSet(hook._session)
            for step in range(5):
                model.clamp = step >= 2
                opt.zero_grad()
                model(torch.randn(32, 128)).backward()  # the step ends here
                ref.append(torch_stats(model.fc.weight))
                opt.step()
            background = hook.counters()["background_captures"]
            changed = hook.counters()["changed_in_place"]
    assert changed == 0 and not [w for w in caught if "changed in place" in str(w.message)]
    # Handed over from step 1 on (the first step registers them).
    assert background == (4 if len(os.sched_getaffinity(0)) > 1 else 0)
    trial = trials.create_trial(out_dir)
    assert list(trial.tensor("fc.weight").steps()) == [0, 1, 2, 3, 4]
    for step in range(5):
        assert_stats(trial, "fc.weight", step, ref[step])
    assert trial.tensor("fc.weight").stats(3)["max"] <= 0.02  # clamped in step 3's forward


class LossScaler:
    """Dynamic loss scaling as torch.cuda.amp.GradScaler does it (scale the
    loss; at a step whose gradients hold Inf/NaN skip the optimizer step and
    halve the scale; double it after `growth` good steps), on the CPU: fp16's
    range is emulated by a tensor hook that turns a scaled gradient past
    65504 into Inf, as an fp16 backward would. `skip=False` is a broken
    scaler that applies the overflowed gradients."""

    def __init__(self, model, scale, growth, skip=True):
        self.scale, self.growth, self.skip, self.good = scale, growth, skip, 0
        self.skipped = []
        for p in model.parameters():  # before the hook's: tstat sees the Inf
            p.register_hook(lambda g: torch.where(g.abs() > 65504, g.sign() * float("inf"), g))

    def step(self, step, loss, opt, params):
        (loss * self.scale).backward()
        finite = all(torch.isfinite(p.grad).all() for p in params)
        if not finite:
            self.skipped.append(step)
            self.scale /= 2
            self.good = 0
            if self.skip:
                return
        for p in params:
            p.grad /= self.scale
        opt.step()
        self.good += 1
        if self.good % self.growth == 0:
            self.scale *= 2


def scaled_run(tmp_path, name, skip):
    """teacher_run with Adam under a LossScaler whose scale is far too large at
    the start (as DeepSpeed's 2^32 is for many models), growing every 25 good
    steps: overflows at the start, in a row, and then now and then. Returns
    the scaler, the losses, the trial and the rules summary."""
    made = []
    losses, _ = teacher_run(tmp_path, name, "adam", 1e-3, steps=200, scaler=lambda model: (
        made.append(LossScaler(model, 2.0 ** 24, 25, skip)) or made[0]))
    summary = json.load(open(tmp_path / name / "rules-00000.json"))
    return made[0], losses, trials.create_trial(str(tmp_path / name)), summary


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`")
def test_dynamic_loss_scaling_overflows_are_not_findings(tmp_path):
    scaler, losses, trial, summary = scaled_run(tmp_path, "amp", skip=True)
    # The scaler skipped updates at the start (several in a row) and later.
    skipped = scaler.skipped
    assert len(skipped) >= 8 and skipped[:4] == [0, 1, 2, 3] and skipped[-1] > 100, skipped
    # tstat saw the Inf gradients of those steps (the file says so) ...
    grads = [n for n in trial.tensor_names() if n.startswith("gradient/")]
    for s in skipped:
        inf = sum(trial.tensor(n).stat(s, "pos_inf_count") + trial.tensor(n).stat(s, "neg_inf_count")
                  for n in grads)
        assert inf > 0, s
    # ... and reported none of them: training went on and learned.
    assert len(losses) == 200 and trial.findings().empty, trial.findings()
    assert np.median(losses[-20:]) < 0.7 * np.median(losses[:20])
    notes = "\n".join(summary.get("notes", []))
    assert f"rule nan_origin: {len(skipped)} update(s) skipped by the optimizer" in notes, notes
    assert not any("skipped" in d for d in summary.get("diagnostics", []))
    # Out of process the same: a note, not a warning (check --strict passes).
    checked = tstat.rules.check(str(tmp_path / "amp"))
    assert checked.episodes.empty and not any("skipped" in w for w in checked.warnings)
    assert any(f"{len(skipped)} update(s) skipped" in n for n in checked.notes), checked.notes
    done = subprocess.run([os.environ["TSTAT_CLI"], "check", "--json", str(tmp_path / "amp")],
                          capture_output=True, text=True)
    out = json.loads(done.stdout)
    assert done.returncode == 0 and any("skipped" in n for n in out["notes"]), out
    assert not any("skipped" in w for w in out["warnings"]), out
    # A scaler that applies the overflowed gradients puts NaN into the
    # weights: nan_origin names the gradient and training stops.
    scaler, losses, trial, _ = scaled_run(tmp_path, "broken", skip=False)
    first = scaler.skipped[0]
    found = trial.findings()
    origin = found[found["type"] == "nan_origin"]
    assert len(origin) == 1 and origin["tensor"].iloc[0].startswith("gradient/"), found
    assert origin["first_step"].iloc[0] == first + 1, (first, found)
    assert origin["severity"].iloc[0] == "critical" and len(losses) <= first + 3


_NEW_THREADS_SCRIPT = """
import glob, json, sys, tempfile, torch, tstat.pytorch
def names():
    out = {}
    for t in glob.glob("/proc/self/task/*"):
        try:
            out[t] = open(t + "/comm").read().strip()
        except OSError:
            pass
    return out
# Tensors of 8,192 values or more, averaging more: what the CPU backend
# reduces with a team of every core when let.
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def step():
    opt.zero_grad()
    model(torch.randn(64, 256)).pow(2).mean().backward()
    opt.step()
step()  # torch's own threads, if any, exist from here on
before = names()
config = json.loads(sys.argv[1])
with tstat.pytorch.Hook(out_dir=tempfile.mkdtemp(), config=config) as hook:
    hook.register_module(model)
    for _ in range(6):
        step()
    after = names()
print(json.dumps(sorted(n for t, n in after.items() if t not in before)))
"""


def _threads_started(config):
    done = subprocess.run([sys.executable, "-c", _NEW_THREADS_SCRIPT, json.dumps(config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux's /proc and two processors")
def test_the_hook_starts_no_spinning_openmp_team_beside_torch():
    # The only threads the hook starts are tstat's, named: the reductions run
    # one thread each (the training thread's, the capture thread's). An
    # OpenMP team's idle workers would spin-wait on the cores torch uses.
    started = _threads_started({"save_config": {"save_interval": 1}})
    assert started and all(n.startswith("tstat-") for n in started), started
    # Asked for two threads, an OpenMP team (unnamed workers) reduces: what
    # the default above must not start (unless torch's own team is there).
    if torch.get_num_threads() == 1:
        started = _threads_started({"save_config": {"save_interval": 1},
                                    "pipeline": {"cpu_threads": 2}})
        assert any(not n.startswith("tstat-") for n in started), started
