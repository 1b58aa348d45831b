"""tstat from Python: read runs as numpy and pandas (tstat.trials).

    from tstat import trials, modes
    trial = trials.create_trial("runs/exp1")
    trial.series("gradient/fc1.weight", "l2")   # a pandas Series by step
"""

from tstat import modes, trials
from tstat.errors import Error

__all__ = ["Error", "modes", "trials"]
