#include "tstat/engine.h"

namespace tstat {

const char* Version() { return TSTAT_VERSION_STRING; }

}  // namespace tstat
