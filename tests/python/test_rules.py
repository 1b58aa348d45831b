"""tstat.rules: built-in and expression rules over a run from Python
(rules.check), and custom rules written in Python (rules.Rule,
invoke_rule) over a finished run and a run still being written. Runs are
written by tstat.pytorch.Hook. Run by ctest (tstat.python.pytorch)."""

import subprocess
import sys
import textwrap

import pytest
import torch

import tstat
import tstat.pytorch
from tstat import rules, trials


def write_run(path, steps, nan_at=None):
    """An MLP trained `steps` steps, every tensor saved at every step;
    fc1.weight gets a NaN at step `nan_at`. No in-process rules."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    grad_norms = []
    with tstat.pytorch.Hook(out_dir=str(path), config={"save_config": {"save_interval": 1}},
                            rules=False) as hook:
        hook.register_module(model)
        for step in range(steps):
            if step == nan_at:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")
            opt.zero_grad()
            model(torch.randn(4, 6)).pow(2).mean().backward()
            grad_norms.append(model[2].weight.grad.norm().item())
            opt.step()
    return grad_norms


def test_check_runs_the_default_rules(tmp_path):
    write_run(tmp_path / "bad", 12, nan_at=5)
    result = rules.check(tmp_path / "bad")
    assert result.run_closed and result.steps == 12 and result.rules > 5
    nan = result.episodes[result.episodes["type"] == "nan_origin"]
    assert len(nan) >= 1 and nan["first_step"].min() == 5
    assert nan["severity"].iloc[0] == "critical"
    write_run(tmp_path / "good", 12)
    assert rules.check(tmp_path / "good").episodes.empty
    # The same answer as the CLI's, which reads the same files.
    assert "nan_origin" not in set(rules.check(tmp_path / "bad", disable=["nan_origin"])
                                   .episodes["type"])


def test_check_with_an_expression_rule(tmp_path):
    norms = write_run(tmp_path / "run", 10)
    ranked = sorted(norms)
    threshold = (ranked[5] + ranked[6]) / 2  # no norm near it
    config = {"rules": [{"name": "big_head_grad", "tensor_regex": "^gradient/2\\.weight$",
                         "when": f"l2 > {threshold!r}", "for_steps": 1}]}
    result = rules.check(tmp_path / "run", config=config)
    assert result.rules == 1
    ep = result.episodes
    assert set(ep["rule"]) == {"big_head_grad"}
    assert set(ep["tensor"]) == {"gradient/2.weight"}
    # It fires where a streak of steps above the threshold begins (and again
    # only after the condition was false once).
    above = [s for s, n in enumerate(norms) if n > threshold]
    starts = [s for s in above if s - 1 not in above]
    assert sorted(ep["first_step"]) == starts


def test_check_reports_bad_input(tmp_path):
    write_run(tmp_path / "run", 3)
    with pytest.raises(tstat.Error) as e:
        rules.check(tmp_path / "run", config={"rules": [{"type": "no_such_rule"}]})
    assert "no_such_rule" in e.value.message
    with pytest.raises(tstat.Error) as e:
        rules.check(tmp_path / "run", config={"rules": [{"when": "l2 >"}]})
    assert e.value.code == "invalid_argument"
    with pytest.raises(tstat.Error) as e:
        rules.check(tmp_path / "run", disable=["nope"])
    assert "nope" in e.value.message
    with pytest.raises(tstat.Error) as e:
        rules.check(tmp_path / "nothing")
    assert e.value.code == "not_found"
    with pytest.raises(tstat.Error) as e:
        rules.check(tmp_path / "run", plugins=[str(tmp_path / "missing.so")])
    assert "missing.so" in e.value.message


class HeadGradientAbove(rules.Rule):
    def __init__(self, trial, threshold):
        super().__init__(trial)
        self.threshold = threshold
        self.seen = []

    def invoke_at_step(self, step):
        self.seen.append(step)
        return self.base_trial.tensor("gradient/2.weight").stat(step, "l2") > self.threshold


def test_a_python_rule_over_a_finished_run(tmp_path):
    norms = write_run(tmp_path / "run", 10)
    ranked = sorted(norms)
    threshold = (ranked[4] + ranked[5]) / 2
    trial = trials.create_trial(str(tmp_path / "run"))
    rule = HeadGradientAbove(trial, threshold)
    fired = rules.invoke_rule(rule)
    assert rule.seen == list(range(10))
    assert fired == [s for s, n in enumerate(norms) if n > threshold]
    assert rules.invoke_rule(HeadGradientAbove(trial, threshold), start_step=3, end_step=6) == \
        [s for s in range(3, 6) if norms[s] > threshold]
    with pytest.raises(rules.RuleEvaluationConditionMet) as e:
        rules.invoke_rule(HeadGradientAbove(trial, threshold), raise_eval_cond=True)
    assert e.value.step == fired[0]

    class Broken(rules.Rule):
        def invoke_at_step(self, step):
            return 1 / 0

    with pytest.raises(tstat.Error) as err:
        rules.invoke_rule(Broken(trial))
    assert "Broken" in err.value.message and "step 0" in err.value.message
    with pytest.raises(tstat.Error):
        rules.invoke_rule(rules.Rule(trial))  # invoke_at_step not defined


def test_a_python_rule_follows_a_live_run(tmp_path):
    run = tmp_path / "run"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import time, torch, tstat.pytorch
        model = torch.nn.Linear(4, 2)
        with tstat.pytorch.Hook(out_dir={str(run)!r}, rules=False, config={{
                "save_config": {{"save_interval": 1}},
                "pipeline": {{"flush_interval_steps": 1}}}}) as hook:
            hook.register_module(model)
            for step in range(40):
                scale = 1000.0 if step == 30 else 1.0
                (model(torch.randn(3, 4)).sum() * scale).backward()
                model.zero_grad()
                time.sleep(0.02)
    """))
    child = subprocess.Popen([sys.executable, str(script)])
    try:
        trial = None
        for _ in range(600):
            try:
                trial = trials.create_trial(str(run))
                break
            except tstat.Error:
                import time
                time.sleep(0.05)
        assert trial is not None

        class Spike(rules.Rule):
            def invoke_at_step(self, step):
                return self.base_trial.tensor("gradient/weight").stat(step, "l2") > 100

        fired = rules.invoke_rule(Spike(trial), timeout=30, poll=0.05)
    finally:
        assert child.wait(timeout=60) == 0
    assert fired == [30]
    assert trial.loaded_all_steps


def test_steps_where_a_rule_reads_an_unsaved_tensor_are_skipped(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    with tstat.pytorch.Hook(out_dir=str(tmp_path / "run"), rules=False, config={
            "save_config": {"save_interval": 1},
            "collections": [{"name": "weights", "save_config": {"save_interval": 3}}]}) as hook:
        hook.register_module(model)
        for _ in range(7):
            model(torch.randn(2, 4)).sum().backward()
    trial = trials.create_trial(str(tmp_path / "run"))

    class Judges(rules.Rule):
        seen = []

        def invoke_at_step(self, step):
            self.seen.append(step)
            return self.base_trial.tensor("weight").stat(step, "l2") > 0

    rule = Judges(trial)
    assert rules.invoke_rule(rule) == [0, 3, 6]  # the weight's saved steps
    assert rule.seen == list(range(7))
