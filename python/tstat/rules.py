"""tstat.rules: judge runs from Python.

Built-in and expression rules over a run on disk (what `tstat check` does):

    from tstat import rules
    result = rules.check("runs/exp1")                       # the default rule set
    result = rules.check("runs/exp1", config={"rules": [
        {"type": "expression", "name": "big_grad", "expression": "l2 > 100",
         "collection_names": ["gradients"]}]})
    result.episodes                                         # a DataFrame

In-process, while training: tstat.pytorch.Hook(config={"rules": {...}}).

Custom rules in Python, as smdebug users write them:

    class GradientTooLarge(rules.Rule):
        def invoke_at_step(self, step):
            return self.base_trial.tensor("gradient/fc1.weight").stat(step, "l2") > 10

    fired = rules.invoke_rule(GradientTooLarge(trial))      # the steps where it held
"""

import json
import time


from tstat import _tstat
from tstat._lazy import pd
from tstat.errors import Error
from tstat.trials import _FINDING_COLUMNS


class CheckResult:
    """What check() found: `episodes` (a DataFrame, the columns of
    Trial.findings()), `warnings` (rules that could not judge, damaged
    files), `notes` (what rules recognised and did not report, e.g. updates
    skipped by loss scaling), `steps` judged, `findings`, `rules` run, `run_closed`."""

    def __init__(self, d):
        self.episodes = pd.DataFrame(d["episodes"], columns=_FINDING_COLUMNS)
        self.warnings = list(d["warnings"])
        self.notes = list(d["notes"])
        self.steps = int(d["steps"])
        self.findings = int(d["findings"])
        self.rules = int(d["rules"])
        self.run_closed = bool(d["run_closed"])

    def __repr__(self):
        return (f"CheckResult({len(self.episodes)} episode(s), {len(self.warnings)} warning(s), "
                f"{self.rules} rule(s) over {self.steps} step(s))")


def check(path, config=None, *, config_file=None, disable=(), plugins=()):
    """Runs rules over the run at `path` once, as it is on disk: `config` (a
    rules config as a dict or JSON text, docs/rules.md), or `config_file`,
    or neither (the default rule set); `disable`: names of rules of the set
    that do not run; `plugins`: shared libraries of custom C++ rule types.
    Writes nothing and takes no action. tstat.Error naming the field for a
    bad config, "not_found" when `path` holds no run."""
    if config is not None and not isinstance(config, str):
        config = json.dumps(config)
    return CheckResult(_tstat.check(str(path), config or "", config_file or "",
                                    [str(p) for p in plugins], [str(d) for d in disable]))


class RuleEvaluationConditionMet(Exception):
    """Raised by invoke_rule(..., raise_eval_cond=True) at the first step
    where a rule's condition held."""

    def __init__(self, rule_name, step):
        super().__init__(f"rule {rule_name} held at step {step}")
        self.rule_name = rule_name
        self.step = step


class Rule:
    """A rule written in Python (smdebug's shape): subclass it and define
    invoke_at_step(step), which returns True when the rule's condition holds
    at that global step. `base_trial` is a tstat.trials.Trial (finished, or
    still being written); `other_trials` more trials to compare with."""

    def __init__(self, base_trial, other_trials=None):
        self.base_trial = base_trial
        self.other_trials = list(other_trials or [])

    @property
    def name(self):
        return type(self).__name__

    def invoke_at_step(self, step):
        raise NotImplementedError(f"{self.name}.invoke_at_step(step)")

    def invoke(self, step):
        """invoke_at_step(step); an exception of the rule is a tstat.Error
        naming the rule and the step."""
        try:
            return bool(self.invoke_at_step(step))
        except Error:
            raise
        except Exception as e:  # the user's rule: say which and where
            raise Error("internal", f"rule {self.name} at step {step}: "
                                    f"{type(e).__name__}: {e}") from e


def invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False, timeout=None,
                poll=0.2):
    """Runs `rule` over its trial's global steps from `start_step` (up to,
    not including, `end_step`), in order, each once. On a run still being
    written it waits for new steps until the run is closed, `end_step` is
    reached, or `timeout` seconds passed without a new step. A step where
    the rule reads a tensor not saved at it (tstat.Error "step_unavailable")
    is skipped, as smdebug skips TensorUnavailableForStep. Returns the
    steps where the condition held; with raise_eval_cond, raises
    RuleEvaluationConditionMet at the first."""
    trial = rule.base_trial
    fired = []
    last = start_step - 1
    waited_since = time.monotonic()
    while True:
        new = [s for s in trial.steps() if s > last and (end_step is None or s < end_step)]
        for step in new:
            last = step
            try:
                held = rule.invoke(step)
            except Error as e:
                # A tensor not saved at this step (smdebug's
                # TensorUnavailableForStep): the rule cannot judge it.
                if e.code != "step_unavailable":
                    raise
                continue
            if held:
                fired.append(step)
                if raise_eval_cond:
                    raise RuleEvaluationConditionMet(rule.name, step)
        if new:
            waited_since = time.monotonic()
        if trial.loaded_all_steps or (end_step is not None and last >= end_step - 1):
            return fired
        if timeout is not None and time.monotonic() - waited_since >= timeout:
            return fired
        time.sleep(poll)
        trial.refresh()
