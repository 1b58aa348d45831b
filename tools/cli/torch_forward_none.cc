// ForwardToTorchCli for tstat-torch, and for a tstat built without LibTorch:
// nothing is forwarded (the LibTorch commands run here, or say why not).
#include "tools/cli/torch_forward.h"

namespace tstat::cli {

bool ForwardToTorchCli(int /*argc*/, char** /*argv*/, int* /*exit_code*/) { return false; }

}  // namespace tstat::cli
