"""tstat.pytorch.Hook on CUDA tensors (ctest tstat.python.pytorch_cuda,
label gpu): reduced where they live, on torch's current stream, with no
host synchronisation in the training step (torch's sync debug mode set to
"error" raises on any), and the stats equal torch's own, a ReLU and a tanh
called as functions included; fp16 autocast with
torch's GradScaler is not stopped by its loss-scale overflows. Run as a script
(no pytest: the GPU bundle runs it too, tools/gpu_hook_check.py): exit 77
(SKIPPED) without a CUDA device or a CUDA build of torch."""

import contextlib
import math
import sys
import tempfile
from pathlib import Path

import torch

import tstat.pytorch
from tstat import _tstat, trials

EVERY_STEP = {"save_config": {"save_interval": 1}}


@contextlib.contextmanager
def host_synchronisation_raises():
    """Torch's sync debug mode "error" inside: any host synchronisation raises."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)


def findings(trial):
    """The run's findings as its log's rows: trial.findings() without pandas,
    which a GPU machine's Python may lack."""
    return _tstat.findings_log(str(Path(trial.path) / "findings.jsonl"))


def close(got, want, rel, abs_tol=0.0):
    """pytest.approx without pytest (the GPU machine may lack it)."""
    assert math.isclose(got, want, rel_tol=rel, abs_tol=abs_tol), (got, want)


def test_cuda_training_is_captured_without_host_synchronisation(tmp_path):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xs = [torch.randn(32, 64, device=dev) for _ in range(6)]
    ys = [torch.randint(0, 10, (32,), device=dev) for _ in range(6)]
    kept = {}  # clones (asynchronous) for the reference, computed afterwards
    model[0].register_forward_hook(lambda _m, _i, o: kept.__setitem__(("fc", step), o.clone()))
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), config=EVERY_STEP) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        with host_synchronisation_raises():
            for step in range(6):
                opt.zero_grad()
                loss = loss_fn(model(xs[step]), ys[step])
                loss.backward()
                kept[("grad", step)] = model[0].weight.grad.clone()
                kept[("loss", step)] = loss.detach().clone()
                opt.step()
        assert not hook.should_stop()
    trial = trials.create_trial(str(tmp_path / "run"))
    assert trial.steps() == list(range(6))
    for step in (0, 3, 5):
        for name, key in (("0.Linear_output", "fc"), ("gradient/0.weight", "grad")):
            ref = kept[(key, step)].double()
            got = trial.tensor(name).stats(step)
            scale = ref.abs().max().item()
            close(got["l2"], ref.norm().item(), 1e-5)
            close(got["mean"], ref.mean().item(), 1e-5, 1e-7 * scale)
            close(got["min"], ref.min().item(), 1e-6)
            close(got["max"], ref.max().item(), 1e-6)
            assert got["zero_count"] == int((ref == 0).sum().item())
        close(trial.tensor("loss").stat(step, "mean"), kept[("loss", step)].item(), 1e-6)


class FunctionalActivation(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(64, 256), torch.nn.Linear(256, 10)
        self.function = function

    def forward(self, x):
        return self.fc2(self.function(self.fc1(x)))


def test_activations_called_as_functions_on_cuda(tmp_path):
    for activation in ("relu", "tanh"):
        check_activation_called_as_function(tmp_path, activation)


def check_activation_called_as_function(tmp_path, activation):
    # Found through autograd where fc2 takes the activation's output in: a
    # ReLU's output, with the per-unit stats dead_relu asks for; a tanh's
    # input (fc1's output), with the band counts saturated_activation asks
    # for. No host synchronisation either.
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = FunctionalActivation(getattr(torch, activation)).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kept = {}
    if activation == "relu":  # what fc2 takes in
        model.fc2.register_forward_pre_hook(lambda _m, i: kept.__setitem__(step, i[0].clone()))
        name = "fc1.relu_output"
    else:  # what the tanh takes in
        model.fc1.register_forward_hook(lambda _m, _i, o: kept.__setitem__(step, o.clone()))
        name = "fc1.tanh_input"
    with tstat.pytorch.Hook(out_dir=str(tmp_path / activation), config=EVERY_STEP) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        with host_synchronisation_raises():
            for step in range(4):
                opt.zero_grad()
                x = torch.randn(32, 64, device=dev)
                loss_fn(model(x), torch.randint(0, 10, (32,), device=dev)).backward()
                opt.step()
    trial = trials.create_trial(str(tmp_path / activation))
    assert name in trial.tensor_names(), trial.tensor_names()
    for step in (1, 3):
        ref = kept[step].double()
        got = trial.tensor(name).stats(step)
        close(got["l2"], ref.norm().item(), 1e-5)
        close(got["max"], ref.max().item(), 1e-6)
        assert got["zero_count"] == int((ref == 0).sum().item())
    assert findings(trial) == []


def test_mixed_precision_overflows_do_not_stop_training(tmp_path):
    """fp16 autocast with torch's GradScaler, its scale far too large at the
    start: the scaler skips the updates whose gradients overflowed, and the
    default rules report none of them (they note them)."""
    import json
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler(init_scale=2.0 ** 24, growth_interval=20)
    teacher = torch.randn(64, 10, device=dev)
    skipped = []
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "amp")) as hook:  # default rules
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(120):
            x = torch.randn(32, 64, device=dev)
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), (x @ teacher).argmax(1))
            scaler.scale(loss).backward()
            before = scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            if scaler.get_scale() < before:
                skipped.append(step)
            assert not hook.should_stop(), (step, hook.stop_reason())
    assert len(skipped) >= 3, skipped
    trial = trials.create_trial(str(tmp_path / "amp"))
    assert findings(trial) == [], findings(trial)
    summary = json.load(open(tmp_path / "amp" / "rules-00000.json"))
    notes = "\n".join(summary.get("notes", []))
    # A skip at the last step is never known to be one: no step follows it.
    known = len([s for s in skipped if s < 119])
    assert f"rule nan_origin: {known} update(s) skipped" in notes, (skipped, notes)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("tstat.python.pytorch_cuda: SKIPPED (no CUDA device, or torch "
              f"{torch.__version__} without CUDA)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        test_cuda_training_is_captured_without_host_synchronisation(Path(tmp))
        test_activations_called_as_functions_on_cuda(Path(tmp))
        test_mixed_precision_overflows_do_not_stop_training(Path(tmp))
    print("tstat.python.pytorch_cuda: passed")
