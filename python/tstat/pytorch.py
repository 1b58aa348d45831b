"""tstat.pytorch: capture a PyTorch model's training with tstat.

    import tstat.pytorch
    hook = tstat.pytorch.Hook(out_dir="runs/exp1")
    hook.register_module(model)          # weights, biases, gradients, activations
    hook.register_loss(criterion)        # the loss and its labels, for the rules
    for x, y in loader:
        loss = criterion(model(x), y)    # a forward of the model begins a step
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        if hook.should_stop():           # a rule stopped the run
            break
    hook.close()

Steps. With step_on="auto" (the default) a forward of the registered module
begins a step; in TRAIN mode the end of the backward pass ends it (gradients
are read then, before an optimizer or zero_grad() can change them); in EVAL
and PREDICT the next forward (or close()) ends it. step_on="manual": call
hook.step() to end each step (before zero_grad(): gradients are read then).

What is read, and when. Parameters and their gradients ("gradient/<name>"),
the outputs of the module's leaf modules ("<path>_output"; a numbered
path gets the module's class, "features.1.ReLU_output", and so does an
activation module whose name does not say which, "block.act.GELU_output"; a
module called again in the same step "<path>#1_output"), the inputs of activation
functions ("<path>_input", as they enter the function), the outputs of ReLUs
called as functions (F.relu: "<layer>.relu_output") and the inputs of other
activations called as functions (torch.tanh: "<layer>.tanh_input"; a tanh
or sigmoid of a sum: its output, "<path>_input.tanh_output"; see
_functional_activation), the module's input ("<name>_input") and the
loss are registered with the session the first time they exist; each is
read when its collections' schedules say it is due, in place (CPU tensors:
no copy; CUDA tensors: reduced on the current CUDA stream, with no host
synchronisation). A gradient counts only when a backward in this step
produced it. Tensors given to the hook are held until the step ends,
except large CPU ones (8,192 values or more: read when given, the first time;
then, unless something changed one in place by the step's end, read on
tstat's capture thread while the forward goes on, and let go by the time
the forward of the registered module returns) and the inputs of activations
with inplace=True (read before the activation overwrites them). A held tensor
changed in place before the step ends (x += y on a layer's output) is not
read at that step, since its values are no longer the layer's: a warning
names it, counters()["changed_in_place"] counts it, and from the next step on
it is read when it is given.

Errors. Calls you make (save_tensor with something that is not a tensor, any
call after close()) raise tstat.Error. What goes wrong inside the module's
hooks never stops training: a tensor that cannot be captured (a dtype tstat
does not reduce) is a RuntimeWarning naming it, once.
"""

import atexit
import json
import os
import re
import threading
import warnings
import weakref

import torch

from tstat import _tstat
from tstat import modes as _modes
from tstat.errors import Error

# torch dtype -> tstat::DType (include/tstat/dtype.h).
_DTYPES = {
    torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3,
    torch.int32: 6, torch.int64: 7, torch.uint8: 8,
}
for _name, _code in (("float8_e4m3fn", 4), ("float8_e5m2", 5)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _code

_TENSOR, _PARAMETER, _GRADIENT = 0, 1, 2

# register_loss gives a classification loss's targets as labels up to this
# many classes: the session stops counting labels past 1,024 (token ids).
_MAX_LOSS_CLASSES = 1024

# Leaf modules whose inputs are captured too: the saturation and
# initialization rules judge what goes into an activation function.
_ACTIVATION_FUNCTION = re.compile(
    r"(?i)relu|tanh|sigmoid|gelu|elu|silu|mish|softplus|hardswish|hardsigmoid")

# The same functions called as functions, by the autograd node of their
# output: what "<layer>.<name>_input" calls them. ReLUs are told apart
# (ReluBackward0): their outputs are read, for dead_relu.
_FUNCTIONAL_ACTIVATION = {
    "TanhBackward0": "tanh", "SigmoidBackward0": "sigmoid", "GeluBackward0": "gelu",
    "EluBackward0": "elu", "SiluBackward0": "silu", "MishBackward0": "mish",
    "SoftplusBackward0": "softplus", "LeakyReluBackward0": "leaky_relu",
    "HardswishBackward0": "hardswish", "HardsigmoidBackward0": "hardsigmoid",
}

# Autograd nodes that an activation's output may pass through before a leaf
# module takes it in (F.max_pool2d(F.relu(conv(x)), 2), torch.flatten,
# F.dropout's mask product, views): the activation behind them is read as
# if the module took it in (Hook._activation_behind).
_PASS_THROUGH = re.compile(
    r"^(MaxPool|AvgPool|AdaptiveAvgPool|AdaptiveMaxPool|View|UnsafeView|ReshapeAlias|"
    r"Transpose|Permute|Squeeze|Unsqueeze|Clone|NativeDropout|Mul)\w*Backward")
_KEEPS_RESULT = {"ReluBackward0": "relu", "TanhBackward0": "tanh", "SigmoidBackward0": "sigmoid"}

# Leaf modules whose outputs hold channels on axis 1 whatever their rank
# (Conv1d's [batch, channels, length]): their tensors, and what activations
# make of them, tell the session so (unit_axis 1), where by rank a rank-3
# tensor's units are its last axis ([batch, tokens, features]).
_CHANNELS_FIRST = tuple(c for c in (
    getattr(torch.nn.modules.conv, "_ConvNd", None),
    getattr(torch.nn.modules.batchnorm, "_BatchNorm", None),
    getattr(torch.nn.modules.instancenorm, "_InstanceNorm", None),
    torch.nn.GroupNorm,
    *(getattr(torch.nn.modules.pooling, n, None) for n in (
        "_MaxPoolNd", "_AvgPoolNd", "_AdaptiveAvgPoolNd", "_AdaptiveMaxPoolNd", "_LPPoolNd",
        "_MaxUnpoolNd")),
    *(getattr(torch.nn, n, None) for n in ("Dropout1d", "Dropout2d", "Dropout3d")),
) if c is not None)

# A captured tensor's name -> the module (or activation) path it belongs to:
# "<path>_output", "<path>#2_output_1", "<path>_input".
_TENSOR_OF_PATH = re.compile(r"^(.*?)(?:#\d+)?_(?:output|input)(?:_\d+)?$")


def _path_of(name):
    m = _TENSOR_OF_PATH.match(name)
    return m.group(1) if m else name


def _queue_backward_callback(fn):
    torch.autograd.Variable._execution_engine.queue_callback(fn)


def _tensors_of(value):
    """The tensors of a module's output (a tensor, or a tuple/list of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


class Hook:
    """Captures a PyTorch model's training into a tstat run (smdebug's Hook).

    out_dir: the run directory (over the config's). config: a dict, or JSON
    text, of tstat's session config (docs/config.md); config_file: a config
    file (JSON). Neither: $TSTAT_CONFIG when set, else the defaults. rules:
    with a dict or no config, the default in-process rule set runs unless the
    config has a "rules" section (rules=False: none); a config file decides
    for itself. num_classes: turns on label counts and the confusion matrix
    of save_labels(). start_step: a run resumed from a checkpoint numbers its
    first step start_step (global and in its mode) and counts on from there;
    the rules then know it did not start from scratch.
    functional_activations: capture the activation functions that the model
    calls as functions where a layer takes their outputs in (the outputs of
    ReLUs, the inputs of the others; see the module's text; False: not).
    rank, world_size, dry_run: over the config's.
    """

    def __init__(self, out_dir=None, config=None, *, config_file=None, rank=None,
                 world_size=None, dry_run=None, num_classes=0, rules=True, step_on="auto",
                 start_step=None, functional_activations=True):
        if step_on not in ("auto", "manual"):
            raise Error("invalid_argument", f"step_on must be 'auto' or 'manual', got {step_on!r}")
        if start_step is not None and (isinstance(start_step, bool) or
                                       not isinstance(start_step, int) or start_step < 0):
            raise Error("invalid_argument",
                        f"start_step must be an int >= 0, got {start_step!r}")
        config_json = ""
        if config is not None:
            if isinstance(config, str):
                try:
                    config = json.loads(config)
                except ValueError as e:
                    raise Error("invalid_argument", f"config is not JSON: {e}") from None
            if not isinstance(config, dict):
                raise Error("invalid_argument",
                            f"config must be a dict or JSON text, got {type(config).__name__}")
            config = dict(config)
        if config is None and config_file is None and not _env_config():
            config = {}  # the defaults
        if config is not None:
            if rules and "rules" not in config:
                config["rules"] = {}
            config_json = json.dumps(config)
        self._session = _tstat.Session(
            config_json, config_file or "", out_dir, rank, world_size, dry_run, _DTYPES,
            int(num_classes), "predictions")
        self._num_classes = int(num_classes)
        self._step_on = step_on
        self._functional_activations = bool(functional_activations)
        self._start_step = start_step  # numbers the first step, then None
        self._lock = threading.RLock()
        self._slots = {}          # name -> slot
        self._handles = []        # torch hook handles, removed by close()
        self._frozen = []         # (name, weakref) of parameters frozen at registration
        self._calls = {}          # module path -> calls in this step
        # Paths (_path_of) whose tensors are channels-first: the
        # _CHANNELS_FIRST modules', and the activations' fed by them.
        self._channels_first = set()
        self._unit_axis_seen = set()  # activation paths whose units were decided
        # id(grad_fn) -> (grad_fn, name, weakref of the tensor or None) of the
        # tensors autograd produced in this step that the hook has seen: the
        # layer outputs, and the outputs of activations called as functions
        # (_functional_activation). Held until the step ends, so that an
        # id is not reused meanwhile.
        self._produced = {}
        self._fresh = []          # gradient slots a backward produced in this step
        self._top = None
        self._top_name = None
        self._step_open = False
        self._callback_queued = False
        self._closed = False
        self._mode = _modes.TRAIN
        self._mode_set = False    # set_mode() called: steps are in self._mode, not GLOBAL
        self._warned = set()
        self._labels_given = False  # save_labels called: register_loss gives none
        atexit.register(_close_at_exit, weakref.ref(self))

    @classmethod
    def create_from_json_file(cls, json_file_path=None, **kwargs):
        """A hook from a config file: `json_file_path`, else $TSTAT_CONFIG
        (tstat.Error "not_found" when neither is given)."""
        path = json_file_path or _env_config()
        if not path:
            raise Error("not_found", "no config file given and TSTAT_CONFIG is not set")
        return cls(config_file=path, **kwargs)

    # --- What is captured -------------------------------------------------

    def register_module(self, module, name="model"):
        """Captures `module`: its parameters (collections weights / biases)
        and their gradients (gradients), the outputs of its leaf modules
        (activations) and its input (inputs). A forward of `module` begins a
        step (step_on="auto"). Registering a second module adds its tensors;
        the first one registered drives the steps."""
        self._check_open()
        if not isinstance(module, torch.nn.Module):
            raise Error("invalid_argument",
                        f"register_module takes a torch.nn.Module, got {type(module).__name__}")
        prefix = f"{name}." if self._top is not None else ""
        for pname, p in module.named_parameters():
            full = prefix + pname
            last = full.rsplit(".", 1)[-1]
            collection = "biases" if "bias" in last else "weights"
            ref = weakref.ref(p)
            self._slot(full, [collection], _PARAMETER, ref)
            if p.requires_grad:
                self._hook_gradient(full, p, ref)
            else:  # a tensor hook needs requires_grad: added once it is unfrozen
                self._frozen.append((full, ref))
        # Whether the leaf defined last in each parent is channels-first: an
        # activation module defined after one (nn.Sequential(Conv1d, ReLU))
        # takes its output, until autograd shows what it does take in.
        last_leaf_channels_first = {}
        for path, sub in module.named_modules():
            if path == "" or any(True for _ in sub.children()):
                continue
            kind = type(sub).__name__
            parent, last = path.rsplit(".", 1) if "." in path else ("", path)
            activation = _ACTIVATION_FUNCTION.search(kind) is not None
            # The rules select activations by name: "features.1.ReLU", and
            # "block.act.GELU" for an activation whose name does not say which.
            if last.isdigit() or (activation and _ACTIVATION_FUNCTION.search(last) is None):
                path = f"{path}.{kind}"
            channels_first = isinstance(sub, _CHANNELS_FIRST) or (
                activation and last_leaf_channels_first.get(parent, False))
            last_leaf_channels_first[parent] = channels_first
            if channels_first:
                self._channels_first.add(prefix + path)
            if activation:
                self._handles.append(sub.register_forward_pre_hook(
                    self._input_hook(prefix + path, bool(getattr(sub, "inplace", False)))))
            # The output hook also looks at what went in: an activation
            # called as a function (one hook per module, not two).
            self._handles.append(sub.register_forward_hook(self._output_hook(
                prefix + path, self._functional_activations and not activation)))
        if self._top is None:
            self._top = weakref.ref(module)
            self._top_name = name
            self._handles.append(module.register_forward_pre_hook(self._top_forward_pre))
            self._handles.append(module.register_forward_hook(self._top_forward_post))

    def register_loss(self, loss_module, name="loss", labels=True):
        """Captures the output of `loss_module` (an nn.Module such as
        nn.CrossEntropyLoss()) as `name` in collection losses, read by the
        loss rules (on the device for a CUDA loss: no .item()).

        labels: a classification loss (nn.CrossEntropyLoss, nn.NLLLoss)
        called with scores [n, classes] (2 to 1,024 classes) and class ids
        [n] also gives those, as save_labels would, unless save_labels is
        called: the label rules judge the class counts, and
        loss_not_decreasing tells a run that began learned (a fine-tuned or
        resumed model) from one that learns nothing. labels=False: not."""
        self._check_open()
        if not isinstance(loss_module, torch.nn.Module):
            raise Error("invalid_argument",
                        "register_loss takes a torch.nn.Module (for a loss computed by a "
                        "function, call hook.save_tensor(name, loss, 'losses'))")
        classifies = labels and isinstance(loss_module, (torch.nn.CrossEntropyLoss,
                                                         torch.nn.NLLLoss))

        def on_loss(_module, inputs, output):
            tensors = _tensors_of(output)
            if tensors:
                self._set_in_hook(name, ["losses"], tensors[0])
            if classifies and not self._labels_given and len(inputs) >= 2:
                self._loss_labels(inputs[0], inputs[1])

        self._handles.append(loss_module.register_forward_hook(on_loss))

    def save_tensor(self, name, tensor, collections="default"):
        """Captures `tensor` as `name` at this step when its collections are
        due (read when the step ends; held until then)."""
        self._check_open()
        if not isinstance(tensor, torch.Tensor):
            raise Error("invalid_argument",
                        f"save_tensor({name!r}): a torch.Tensor, not {type(tensor).__name__}")
        if isinstance(collections, str):
            collections = [collections]
        self._set(str(name), list(collections), tensor)

    def save_scalar(self, name, value):
        """Saves a number (a learning rate, an accuracy) at this step.
        A CUDA tensor is read with .item(), which waits for the device."""
        self._check_open()
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise Error("invalid_argument",
                            f"save_scalar({name!r}): a tensor of {value.numel()} elements")
            value = value.item()
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise Error("invalid_argument",
                        f"save_scalar({name!r}): not a number: {value!r}") from None
        with self._lock:
            self._session.save_scalar(str(name), value)

    def save_labels(self, labels, predictions):
        """Labels (class ids [n]) and predictions (logits [n, classes], or
        class ids) at this step: label counts and the confusion matrix, for
        the class-imbalance rules. Needs Hook(num_classes=...)."""
        self._check_open()
        if self._num_classes <= 0:
            raise Error("failed_precondition",
                        "save_labels needs the number of classes: Hook(num_classes=N)")
        if not isinstance(labels, torch.Tensor) or not isinstance(predictions, torch.Tensor):
            raise Error("invalid_argument", "save_labels takes two torch.Tensors")
        if labels.dtype not in (torch.int64, torch.int32, torch.uint8) or labels.dim() != 1:
            raise Error("invalid_argument",
                        f"labels must be class ids of shape [n] (int64, int32 or uint8), got "
                        f"{labels.dtype} of shape {tuple(labels.shape)}")
        if predictions.dim() < 1 or predictions.shape[0] != labels.shape[0]:
            raise Error("invalid_argument",
                        f"predictions must have {labels.shape[0]} rows like the labels, got "
                        f"shape {tuple(predictions.shape)}")
        self._labels_given = True
        self._set("labels", ["labels"], labels)
        self._set("predictions", [], predictions.detach())

    # --- Steps and modes --------------------------------------------------

    def set_mode(self, mode):
        """TRAIN, EVAL or PREDICT (tstat.modes) from the next step on."""
        self._check_open()
        mode = _modes.mode_of(mode)
        with self._lock:
            self._session.set_mode(int(mode))
            self._mode = mode
            self._mode_set = True

    def step(self):
        """Ends the step being captured (opening one if none is open)."""
        self._check_open()
        with self._lock:
            self._end_step()

    def should_stop(self):
        """True once a rule (or RUN/STOP, or request_stop) stopped the run."""
        return self._session.should_stop()

    def stop_reason(self):
        return self._session.stop_reason()

    def request_stop(self, reason):
        self._session.request_stop(str(reason))

    @property
    def out_dir(self):
        return self._session.out_dir()

    @property
    def current_step(self):
        """(global step, mode, mode step) of the step being captured."""
        g, m, s = self._session.current_step()
        return g, _modes.ModeKeys(m), s

    def counters(self):
        """The pipeline's counters: steps captured, records written, drops,
        write errors, time spent capturing (capture_seconds, on the
        training thread); and the hook's: tensors not read because they
        changed in place (changed_in_place), tensors read on tstat's capture
        thread (background_captures)."""
        return self._session.counters()

    def close(self):
        """Ends the open step, writes everything and closes the run.
        Raises tstat.Error when writing failed (the run says what was lost)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for h in self._handles:
                h.remove()
            self._handles.clear()
            try:
                if self._step_open:
                    self._end_step()
            finally:
                self._session.close()
                self._warn(self._session.warnings())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # --- Inside ------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise Error("failed_precondition", "the hook is closed")

    def _slot(self, name, collections, kind, source=None):
        slot = self._slots.get(name)
        if slot is None:
            channels_first = kind == _TENSOR and _path_of(name) in self._channels_first
            slot = self._session.add_slot(name, collections, kind, source,
                                          1 if channels_first else -1)
            self._slots[name] = slot
        return slot

    def _inherit_channels_first(self, path, producer):
        """`path`'s tensors (an activation's) are channels-first when the
        tensor that went in came from a channels-first module (`producer`, a
        path or a tensor name), and are not when it came from another; with
        no producer known, what register_module guessed stands."""
        if producer is None:
            return
        if _path_of(producer) in self._channels_first:
            self._channels_first.add(path)
        else:
            self._channels_first.discard(path)

    def _set(self, name, collections, tensor, about_to_change=False):
        """`about_to_change`: an in-place op is about to overwrite `tensor`,
        so it is read now, and so is any other held tensor that is it."""
        with self._lock:
            if self._closed:
                return
            if about_to_change:
                self._session.settle(tensor)
            slot = self._slots.get(name)
            if slot is None:
                slot = self._slot(name, collections, _TENSOR)
            self._session.set(slot, tensor, about_to_change)

    def _set_in_hook(self, name, collections, tensor, about_to_change=False):
        """_set from inside torch's hooks: what goes wrong is a warning
        naming the tensor (once), never an exception in the training's
        forward (as _tstat.OutputHook does for the leaf modules' outputs)."""
        try:
            self._set(name, collections, tensor, about_to_change)
        except Exception as e:
            self._not_captured(name, e)

    def _not_captured(self, name, error):
        """The warning for a tensor a hook could not read (_set_in_hook's,
        and _tstat.OutputHook's for the leaf modules' outputs)."""
        self._warn([f"{name} is not captured: {error}"])

    def _loss_labels(self, scores, targets):
        """A classification loss's scores and class ids as the step's labels
        and predictions, when they have the shapes of one example per row;
        anything else (per-token or per-pixel losses, class probabilities as
        targets, more classes than labels have) is left alone."""
        if not isinstance(scores, torch.Tensor) or not isinstance(targets, torch.Tensor):
            return
        if targets.dtype not in (torch.int64, torch.int32, torch.uint8) or targets.dim() != 1 \
                or scores.dim() != 2 or scores.shape[0] != targets.shape[0] \
                or not 2 <= scores.shape[1] <= _MAX_LOSS_CLASSES:
            return
        self._set_in_hook("labels", ["labels"], targets)
        self._set_in_hook("predictions", [], scores.detach())

    def _gradient_hook(self, slot):
        fresh = self._fresh

        def on_gradient(_grad):
            if self._closed:
                return None
            fresh.append(slot)  # told to the session when the step ends
            if not self._callback_queued:
                self._callback_queued = True
                _queue_backward_callback(self._backward_end)
            return None
        return on_gradient

    def _backward_end(self):
        self._callback_queued = False
        if self._step_on == "auto" and self._mode == _modes.TRAIN and not self._closed:
            self._end_step_quietly()

    def _hook_gradient(self, name, p, ref):
        grad_slot = self._slot("gradient/" + name, ["gradients"], _GRADIENT, ref)
        self._handles.append(p.register_hook(self._gradient_hook(grad_slot)))

    def _hook_unfrozen(self):
        """Gradient hooks for the parameters unfrozen since the last forward
        (before this forward's backward produces their gradients)."""
        still = []
        for name, ref in self._frozen:
            p = ref()
            if p is None:
                continue
            if p.requires_grad:
                self._hook_gradient(name, p, ref)
            else:
                still.append((name, ref))
        self._frozen = still

    def _top_forward_pre(self, _module, inputs):
        if self._frozen and not self._closed:
            with self._lock:
                self._hook_unfrozen()
        if self._closed or self._step_on != "auto":
            tensors = []
        else:
            with self._lock:
                if self._step_open:
                    self._end_step_quietly()
                try:
                    self._begin_step()
                    self._step_open = True
                    self._session.queue_parameters()
                except Error as e:
                    self._warn([f"a step could not begin: {e.message}"])
            tensors = _tensors_of(inputs)
        if tensors and not self._closed:
            self._set_in_hook(f"{self._top_name}_input", [], tensors[0])

    def _top_forward_post(self, _module, _inputs, _output):
        """Large CPU tensors handed to tstat's capture thread in this forward
        are read by now, and let go."""
        if not self._closed:
            with self._lock:
                self._session.finish_queued()

    def _input_hook(self, path, in_place):
        """The inputs of an activation function, before it runs. One with
        inplace=True overwrites them: they are read at once, and so is any
        other captured tensor that is the same one (the layer output it
        rectifies)."""
        def on_input(_module, inputs):
            if self._closed:
                return
            calls = self._calls.get(path, 0)
            base = path if calls == 0 else f"{path}#{calls}"
            if path not in self._unit_axis_seen:  # before its first tensor is registered
                first = _tensors_of(inputs)
                fn = first[0].grad_fn if first else None
                if fn is not None:  # else (torch.no_grad()) at a later call
                    self._unit_axis_seen.add(path)
                    known = self._produced.get(id(fn))
                    self._inherit_channels_first(path, known[1] if known is not None else None)
            for i, t in enumerate(_tensors_of(inputs)):
                self._set_in_hook(f"{base}_input" if i == 0 else f"{base}_input_{i}", [], t,
                                  about_to_change=in_place)
        return on_input

    def _output_hook(self, path, functional):
        """The module's outputs, and with `functional` what an activation
        called as a function made of its first input
        (_functional_activation). This runs after every leaf module at every
        step: _tstat.OutputHook does the common case (the module's first
        call in the step, one tensor out) in C++ and calls back
        _functional_activation and _outputs_after_first for the rest."""
        return _tstat.OutputHook(self, self._session, path, functional,
                                 self._functional_activations, torch.Tensor)

    def _outputs_after_first(self, path, calls, output):
        """What _tstat.OutputHook leaves to Python: the outputs of a module
        called `calls` times before in this step, or of one whose output is
        not one tensor."""
        base = path if calls == 0 else f"{path}#{calls}"
        for i, t in enumerate(_tensors_of(output)):
            name = f"{base}_output" if i == 0 else f"{base}_output_{i}"
            self._set_in_hook(name, [], t)
            if self._functional_activations:
                self._note_produced(t, base if i == 0 else name)

    def _note_produced(self, t, name):
        fn = t.grad_fn
        if fn is not None:
            self._produced[id(fn)] = (fn, name, weakref.ref(t))

    def _functional_activation(self, path, calls, x_in, fn):
        """What an activation called as a function (F.relu, torch.tanh,
        x.sigmoid(), F.gelu, ...) made of `x_in`, the first input of the leaf
        module at `path` (called `calls` times before in this step), seen
        through autograd (`fn`, its grad_fn, not yet seen in this step), so
        only where gradients are recorded; once a step however many layers
        take it in. Read after the module's forward, which may overwrite its
        input (nn.Dropout(inplace=True)) without changing what is read: a
        ReLU's output, which autograd lets nothing change in place (the
        ReLU's backward needs it), or another function's input.

        A ReLU: its output, as "<producer>.relu_output" when a captured
        layer's output went into it ("fc1.relu_output", as for the nn.ReLU
        modules the dead_relu rule judges), else as "<path>_input.relu_output"
        (a ReLU after x + y). Any other: its input (what saturated_activation
        and poor_weight_initialization judge, as for nn.Tanh modules): the
        producer's output, as "<producer>.tanh_input"; when no captured
        layer's output went into it, the input the function kept for the
        backward pass, as "<path>_input.gelu_input" (GELU, SiLU, ELU, ...),
        or for a tanh or sigmoid, which keep their output instead, that
        output, as "<path>_input.tanh_output" (saturated_activation judges
        it against the activation of its bounds); never the input of a
        function that overwrote it (torch.tanh_ on a layer's output).
        A ReLU, tanh or sigmoid whose output reached the module through
        pooling, views or dropout (F.max_pool2d(F.relu(conv(x)), 2)) is read
        from the output autograd kept, as if the module took it in."""
        kind = type(fn).__name__
        activation = "relu" if kind == "ReluBackward0" else _FUNCTIONAL_ACTIVATION.get(kind)
        if activation is None:
            fn, x_in = self._activation_behind(fn)
            if fn is None:
                return
            activation = _KEEPS_RESULT[type(fn).__name__]
        producer = fn.next_functions[0][0] if fn.next_functions else None
        known = self._produced.get(id(producer)) if producer is not None else None
        if known is not None and known[1] is None:
            known = None  # an activation's output that was not read
        if known is not None:
            base = known[1]
        else:
            base = f"{path if calls == 0 else f'{path}#{calls}'}_input"
        # Units as in what went in: the producer's, or else the consumer's
        # (a convolution taking relu(x + y)); decided once, before its slot.
        target = f"{base}.{activation}"
        if target not in self._unit_axis_seen:
            self._unit_axis_seen.add(target)
            self._inherit_channels_first(target, base if known is not None else path)
        if activation == "relu":
            self._produced[id(fn)] = (fn, f"{base}.relu", weakref.ref(x_in))
            self._set_in_hook(f"{base}.relu_output", [], x_in)
            return
        self._produced[id(fn)] = (fn, None, None)  # seen: not again in this step
        if known is not None:
            x = known[2]()
        elif activation in ("tanh", "sigmoid"):  # autograd keeps their output, not their input
            self._set_in_hook(f"{base}.{activation}_output", [], x_in)
            return
        else:  # GELU, SiLU, ... keep their input for the backward pass
            try:
                x = getattr(fn, "_saved_self", None)
            except RuntimeError:  # freed by a backward: an output kept from an earlier step
                x = None
        if isinstance(x, torch.Tensor) and x.data_ptr() != x_in.data_ptr():
            self._set_in_hook(f"{base}.{activation}_input", [], x)

    def _activation_behind(self, fn):
        """The ReLU, tanh or sigmoid behind up to four _PASS_THROUGH nodes
        from `fn`, and the output it kept for its backward pass (what the
        module would have taken in); (None, None) when there is none. The
        nodes walked are marked seen for this step."""
        for _ in range(4):
            if not fn.next_functions or not _PASS_THROUGH.match(type(fn).__name__):
                return None, None
            self._produced[id(fn)] = (fn, None, None)
            fn = fn.next_functions[0][0]
            if fn is None or id(fn) in self._produced:
                return None, None
            if type(fn).__name__ in _KEEPS_RESULT:
                try:
                    return fn, fn._saved_result
                except RuntimeError:  # freed by a backward (a graph kept from an earlier step)
                    return None, None
        return None, None

    def _begin_step(self):
        if self._start_step is None:
            self._session.begin_step()
            return
        s, self._start_step = self._start_step, None
        # A session whose mode was never set runs in GLOBAL, as plain steps do.
        mode = self._mode if self._mode_set else _modes.GLOBAL
        self._session.begin_step_at(s, int(mode), s)

    def _end_step(self):
        # Any CUDA tensor means CUDA is initialized: reduce on torch's stream.
        stream = torch.cuda.current_stream().cuda_stream if torch.cuda.is_initialized() else 0
        if self._start_step is not None and not self._step_open:
            self._begin_step()  # step_on="manual": the first step, at its numbers
        try:
            if self._fresh:
                self._session.mark_fresh(self._fresh)
            self._session.end_step(stream)
        finally:
            self._step_open = False
            self._fresh.clear()
            self._calls.clear()
            self._produced.clear()
            self._warn(self._session.warnings())

    def _end_step_quietly(self):
        """From inside torch's hooks: an error is a warning, never raised
        into the training's forward or backward."""
        with self._lock:
            try:
                self._end_step()
            except Error as e:
                self._warn([f"step not captured: {e.message}"])

    def _warn(self, messages):
        for m in messages:
            if m not in self._warned:
                self._warned.add(m)
                warnings.warn(f"tstat: {m}", RuntimeWarning, stacklevel=3)


def _env_config():
    return os.environ.get("TSTAT_CONFIG", "")


def _close_at_exit(ref):
    hook = ref()
    if hook is not None:
        try:
            hook.close()
        except Error:
            pass
