"""tstat from Python: capture PyTorch training (tstat.pytorch.Hook), read
runs as numpy and pandas (tstat.trials), judge them (tstat.rules).

    import tstat.pytorch
    hook = tstat.pytorch.Hook(out_dir="runs/exp1")
    hook.register_module(model)

    from tstat import trials
    trial = trials.create_trial("runs/exp1")
    trial.series("gradient/fc1.weight", "l2")   # a pandas Series by step
"""

from tstat import modes, rules, trials
from tstat.errors import Error

# tstat.pytorch (the training hook) imports torch: import it yourself.
__all__ = ["Error", "modes", "rules", "trials"]
