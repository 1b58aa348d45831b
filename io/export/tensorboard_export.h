// A run as TensorBoard event files (`tstat export tensorboard RUN OUTDIR`):
// one TensorBoard run per worker, OUTDIR/worker-<rank>/events.out.tfevents.*,
// one Event per exported step holding, as summary values:
//   - the scalars saved at that step (SaveScalar: losses, learning rates), tag = name;
//   - the chosen stats of each chosen tensor, tag = "<tensor>/<stat>";
//   - its exponent histogram, tag = "<tensor>/exponent_histogram": a
//     histogram of |x| over finite non-zero values whose buckets are tstat's
//     power-of-two bins ([2^e, 2^(e+1)) each, the bucket limits 2^(e+1));
//   - its linear histogram when one was captured, tag = "<tensor>/histogram":
//     the captured buckets, with the values below and above its range as a
//     first and a last bucket.
// Steps are global steps; tags of EVAL and PREDICT steps are prefixed
// "EVAL/" and "PREDICT/", so each mode is a curve of its own. An event's
// wall time is the step's capture time. Reads the run a step at a time
// (memory bounded by one step's records and the scalars).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/status.h"
#include "tstat/trial.h"

namespace tstat::io {

struct TensorBoardExportOptions {
  std::vector<StatField> stats = {StatField::kL2, StatField::kMean, StatField::kStd,
                                  StatField::kMin, StatField::kMax};
  std::string collection;  // only the tensors of this collection ("": every one)
  std::string regex;       // only names with a partial match (RE2; "": every one)
  bool exponent_histograms = true;
  bool linear_histograms = true;
  std::int64_t every = 1;  // every this many saved steps of each worker (>= 1)
};

struct TensorBoardExportReport {
  struct Worker {
    int rank = 0;
    std::string file;
    std::int64_t steps = 0;
    std::uint64_t scalars = 0;  // summary values of scalars and stats
    std::uint64_t histograms = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<Worker> workers;
  std::uint64_t tensors = 0;  // tensors chosen (of every worker)
};

// Writes into `out_dir` (created when missing; existing files are never
// overwritten: each export writes new event files). Errors: kInvalidArgument
// for options (every < 1, a bad regex), kNotFound when nothing matches the
// selection, write errors naming the file.
Result<TensorBoardExportReport> ExportTensorBoard(const Trial& trial, const std::string& out_dir,
                                                  const TensorBoardExportOptions& options);

}  // namespace tstat::io
