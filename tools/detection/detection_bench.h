// `tstat bench detection`: runs the detection matrix (cases.h) with the
// default configuration and reports, per fault, the step it manifested
// (oracle.h), the step the rule meant for it fired and the steps run against
// those planned; per healthy run, its findings.
// Thread safety: one bench per process.
#pragma once

#include <ostream>
#include <string>

#include "tools/detection/cases.h"
#include "tstat/status.h"

namespace tstat::detection {

struct DetectionBenchOptions {
  MatrixOptions matrix;
  std::string out_dir;   // where the runs go; empty: a temporary directory, removed after
  std::string dataset;   // digits CSV; empty: Debian's python3-sklearn copy
  bool json = false;     // one JSON object per case, then a summary object
  bool verbose = false;  // also every finding of every run
};

// Runs the matrix. *all_passed: every fault found in time by its rule and
// every healthy run clean. Errors: a run could not be set up or written.
Status RunDetectionBench(const DetectionBenchOptions& options, std::ostream& out, std::ostream& err,
                         bool* all_passed);

}  // namespace tstat::detection
