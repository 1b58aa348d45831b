// How the tstat CLI opens runs: each new segment is read once in a child
// process first, so that a segment crafted to crash libhdf5 is skipped with
// an error naming it instead of ending the command (TrialOptions).
#pragma once

#include "tstat/trial.h"

namespace tstat::cli {

inline TrialOptions CliTrialOptions() {
  TrialOptions options;
  options.isolate_segment_reads = true;
  return options;
}

}  // namespace tstat::cli
