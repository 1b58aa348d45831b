// The LibTorch commands (`tstat demo`, `tstat bench overhead`, `tstat bench
// detection`) live in a second binary, tstat-torch, next to tstat: loading
// LibTorch costs ~0.5-1 s at every start, which `tstat inspect`, `check`
// and the rest should not pay. tstat hands those commands over with execv;
// tstat-torch (and a tstat built without LibTorch) runs them itself.
#pragma once

namespace tstat::cli {

// If argv is a LibTorch command and this binary forwards them: execs the
// LibTorch CLI with the same arguments (returns only when that fails:
// true, with *exit_code set after printing why). Otherwise false.
bool ForwardToTorchCli(int argc, char** argv, int* exit_code);

}  // namespace tstat::cli
