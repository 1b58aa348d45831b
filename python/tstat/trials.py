"""Runs as numpy and pandas: tstat.trials.create_trial(path).

A Trial reads a run directory written by tstat (a finished run, or one still
being written: refresh() picks up what was flushed since). Opening reads the
workers' catalogs only; a query reads what it needs (a series: the chunks of
one tensor's rows; a step: its segment), so a notebook can open a run of 10^8
records in a fraction of a second.

smdebug's names where they exist (create_trial, tensor_names, steps,
tensor(name).value(step), reduction_value, wait_for_steps, loaded_all_steps);
series() and dataframe() return pandas objects indexed by step, each one
vectorised read per tensor and stat, not one call per step.
"""

import json
import os
import time
import warnings

import numpy as np

from tstat import _tstat
from tstat._lazy import pd
from tstat.errors import Error
from tstat.modes import GLOBAL, ModeKeys, mode_of

# Every stat a record carries, by name (count, min, max, mean, std, l2, ...).
STATS = tuple(_tstat.STATS)

_FINDING_COLUMNS = ["episode", "rule", "type", "severity", "worker", "tensor", "mode",
                    "first_step", "first_mode_step", "reported_step", "last_step", "steps",
                    "open", "message", "measure", "worst", "worst_step"]

# smdebug's reduction names: (name, abs) -> tstat's stat.
_REDUCTIONS = {
    ("min", False): "min",
    ("max", False): "max",
    ("mean", False): "mean",
    ("std", False): "std",
    ("variance", False): "variance",
    ("sum", False): "sum",
    ("l1", False): "l1",
    ("l2", False): "l2",
    ("max", True): "amax",
    ("sum", True): "l1",
    ("l1", True): "l1",
    ("l2", True): "l2",
}


def create_trial(path, cache_mib=None):
    """Opens the run at `path` (a directory holding worker-* folders).

    cache_mib: memory for records read by queries (default 64 MiB); the
    metadata (workers, tensors, steps) is held whatever it is. Raises
    tstat.Error ("not_found") when `path` holds no tstat run."""
    return Trial(path, cache_mib=cache_mib, _warn_from=4)


def _steps_of(arrays, mode):
    """Global steps, or mode steps when `mode` is a training mode."""
    global_steps, _, mode_steps = arrays
    return mode_steps if mode != GLOBAL else global_steps


class Trial:
    """A tstat run opened for reading (see create_trial)."""

    def __init__(self, path, cache_mib=None, _warn_from=3):
        self.path = str(path)
        self._t = _tstat.Trial(self.path, float(cache_mib or 0.0))
        self._names_by_id = {}  # worker -> {tensor id: name}
        self._warn_damage(stacklevel=_warn_from)

    def __repr__(self):
        return f"<tstat Trial {self.path!r}: {len(self.workers())} worker(s), " \
               f"{len(self.steps())} step(s)>"

    def _warn_damage(self, stacklevel=3):
        """A RuntimeWarning, at the caller's line, for files skipped as damaged."""
        damage = self._t.damage()
        if damage:
            warnings.warn(f"tstat: {damage}", RuntimeWarning, stacklevel=stacklevel)

    # --- the run -------------------------------------------------------
    def refresh(self):
        """Loads what the run's writers flushed since the last load. Damaged
        files are a RuntimeWarning; the rest stays readable."""
        self._t.refresh()
        self._warn_damage()

    @property
    def loaded_all_steps(self):
        """True once every worker closed cleanly and all it wrote is loaded."""
        return self._t.loaded_all_steps()

    def workers(self):
        """The ranks of the run's workers."""
        return [w["rank"] for w in self._t.workers()]

    def worker_info(self):
        """Per worker: rank, world_size, host, closed, segments, bytes and
        the pipeline counters (records_written, records_lost, ...)."""
        return self._t.workers()

    def config(self, worker=0):
        """The session configuration worker `worker` recorded (a dict)."""
        text = self._t.config_json(int(worker))
        return json.loads(text) if text else {}

    def steps(self, mode=None):
        """Steps with data of any worker, ascending: global steps, or the
        steps of `mode` (tstat.modes.TRAIN, ...) counted in that mode."""
        m = mode_of(mode)
        return [int(s) for s in _steps_of(self._t.steps(int(m)), m)]

    def wait_for_steps(self, steps, mode=None, timeout=None, poll=0.05):
        """Waits until every step in `steps` of `mode` is readable (True), or
        `timeout` seconds pass (False). Raises tstat.Error
        ("step_unavailable") for a step the run passed or closed without."""
        m = mode_of(mode)
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        for step in ([steps] if np.isscalar(steps) else list(steps)):
            while not self._t.has_step(int(step), int(m)):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(poll)
        self._warn_damage()
        return True

    # --- names ---------------------------------------------------------
    def tensor_names(self, collection=None, regex=None, mode=None):
        """Tensor names (not scalars), sorted: those of `collection`, whose
        name matches `regex` (RE2, partial match), with records of `mode`."""
        return self._t.tensor_names(collection or "", regex or "", int(mode_of(mode)))

    def scalar_names(self):
        return self._t.scalar_names()

    def collections(self):
        return self._t.collections()

    def has_tensor(self, name):
        try:
            self._t.tensor_info(name, -1)
            return True
        except Error as e:
            if e.code == "not_found":
                return False
            raise

    def tensor(self, name):
        """The tensor (or scalar) `name`; tstat.Error ("not_found") if the
        run has none by that name."""
        return Tensor(self, name, self._t.tensor_info(name, -1))

    # --- values --------------------------------------------------------
    def series(self, name, stat="l2", mode=None, worker=-1):
        """One stat of tensor `name` over its saved steps, as a pandas Series
        indexed by step (global, or of `mode`). For a scalar (a loss), its
        values; `stat` is then ignored."""
        m = mode_of(mode)
        if name in self._t.scalar_names():
            g, modes, s, v = self._t.scalar_series(name, int(m), int(worker))
            label = name
        else:
            g, modes, s, v = self._t.series(name, stat, int(m), int(worker))
            label = f"{name}:{stat}"
        index = pd.Index(s if m != GLOBAL else g, name="step")
        return pd.Series(v, index=index, name=label)

    def dataframe(self, names=None, stats=("l2",), mode=None, collection=None, regex=None,
                  worker=-1):
        """Many tensors x stats over steps: a DataFrame indexed by step with
        columns (tensor, stat). `names` default to tensor_names(collection,
        regex, mode)."""
        if names is None:
            names = self.tensor_names(collection=collection, regex=regex, mode=mode)
        stats = [stats] if isinstance(stats, str) else list(stats)
        columns = {}
        for name in names:
            for stat in stats:
                columns[(name, stat)] = self.series(name, stat, mode=mode, worker=worker)
        if not columns:
            return pd.DataFrame(columns=pd.MultiIndex.from_tuples([], names=["tensor", "stat"]))
        frame = pd.concat(columns, axis=1)
        frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["tensor", "stat"])
        frame.index.name = "step"
        return frame

    def step_stats(self, step, worker=0):
        """Every tensor's stats at global step `step` of `worker`, in capture
        order: a DataFrame with a row per tensor (index: name)."""
        records = self._t.step_records(int(worker), int(step))
        names = {}
        rows = []
        for r in records:
            tid = r["tensor_id"]
            if tid not in names:
                names[tid] = self._name_of(tid, worker)
            rows.append(dict(r["stats"], tensor=names[tid]))
        frame = pd.DataFrame(rows, columns=["tensor"] + list(STATS))
        return frame.set_index("tensor")

    def _name_of(self, tensor_id, worker):
        """The name of tensor id `tensor_id` of `worker` (ids are per worker)."""
        names = self._names_by_id.get(worker)
        if names is None or tensor_id not in names:
            names = {}
            for name in self._t.tensor_names("", "", int(GLOBAL)) + self._t.scalar_names():
                try:
                    names[self._t.tensor_info(name, int(worker))["id"]] = name
                except Error:
                    pass  # another worker's tensor
            self._names_by_id[worker] = names
        return names.get(tensor_id, f"#{tensor_id}")

    def findings(self):
        """The episodes the rules recorded in the run's findings log
        (RUN/findings.jsonl: the in-process rules, or `tstat rules`), each
        in its last recorded state, as a DataFrame: episode, rule, type,
        severity, worker, tensor, mode, first_step, first_mode_step,
        reported_step, last_step, steps, open, message, measure, worst,
        worst_step. Empty when no rule recorded anything."""
        rows = _tstat.findings_log(os.path.join(self.path, "findings.jsonl"))
        return pd.DataFrame(rows, columns=_FINDING_COLUMNS)

    def drops(self, worker=-1):
        """What the writers had to drop (raw snapshots over their memory cap,
        ...): a DataFrame with tensor_id, kind, reason, bytes."""
        return pd.DataFrame(self._t.drops(int(worker)),
                            columns=["tensor_id", "kind", "reason", "bytes"])


class Tensor:
    """One tensor (or scalar) of a Trial: trial.tensor(name)."""

    def __init__(self, trial, name, info):
        self._trial = trial
        self.name = name
        self.info = info

    def __repr__(self):
        return f"<tstat Tensor {self.name!r} {self.info['dtype']}{self.info['shape']}>"

    @property
    def shape(self):
        return tuple(self.info["shape"])

    @property
    def dtype(self):
        return self.info["dtype"]

    @property
    def collections(self):
        return list(self.info["collections"])

    def steps(self, mode=None):
        """The steps at which it has stats (or scalar values)."""
        return [int(s) for s in self._trial.series(self.name, "count", mode=mode).index]

    def series(self, stat="l2", mode=None, worker=-1):
        return self._trial.series(self.name, stat, mode=mode, worker=worker)

    def stats(self, step, mode=None, worker=-1):
        """Every stat at `step` (of `mode`): a dict name -> value."""
        return self._record(step, mode, worker)["stats"]

    def stat(self, step, name, mode=None, worker=-1):
        stats = self.stats(step, mode=mode, worker=worker)
        if name not in stats:
            raise Error("invalid_argument", f"no stat named {name!r} (stats: {', '.join(STATS)})")
        return stats[name]

    def reduction_value(self, step, reduction_name, mode=None, worker=-1, abs=False):
        """smdebug's reduction_value: min, max, mean, std, variance, sum, l1,
        l2 (abs=True: max of |x|, sum of |x|)."""
        stat = _REDUCTIONS.get((reduction_name, bool(abs)))
        if stat is None:
            raise Error("not_supported",
                        f"reduction {reduction_name!r} (abs={abs}) is not one tstat stores")
        return self.stat(step, stat, mode=mode, worker=worker)

    def value(self, step, mode=None, worker=-1):
        """The raw snapshot at `step` as a numpy array of the tensor's shape
        (bfloat16 and fp8 as float32). tstat.Error ("step_unavailable") when
        no snapshot was saved at that step (see raw_steps)."""
        return self._trial._t.raw(self.name, int(step), int(mode_of(mode)), int(worker))

    def raw_steps(self):
        """Global steps with a raw snapshot."""
        g, _, _ = self._trial._t.raw_steps(self.name, -1)
        return [int(s) for s in g]

    def histogram(self, step, mode=None, worker=-1):
        """The exponent histogram at `step`: (exponents, counts), counts[i]
        the finite non-zero values x with 2**exponents[i] <= |x| <
        2**(exponents[i] + 1) (the first and last of tstat's 279 bins also
        hold what lies beyond). Empty arrays when none was captured."""
        r = self._record(step, mode, worker)
        if "exponent_counts" not in r:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        counts = r["exponent_counts"]
        exponents = np.arange(len(counts), dtype=np.int64) + r["exponent_first"]
        return exponents, counts

    def per_channel(self, step, mode=None, worker=-1):
        """The per-channel stats at `step` as a pandas DataFrame, a row per
        channel (unit) along the axis they were captured on
        (`df.attrs["axis"]`), the columns as stats()'s names (count,
        zero_count, neg_count, min, max, mean, ...). None when none were
        captured: a collection's per_channel_axis asks for them, and so do
        the rules that judge units (dead_relu, saturated_activation) at the
        training steps."""
        r = self._record(step, mode, worker)
        if "per_channel" not in r:
            return None
        df = pd.DataFrame(r["per_channel"])
        df.index.name = "channel"
        df.attrs["axis"] = int(r["per_channel_axis"])
        return df

    def delta(self, step, mode=None, worker=-1):
        """The change since the tensor's previous save, at `step`: a dict of
        count, changed_count (elements that moved by more than delta_atol +
        delta_rtol * |previous|, by default 1e-8 and 1e-5), nonfinite_pairs,
        and l1, l2, amax of the difference over the finite pairs. None when
        none was captured (a collection's delta, or weight_update_ratio,
        which asks for it of the weights at the training steps)."""
        return self._record(step, mode, worker).get("delta")

    def label_counts(self, step, mode=None, worker=-1):
        """A labels tensor's class counts at `step`: (counts, out_of_range),
        counts[k] the labels equal to k. None when none were captured (the
        labels collection needs stats.label_classes; Hook(num_classes=))."""
        r = self._record(step, mode, worker)
        if "label_counts" not in r:
            return None
        return np.asarray(r["label_counts"], dtype=np.uint64), int(r["label_out_of_range"])

    def confusion(self, step, mode=None, worker=-1):
        """The confusion matrix captured with a labels tensor at `step`:
        classes x classes counts, row = label, column = prediction; None
        when none was captured."""
        r = self._record(step, mode, worker)
        return r.get("confusion")

    def _record(self, step, mode, worker):
        return self._trial._t.record(self.name, int(step), int(mode_of(mode)), int(worker))
