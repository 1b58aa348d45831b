#!/usr/bin/env python3
"""The GPU bundle's Python step (tools/gpu-check.sh): tstat.pytorch.Hook on
the device machine's own PyTorch. The bundle's module is built for Debian
12's Python 3.11; for another Python it is built first, from the sources the
bundle carries (tools/gpu_build_module.py: that Python's headers, pybind11's
from the torch wheel, nvcc's host compiler):

1. tests/python/test_hook_cuda.py: CUDA training captured with no host
   synchronisation (torch's sync debug mode "error"), stats equal torch's,
   a ReLU's output and a tanh's input called as functions included; fp16
   autocast with GradScaler overflows not stopped by the default rules;
2. benchmarks/overhead_python.py --device cuda: the hook's slowdown of the
   benchmark CNN on the GPU, and its cost per small tensor.

Exit 0 when both ran and the test passed; 3 when no module could be had for
this Python, or torch has no CUDA (the reason is printed); 1 on a failure."""

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))

suffix = sysconfig.get_config_var("EXT_SUFFIX") or ""
modules = sorted(p.name for p in (here / "tstat").glob("_tstat*.so"))
if not any(m.endswith(suffix) for m in modules):
    print(f"python {sys.version.split()[0]} loads '*{suffix}' modules; the bundle has {modules}: "
          "building one", flush=True)
    import gpu_build_module
    try:
        built = gpu_build_module.build(here / "module-src", here.parent / "lib" / "libtstat.so.0",
                                       here / "tstat", rpath="$ORIGIN/../../lib")
    except (gpu_build_module.BuildError, OSError, subprocess.SubprocessError) as e:
        print(f"the module could not be built: {e}")
        sys.exit(3)
    print(f"built {built.name}", flush=True)
try:
    import torch
except ImportError as e:
    print(f"no torch for {sys.executable}: {e}")
    sys.exit(3)
try:
    import numpy  # noqa: F401 - tstat.trials reads runs as numpy arrays
except ImportError as e:
    print(f"no numpy for {sys.executable} (tstat.trials needs it): {e}")
    sys.exit(3)
if not torch.cuda.is_available():
    print(f"torch {torch.__version__}: no CUDA device")
    sys.exit(3)
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
      f"{torch.cuda.get_device_name(0)}", flush=True)

import test_hook_cuda  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    test_hook_cuda.test_cuda_training_is_captured_without_host_synchronisation(Path(tmp))
    test_hook_cuda.test_activations_called_as_functions_on_cuda(Path(tmp))
    test_hook_cuda.test_mixed_precision_overflows_do_not_stop_training(Path(tmp))
print("test_hook_cuda: passed", flush=True)

env = dict(os.environ, PYTHONPATH=str(here))
for args in (["--device", "cuda", "--steps", "100", "--repeats", "3", "--intervals", "1,10,100",
              "--batch", "64", "--tensors", "1000", "--json"],
             ["--device", "cuda", "--steps", "100", "--repeats", "3", "--intervals", "1,10",
              "--batch", "64", "--tensors", "1000", "--json", "--no-rules"]):
    print("overhead_python.py " + " ".join(args), flush=True)
    done = subprocess.run([sys.executable, str(here / "overhead_python.py")] + args, env=env,
                          capture_output=True, text=True, timeout=240)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        print(done.stderr[-4000:])
        sys.exit(1)
