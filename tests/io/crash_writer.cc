// crash_writer: writes the deterministic run of crash_formula.h through
// Hdf5RunWriter, flushing often, for the kill -9 tests.
//
//   crash_writer RUN_DIR STEPS FLUSH_EVERY STEP_MICROSECONDS
//
// After every successful Flush it prints "flushed <last global step>" on
// stdout (and flushes stdout), so a test that kills it knows which steps must
// be durable. After STEPS steps it closes the run and prints "closed".
// Exit status: 0 closed, 1 usage, 2 an io error (printed on stderr).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "io/write/hdf5_run_writer.h"
#include "tests/io/crash_formula.h"

namespace {

using namespace tstat;
using namespace tstat::io;
using namespace tstat::io::testing;

int Fail(const Status& s) {
  std::fprintf(stderr, "crash_writer: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: crash_writer RUN_DIR STEPS FLUSH_EVERY STEP_MICROSECONDS\n");
    return 1;
  }
  const std::int64_t steps = std::atoll(argv[2]);
  const std::int64_t flush_every = std::max(1LL, std::atoll(argv[3]));
  const long step_us = std::atol(argv[4]);
  Hdf5RunWriterOptions options;
  options.info.run_dir = argv[1];
  options.info.host = "crash-host";
  options.info.config_json = "{\"writer\": \"crash_writer\"}";
  auto opened = Hdf5RunWriter::Open(options);
  if (!opened.ok()) return Fail(opened.status());
  std::unique_ptr<Hdf5RunWriter> writer = std::move(opened).value();

  std::vector<TensorInfo> tensors;
  for (int t = 0; t < kCrashTensors - 1; ++t) {
    TensorInfo info;
    info.id = static_cast<std::uint32_t>(t);
    info.name = CrashTensorName(t);
    info.shape = {4, 4};
    info.collections = {"weights"};
    tensors.push_back(info);
  }
  TensorInfo loss;
  loss.id = kCrashLossId;
  loss.name = "loss";
  loss.kind = TensorKind::kScalar;
  loss.dtype = DType::kFloat64;
  tensors.push_back(loss);
  if (Status s = writer->RegisterTensors(tensors); !s.ok()) return Fail(s);

  PipelineCounters counters;
  for (std::int64_t g = 0; g < steps; ++g) {
    if (g == kCrashLateTensorStep) {
      TensorInfo late;
      late.id = kCrashTensors - 1;
      late.name = CrashTensorName(kCrashTensors - 1);
      late.shape = {4, 4};
      if (Status s = writer->RegisterTensors({late}); !s.ok()) return Fail(s);
    }
    StepBatch batch;
    batch.key = CrashStepKey(g);
    batch.wall_time = 1.7e9 + static_cast<double>(g);
    for (int t = 0; t < kCrashTensors; ++t) {
      if (CrashTensorRecorded(t, g)) batch.stats.push_back(CrashRecord(t, g));
    }
    batch.scalars.push_back(ScalarRecord{kCrashLossId, 1.0 / static_cast<double>(g + 1),
                                         1.7e9 + static_cast<double>(g)});
    if (g % 5 == 0) {
      std::vector<std::uint8_t> bytes(16 * sizeof(float));
      for (int i = 0; i < 16; ++i) {
        const float v = CrashRawValue(g, i);
        std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
      }
      batch.raws.push_back(RawSnapshot{0, DType::kFloat32, {4, 4}, SharedBytes(std::move(bytes))});
    }
    if (Status s = writer->Write(batch); !s.ok()) return Fail(s);
    ++counters.steps_captured;
    // As if every saved step followed one unsaved step: capture totals the
    // h5py layout test checks (binary fractions, exact in any order).
    counters.capture.steps += 2;
    counters.capture.steps_saved += 1;
    counters.capture.step_seconds += 0.5;
    counters.capture.capture_seconds += 0.0625;
    counters.records_written += batch.stats.size() + batch.scalars.size() + batch.raws.size();
    if ((g + 1) % flush_every == 0) {
      if (Status s = writer->Flush(counters); !s.ok()) return Fail(s);
      std::printf("flushed %lld\n", static_cast<long long>(g));
      std::fflush(stdout);
    }
    if (step_us > 0) ::usleep(static_cast<useconds_t>(step_us));
  }
  if (Status s = writer->Close(counters); !s.ok()) return Fail(s);
  std::printf("closed\n");
  return 0;
}
