// Fuzz target: a segment file as `tstat inspect`, `dump`, `check` and the
// rule runners read it. The input is the HDF5 part of a segment; the target
// seals it (so that the reader goes past the checksum into HDF5, as a crafted
// file would) and reads everything through tstat::Trial.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/h5/segment_seal.h"
#include "tests/fuzz/fuzz_target.h"
#include "tstat/trial.h"

namespace {

// Bounds the work per input: a crafted file may name thousands of tensors.
constexpr std::size_t kMaxNames = 8;
constexpr std::size_t kMaxSteps = 8;

void ReadEverything(const tstat::Trial& trial) {
  (void)trial.workers();
  (void)trial.collections();
  (void)trial.config_json();
  (void)trial.drops();
  const std::vector<tstat::StepKey> steps = trial.steps();
  const std::size_t step_count = std::min(steps.size(), kMaxSteps);
  for (std::size_t i = 0; i < step_count; ++i) {
    (void)trial.step_records(0, steps[i].global_step);
  }
  std::vector<std::string> names = trial.tensor_names();
  names.resize(std::min(names.size(), kMaxNames));
  for (const std::string& name : names) {
    (void)trial.tensor_info(name);
    (void)trial.series(name, tstat::StatField::kMean);
    (void)trial.series(name, tstat::StatField::kStd, tstat::Mode::kTrain);
    for (std::size_t i = 0; i < step_count; ++i) {
      (void)trial.record(name, steps[i].global_step);
      (void)trial.stats(name, steps[i].global_step);
    }
    std::vector<tstat::StepKey> raw_steps = trial.raw_steps(name);
    raw_steps.resize(std::min(raw_steps.size(), kMaxSteps));
    for (const tstat::StepKey& step : raw_steps) {
      auto raw = trial.raw(name, step.global_step, step.mode);
      if (raw.ok()) (void)raw->ToDoubles();
    }
  }
  std::vector<std::string> scalars = trial.scalar_names();
  scalars.resize(std::min(scalars.size(), kMaxNames));
  for (const std::string& name : scalars) (void)trial.scalar_series(name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string run = tstat::fuzz::ScratchDir() + "/run";
  const std::string worker = run + "/" + tstat::io::WorkerDirName(0);
  std::error_code ec;
  std::filesystem::remove_all(run, ec);
  std::filesystem::create_directories(worker, ec);
  if (ec) return 0;

  std::vector<std::uint8_t> image(tstat::io::kSegmentUserBlock + size, 0);
  if (size > 0) std::memcpy(image.data() + tstat::io::kSegmentUserBlock, data, size);
  tstat::io::SealSegmentImage(&image);
  if (!tstat::fuzz::WriteFileBytes(worker + "/" + tstat::io::SegmentFileName(0), image.data(),
                                   image.size())) {
    return 0;
  }
  auto trial = tstat::Trial::Open(run);
  if (trial.ok()) {
    (void)(*trial)->Refresh();
    ReadEverything(**trial);
  }
  return 0;
}
