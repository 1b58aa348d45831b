// The real thing: a session writing a run with the HDF5 writer, read back
// with tstat::Trial. Modes, scalars, raw snapshots, drops, hostile names
// (stored verbatim, never turned into paths), the stored config and counters,
// and a run directory that cannot be created.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tests/support/compare.h"
#include "tests/support/reference.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace tstat {
namespace {

namespace fs = std::filesystem;

TEST(Hdf5RunTest, WrittenRunReadsBackThroughTrial) {
  testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  SessionConfig config = testing::TestConfig();
  config.out_dir = run;
  config.raw_save_config.base.save_steps = {1};
  config.raw_save_config.base.save_interval = 0;
  config.pipeline.raw_memory_cap_bytes = 1000;  // the big tensor's raw cannot fit
  auto created = Session::Create(config);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<Session> session = std::move(created).value();

  const std::string hostile = "../../escape/\"quoted\" name\n/..";
  std::vector<float> w = {1.5f, -2.0f, 0.0f, 4.0f, -0.5f, 3.0f};
  std::vector<float> big(1000, 0.25f);
  ASSERT_TRUE(
      session->RegisterTensor({"fc.weight", TensorView::Host(w.data(), DType::kFloat32, {2, 3})})
          .ok());
  ASSERT_TRUE(
      session->RegisterTensor({hostile, TensorView::Host(w.data(), DType::kFloat32, 6)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"big.weight", TensorView::Host(big.data(), DType::kFloat32, 1000)})
          .ok());
  // TRAIN 0, 1, 2 then EVAL 0, 1 (global 3, 4).
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(session->SetMode(i < 3 ? Mode::kTrain : Mode::kEval).ok());
    w[0] = static_cast<float>(i);
    ASSERT_TRUE(session->SaveScalar("loss", 2.0 - 0.25 * i).ok());
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();
  const PipelineCounters counters = session->counters();

  // Nothing escaped the run directory.
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(dir.path())) top.push_back(e.path().filename());
  EXPECT_EQ(top, std::vector<std::string>{"run"});

  auto opened = Trial::Open(run);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Trial& trial = *opened.value();
  EXPECT_TRUE(trial.loaded_all_steps());
  const std::vector<std::string> names = trial.tensor_names();
  EXPECT_NE(std::find(names.begin(), names.end(), hostile), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "fc.weight"), names.end());

  // TRAIN step 1 = global step 1, EVAL step 1 = global step 4.
  auto rec = trial.record("fc.weight", 1, Mode::kTrain);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  std::vector<float> w1 = {1.0f, -2.0f, 0.0f, 4.0f, -0.5f, 3.0f};
  const TensorView v1 = TensorView::Host(w1.data(), DType::kFloat32, {2, 3});
  EXPECT_TRUE(testing::ResultMatches(testing::ToResult(rec.value()),
                                     testing::ReferenceReduce(v1, {}),
                                     testing::ToleranceFor(DType::kFloat32)));
  auto eval = trial.stats("fc.weight", 1, Mode::kEval);
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  EXPECT_EQ(eval->max, 4.0);  // w[0] = 4 at global step 4
  EXPECT_EQ(trial.steps(Mode::kEval).size(), 2u);

  auto loss = trial.scalar_series("loss");
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ASSERT_EQ(loss->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*loss)[i].value, 2.0 - 0.25 * i);

  auto raw = trial.raw(hostile, 1);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->ToDoubles(), (std::vector<double>{1.0, -2.0, 0.0, 4.0, -0.5, 3.0}));
  bool big_dropped = false;
  for (const DropRecord& d : trial.drops())
    big_dropped = big_dropped || (d.kind == "raw" && d.bytes == 4000);
  EXPECT_TRUE(big_dropped);

  Result<SessionConfig> stored = ParseConfigJson(trial.config_json());
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->out_dir, run);
  EXPECT_EQ(stored->raw_save_config.base.save_steps, (std::vector<std::int64_t>{1}));

  const std::vector<WorkerSummary> workers = trial.workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_TRUE(workers[0].closed);
  EXPECT_EQ(workers[0].counters.records_written, counters.records_written);
  // Raw save_steps {1} is a mode step: TRAIN 1 (global 1) and EVAL 1 (global 4).
  EXPECT_EQ(workers[0].counters.raw_dropped, 2u);
  EXPECT_EQ(trial.raw_steps("fc.weight").size(), 2u);
}

// pipeline.raw_compression_level reaches the writer: 1 MiB of a repeating
// pattern stored at level 0 takes at least 1 MiB on disk, at level 6 a small
// fraction of it; both read back bit-exact.
TEST(Hdf5RunTest, RawCompressionLevelOfTheConfigIsTheFilesLevel) {
  std::vector<float> pattern(1 << 18);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<float>(i % 7) * 0.5f;
  std::uintmax_t bytes[2] = {0, 0};
  const int levels[2] = {0, 6};
  for (int k = 0; k < 2; ++k) {
    testing::TempDir dir;
    const std::string run = dir.path() + "/run";
    SessionConfig config = testing::TestConfig();
    config.out_dir = run;
    config.raw_save_config.base.save_interval = 1;
    config.pipeline.raw_compression_level = levels[k];
    auto created = Session::Create(config);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    std::unique_ptr<Session> session = std::move(created).value();
    ASSERT_TRUE(session
                    ->RegisterTensor({"p.weight", TensorView::Host(pattern.data(), DType::kFloat32,
                                                                   {static_cast<std::int64_t>(
                                                                       pattern.size())})})
                    .ok());
    ASSERT_TRUE(session->EndStep().ok());
    ASSERT_TRUE(session->Close().ok()) << session->status().ToString();
    for (const auto& e : fs::recursive_directory_iterator(run)) {
      if (e.is_regular_file()) bytes[k] += e.file_size();
    }
    auto trial = Trial::Open(run);
    ASSERT_TRUE(trial.ok()) << trial.status().ToString();
    auto raw = (*trial)->raw("p.weight", 0);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    ASSERT_EQ(raw->bytes.size(), pattern.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(raw->bytes.data(), pattern.data(), raw->bytes.size()), 0)
        << "level " << levels[k];
  }
  EXPECT_GE(bytes[0], pattern.size() * sizeof(float));
  EXPECT_LT(bytes[1] * 10, bytes[0]) << bytes[1] << " bytes at level 6, " << bytes[0] << " at 0";
}

TEST(Hdf5RunTest, ARunDirectoryThatCannotBeCreatedIsAnIoError) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/file") << "not a directory";
  SessionConfig config;
  config.out_dir = dir.path() + "/file/run";
  auto s = Session::Create(config);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIoError) << s.status().ToString();
  EXPECT_NE(s.status().message().find(config.out_dir), std::string::npos);
}

TEST(Hdf5RunTest, ASecondSessionNeverOverwritesAWorkersData) {
  testing::TempDir dir;
  SessionConfig config;
  config.out_dir = dir.path();
  config.save_config = SaveConfig::Every(1);
  {
    auto s = Session::Create(config);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(s.value()->SaveScalar("x", 1).ok());
    ASSERT_TRUE(s.value()->EndStep().ok());
    ASSERT_TRUE(s.value()->Close().ok());
  }
  auto again = Session::Create(config);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition) << again.status().ToString();
}

}  // namespace
}  // namespace tstat
