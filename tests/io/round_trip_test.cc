// Round trip of every table: a run written through Hdf5RunWriter with known
// values (records computed by the test-support reference from real tensors)
// is read back through Trial and compared field by field.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "io/format/run_layout.h"
#include "io/format/segment_schema.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tests/support/data.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

constexpr std::uint32_t kWeight = 0, kBias = 1, kLabels = 2, kLoss = 3, kFirstRaw = 4;

// Global step -> (mode, mode step): TRAIN 0 1 2, EVAL 0, TRAIN 3 4.
StepKey KeyOf(std::int64_t g) {
  static const StepKey kKeys[] = {{0, Mode::kTrain, 0}, {1, Mode::kTrain, 1}, {2, Mode::kTrain, 2},
                                  {3, Mode::kEval, 0},  {4, Mode::kTrain, 3}, {5, Mode::kTrain, 4}};
  return kKeys[g];
}

std::vector<double> RawValues(DType dtype, std::int64_t step) {
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) {
    double x = (i - 5) * 0.75 + static_cast<double>(step);
    if (IsIntegerDType(dtype)) x = std::round(x * 3);
    if (dtype == DType::kUInt8) x = std::fabs(x);
    v.push_back(x);
  }
  if (IsFloatingDType(dtype)) v[3] = std::nan("");
  return v;
}

RawSnapshot MakeRaw(std::uint32_t id, DType dtype, std::int64_t step) {
  tstat::testing::HostTensor t = tstat::testing::MakeTensor(dtype, RawValues(dtype, step), {3, 4});
  RawSnapshot raw;
  raw.tensor_id = id;
  raw.dtype = dtype;
  raw.shape = {3, 4};
  const auto* p = static_cast<const std::uint8_t*>(t.data());
  raw.bytes = SharedBytes(std::vector<std::uint8_t>(p, p + t.bytes()));
  return raw;
}

struct Written {
  std::map<std::int64_t, std::vector<TensorStatsRecord>> records;  // by global step
  std::map<std::int64_t, RawSnapshot> raws_f32;
};

class RoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = OpenWriterOrDie(dir_.path(), 0, 1, "{\"hook\": {\"save_interval\": 1}}");
    ASSERT_NE(writer, nullptr);
    std::vector<TensorInfo> tensors = {
        MakeTensorInfo(kWeight, "layer1.weight", {"weights", "default"}),
        MakeTensorInfo(kBias, "layer1.bias", {"biases"}),
        MakeTensorInfo(kLabels, "labels", {"labels"}, DType::kInt32, {40}),
        MakeScalarInfo(kLoss, "loss")};
    for (int d = 0; d < kNumDTypes; ++d) {
      const auto dtype = static_cast<DType>(d);
      TensorInfo t =
          MakeTensorInfo(kFirstRaw + d, std::string("raw.") + DTypeName(dtype), {}, dtype, {3, 4});
      t.space = d % 2 ? MemorySpace::kCuda : MemorySpace::kHost;
      tensors.push_back(t);
    }
    TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
    for (std::int64_t g = 0; g < 6; ++g) {
      const StepKey k = KeyOf(g);
      StepBatch b = MakeBatch(g, k.mode, k.mode_step);
      b.stats = {ReferenceRecord(g, kWeight, true), ReferenceRecord(g, kBias, false),
                 LabelRecord(g, kLabels)};
      b.scalars = {ScalarRecord{kLoss, 1.0 / static_cast<double>(g + 1), 1.7e9 + g + 0.5}};
      if (g == 2 || g == 5) {
        for (int d = 0; d < kNumDTypes; ++d) {
          b.raws.push_back(MakeRaw(kFirstRaw + d, static_cast<DType>(d), g));
        }
        written_.raws_f32[g] = b.raws[0];
      }
      if (g == 4)
        b.drops = {DropRecord{kBias, "raw", "raw snapshot memory cap (1 MiB) reached", 4096}};
      written_.records[g] = b.stats;
      TSTAT_ASSERT_OK(writer->Write(b));
      if (g == 2) {
        PipelineCounters c;
        c.steps_captured = 3;
        c.records_written = 13;
        TSTAT_ASSERT_OK(writer->Flush(c));
      }
    }
    PipelineCounters final_counters;
    final_counters.steps_captured = 6;
    final_counters.records_written = 42;
    final_counters.raw_dropped = 1;
    final_counters.raw_dropped_bytes = 4096;
    final_counters.stats_wait_seconds = 0.125;
    final_counters.queue_high_water = 3;
    final_counters.capture = CaptureTotals{9, 6, 0.1, 1.0 / 3.0};
    TSTAT_ASSERT_OK(writer->Close(final_counters));
    bytes_ = writer->bytes_written();
    auto trial = Trial::Open(dir_.path());
    ASSERT_TRUE(trial.ok()) << trial.status().ToString();
    trial_ = std::move(trial).value();
  }

  TempDir dir_;
  Written written_;
  std::uint64_t bytes_ = 0;
  std::unique_ptr<Trial> trial_;
};

TEST_F(RoundTripTest, FilesAreSegmentsCatalogAndClosed) {
  auto names = ListDir(dir_.Sub("worker-00000"));
  ASSERT_TRUE(names.ok());
  std::sort(names->begin(), names->end());
  EXPECT_EQ(names.value(), (std::vector<std::string>{"CLOSED", "catalog", "seg-000000000000.h5",
                                                     "seg-000000000001.h5"}));
}

TEST_F(RoundTripTest, EveryStatsRecordMatches) {
  for (const auto& [g, records] : written_.records) {
    const StepKey k = KeyOf(g);
    for (const TensorStatsRecord& want : records) {
      const std::string name = want.tensor_id == kWeight ? "layer1.weight"
                               : want.tensor_id == kBias ? "layer1.bias"
                                                         : "labels";
      auto by_global = trial_->record(name, g);
      ASSERT_TRUE(by_global.ok()) << by_global.status().ToString();
      ExpectRecordEqual(by_global.value(), want, name + " @" + std::to_string(g));
      auto by_mode = trial_->record(name, k.mode_step, k.mode);
      ASSERT_TRUE(by_mode.ok()) << by_mode.status().ToString();
      ExpectRecordEqual(by_mode.value(), want, name + " mode step");
    }
  }
}

TEST_F(RoundTripTest, StepRecordsAreInCaptureOrder) {
  for (const auto& [g, records] : written_.records) {
    auto got = trial_->step_records(0, g);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      ExpectRecordEqual((*got)[i], records[i], "step_records " + std::to_string(g));
    }
  }
}

TEST_F(RoundTripTest, SeriesOfEveryFieldMatchesStatValue) {
  for (int f = 0; f <= static_cast<int>(StatField::kAmax); ++f) {
    const auto field = static_cast<StatField>(f);
    StatField parsed;
    ASSERT_TRUE(ParseStatField(StatFieldName(field), &parsed));
    EXPECT_EQ(parsed, field);
    auto series = trial_->series("layer1.weight", field);
    ASSERT_TRUE(series.ok());
    ASSERT_EQ(series->size(), 6u);
    for (std::size_t i = 0; i < 6; ++i) {
      const TensorStats& want = written_.records[static_cast<std::int64_t>(i)][0].stats;
      EXPECT_EQ((*series)[i].step.global_step, static_cast<std::int64_t>(i));
      const double w = StatValue(want, field), got = (*series)[i].value;
      EXPECT_LE(std::fabs(got - w), 1e-12 * std::max(1.0, std::fabs(w))) << StatFieldName(field);
    }
  }
  auto train = trial_->series("layer1.weight", StatField::kMean, Mode::kTrain);
  ASSERT_TRUE(train.ok());
  ASSERT_EQ(train->size(), 5u);
  EXPECT_EQ((*train)[3].step.global_step, 4);
  EXPECT_EQ((*train)[3].step.mode_step, 3);
  // Label-only records have no stat set: no series points, and stats() says so.
  auto labels = trial_->series("labels", StatField::kCount);
  ASSERT_TRUE(labels.ok());
  EXPECT_TRUE(labels->empty());
  EXPECT_EQ(trial_->stats("labels", 1).status().code(), StatusCode::kNotFound);
}

TEST_F(RoundTripTest, ScalarsStepsAndConfig) {
  auto loss = trial_->scalar_series("loss");
  ASSERT_TRUE(loss.ok());
  ASSERT_EQ(loss->size(), 6u);
  for (std::int64_t g = 0; g < 6; ++g) {
    EXPECT_EQ((*loss)[g].value, 1.0 / static_cast<double>(g + 1));
    EXPECT_EQ((*loss)[g].step.mode, KeyOf(g).mode);
  }
  auto eval_loss = trial_->scalar_series("loss", Mode::kEval);
  ASSERT_TRUE(eval_loss.ok());
  ASSERT_EQ(eval_loss->size(), 1u);
  EXPECT_EQ((*eval_loss)[0].value, 0.25);
  EXPECT_EQ(trial_->scalar_names(), std::vector<std::string>{"loss"});

  std::vector<StepKey> all = trial_->steps();
  ASSERT_EQ(all.size(), 6u);
  for (std::int64_t g = 0; g < 6; ++g) {
    EXPECT_EQ(all[g].global_step, g);
    EXPECT_EQ(all[g].mode, KeyOf(g).mode);
    EXPECT_EQ(all[g].mode_step, KeyOf(g).mode_step);
  }
  EXPECT_EQ(trial_->steps(Mode::kEval).size(), 1u);
  EXPECT_EQ(trial_->steps(Mode::kTrain).size(), 5u);
  EXPECT_EQ(trial_->config_json(0), "{\"hook\": {\"save_interval\": 1}}");
  EXPECT_EQ(trial_->config_json(7), "");
}

TEST_F(RoundTripTest, RegistryAndCollections) {
  auto info = trial_->tensor_info("labels");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, kLabels);
  EXPECT_EQ(info->dtype, DType::kInt32);
  EXPECT_EQ(info->shape, (std::vector<std::int64_t>{40}));
  EXPECT_EQ(info->collections, std::vector<std::string>{"labels"});
  auto weight = trial_->tensor_info("layer1.weight");
  ASSERT_TRUE(weight.ok());
  EXPECT_EQ(weight->collections, (std::vector<std::string>{"weights", "default"}));
  auto cuda = trial_->tensor_info("raw.f16");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(cuda->space, MemorySpace::kCuda);
  EXPECT_EQ(cuda->dtype, DType::kFloat16);
  auto loss = trial_->tensor_info("loss");
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(loss->kind, TensorKind::kScalar);
  EXPECT_EQ(trial_->collections(),
            (std::vector<std::string>{"biases", "default", "labels", "losses", "weights"}));
  EXPECT_EQ(trial_->tensor_names({"", "weights", Mode::kGlobal}),
            std::vector<std::string>{"layer1.weight"});
  EXPECT_EQ(trial_->tensor_names({"^layer1\\.", "", Mode::kGlobal}),
            (std::vector<std::string>{"layer1.bias", "layer1.weight"}));
  EXPECT_EQ(trial_->tensor_names({"", "", Mode::kEval}),
            (std::vector<std::string>{"labels", "layer1.bias", "layer1.weight"}));
  EXPECT_EQ(trial_->tensor_info("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(RoundTripTest, RawSnapshotsOfEveryDType) {
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    const std::string name = std::string("raw.") + DTypeName(dtype);
    std::vector<StepKey> at = trial_->raw_steps(name);
    ASSERT_EQ(at.size(), 2u) << name;
    EXPECT_EQ(at[0].global_step, 2);
    EXPECT_EQ(at[1].global_step, 5);
    for (std::int64_t g : {2, 5}) {
      auto raw = trial_->raw(name, g);
      ASSERT_TRUE(raw.ok()) << raw.status().ToString();
      EXPECT_EQ(raw->dtype, dtype);
      EXPECT_EQ(raw->shape, (std::vector<std::int64_t>{3, 4}));
      RawSnapshot want = MakeRaw(kFirstRaw + d, dtype, g);
      EXPECT_EQ(raw->bytes, want.bytes.ToVector()) << name;
      // ToDoubles against the independent decoder of tests/support.
      std::vector<double> values = raw->ToDoubles();
      ASSERT_EQ(values.size(), 12u);
      for (std::int64_t i = 0; i < 12; ++i) {
        const double ref = tstat::testing::DecodeElement(want.bytes.data(), dtype, i);
        if (std::isnan(ref)) {
          EXPECT_TRUE(std::isnan(values[i])) << name << " element " << i;
        } else {
          EXPECT_EQ(values[i], ref) << name << " element " << i;
        }
      }
    }
    EXPECT_EQ(trial_->raw(name, 3).status().code(), StatusCode::kStepUnavailable);
  }
  // Mode steps address raws too: global step 5 is TRAIN step 4.
  auto by_mode = trial_->raw("raw.f32", 4, Mode::kTrain);
  ASSERT_TRUE(by_mode.ok());
  EXPECT_EQ(by_mode->bytes, written_.raws_f32[5].bytes.ToVector());
}

TEST_F(RoundTripTest, DropsAndCounters) {
  std::vector<DropRecord> drops = trial_->drops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].tensor_id, kBias);
  EXPECT_EQ(drops[0].kind, "raw");
  EXPECT_EQ(drops[0].reason, "raw snapshot memory cap (1 MiB) reached");
  EXPECT_EQ(drops[0].bytes, 4096u);

  std::vector<WorkerSummary> workers = trial_->workers();
  ASSERT_EQ(workers.size(), 1u);
  const WorkerSummary& w = workers[0];
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.host, "host-0");
  EXPECT_TRUE(w.closed);
  EXPECT_EQ(w.segments, 2);
  EXPECT_EQ(w.bytes, bytes_);
  std::uint64_t on_disk = 0;
  for (const char* seg : {"seg-000000000000.h5", "seg-000000000001.h5"}) {
    on_disk += FileSize(dir_.Sub(std::string("worker-00000/") + seg)).value();
  }
  EXPECT_EQ(w.bytes, on_disk);
  // The final counters (from CLOSED): the caller's, with the writer's own
  // segments_written and bytes_written.
  EXPECT_EQ(w.counters.steps_captured, 6u);
  EXPECT_EQ(w.counters.records_written, 42u);
  EXPECT_EQ(w.counters.raw_dropped, 1u);
  EXPECT_EQ(w.counters.raw_dropped_bytes, 4096u);
  EXPECT_EQ(w.counters.stats_wait_seconds, 0.125);
  EXPECT_EQ(w.counters.queue_high_water, 3u);
  EXPECT_EQ(w.counters.segments_written, 2u);
  EXPECT_EQ(w.counters.bytes_written, on_disk);
  // Capture totals, exactly (the marker stores doubles with 17 digits).
  EXPECT_EQ(w.counters.capture.steps, 9u);
  EXPECT_EQ(w.counters.capture.steps_saved, 6u);
  EXPECT_EQ(w.counters.capture.step_seconds, 0.1);
  EXPECT_EQ(w.counters.capture.capture_seconds, 1.0 / 3.0);
  EXPECT_EQ(w.world_size, 1);
  EXPECT_EQ(w.format_version, kFormatVersion);
  EXPECT_TRUE(trial_->loaded_all_steps());
}

// The capture totals travel with the counters: in each segment (a live run)
// and in CLOSED (the final ones); a CLOSED marker without them (written
// before they existed) reads as zero totals.
TEST(CaptureTotalsTest, StoredInSegmentsAndInTheClosedMarker) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}");
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeScalarInfo(0, "loss")}));
  StepBatch b = MakeBatch(0, Mode::kTrain, 0);
  b.scalars = {ScalarRecord{0, 0.5, 1.7e9}};
  TSTAT_ASSERT_OK(writer->Write(b));
  PipelineCounters c;
  c.steps_captured = 1;
  c.capture = CaptureTotals{10, 1, 1.5, 0.03};  // 9 steps were not saved
  TSTAT_ASSERT_OK(writer->Flush(c));

  auto trial = Trial::Open(dir.path());
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  ASSERT_EQ((*trial)->workers().size(), 1u);
  CaptureTotals got = (*trial)->workers()[0].counters.capture;  // from the segment
  EXPECT_EQ(got.steps, 10u);
  EXPECT_EQ(got.steps_saved, 1u);
  EXPECT_EQ(got.step_seconds, 1.5);
  EXPECT_EQ(got.capture_seconds, 0.03);
  EXPECT_FALSE((*trial)->workers()[0].closed);

  c.capture = CaptureTotals{20, 1, 3.25, 0.0625};  // more unsaved steps, then Close
  TSTAT_ASSERT_OK(writer->Close(c));
  TSTAT_ASSERT_OK((*trial)->Refresh());
  got = (*trial)->workers()[0].counters.capture;  // from CLOSED
  EXPECT_EQ(got.steps, 20u);
  EXPECT_EQ(got.step_seconds, 3.25);
  EXPECT_EQ(got.capture_seconds, 0.0625);
  EXPECT_TRUE((*trial)->loaded_all_steps());
  const std::string marker = ReadWholeFile(dir.Sub("worker-00000/CLOSED")).value();
  EXPECT_NE(marker.find("\"capture_steps\": 20, \"capture_steps_saved\": 1, "
                        "\"capture_step_seconds\": 3.25, \"capture_seconds\": 0.0625"),
            std::string::npos)
      << marker;

  // A marker from before capture totals existed: still valid, zero totals.
  std::string old = marker;
  const std::size_t from = old.find("\"capture_steps\"");
  const std::size_t to = old.find("\"stats_wait_seconds\"");
  ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to);
  old.erase(from, to - from);
  TSTAT_ASSERT_OK(WriteFileAtomically(dir.Sub("worker-00000/CLOSED"), old));
  auto old_trial = Trial::Open(dir.path());
  ASSERT_TRUE(old_trial.ok()) << old_trial.status().ToString();
  TSTAT_EXPECT_OK((*old_trial)->Refresh());  // the marker parses
  EXPECT_TRUE((*old_trial)->workers()[0].closed);
  EXPECT_EQ((*old_trial)->workers()[0].counters.capture.steps, 0u);
  EXPECT_EQ((*old_trial)->workers()[0].counters.steps_captured, 1u);
}

TEST_F(RoundTripTest, ErrorCodes) {
  EXPECT_EQ(trial_->record("layer1.weight", 6).status().code(), StatusCode::kStepUnavailable);
  EXPECT_EQ(trial_->record("layer1.weight", 1, Mode::kEval).status().code(),
            StatusCode::kStepUnavailable);
  EXPECT_EQ(trial_->record("nope", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(trial_->record("layer1.weight", 1, Mode::kGlobal, 3).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(trial_->step_records(0, 99).status().code(), StatusCode::kStepUnavailable);
  EXPECT_EQ(trial_->WaitForStep(9, Mode::kGlobal, 1.0).code(), StatusCode::kStepUnavailable);
  EXPECT_TRUE(trial_->WaitForStep(3, Mode::kGlobal, 0.0).ok());
  EXPECT_TRUE(trial_->WaitForStep(0, Mode::kEval, 0.0).ok());
  EXPECT_EQ(trial_->WaitForStep(1, Mode::kEval, 0.0).code(), StatusCode::kStepUnavailable);
  EXPECT_EQ(Trial::Open(dir_.Sub("missing")).status().code(), StatusCode::kNotFound);
  TempDir empty;
  EXPECT_EQ(Trial::Open(empty.path()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tstat::io::testing
