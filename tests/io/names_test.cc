// Tensor names are data: hostile names round-trip verbatim, never collide,
// and never become HDF5 object names. Also: tensors registered after the
// first step (and after the first segment), and registration errors.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <set>

#include "io/format/segment_schema.h"
#include "io/h5/h5_lock.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

std::vector<std::string> HostileNames() {
  std::string long_name;
  while (long_name.size() < kTensorNameChars) long_name += "deep/../nested.level_";
  long_name.resize(kTensorNameChars);  // the longest a segment stores
  return {"a/b",
          "../x",
          "..",
          ".",
          "/",
          "/abs/path",
          "\"quoted\"",
          "it's",
          "back\\slash",
          "line\nbreak",
          "tab\there",
          " leading and trailing ",
          "Gewichte/\xC3\x84pfel",                 // Äpfel
          "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",  // 日本語
          "emoji \xF0\x9F\x99\x82",                // 🙂
          "",
          long_name,
          "Layer",
          "layer",
          "LAYER",
          "stats",
          "raw/000000",
          "raw",
          "CLOSED",
          "seg-000000000000.h5",
          "worker-00001",
          "%s%n%x",
          "{\"json\": [1, 2]}"};
}

// The names directly under "/" of an HDF5 file.
std::set<std::string> RootNames(const std::string& path) {
  H5Lock lock;
  std::set<std::string> names;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0) << path;
  if (file < 0) return names;
  H5Literate(
      file, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
        static_cast<std::set<std::string>*>(out)->insert(name);
        return 0;
      },
      &names);
  H5Fclose(file);
  return names;
}

TEST(NamesTest, HostileNamesRoundTripAndNeverCollide) {
  TempDir dir;
  const std::vector<std::string> names = HostileNames();
  {
    auto writer = OpenWriterOrDie(dir.path());
    std::vector<TensorInfo> tensors;
    for (std::size_t i = 0; i < names.size(); ++i) {
      tensors.push_back(MakeTensorInfo(static_cast<std::uint32_t>(i), names[i], {names[i]}));
    }
    TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
    for (std::int64_t g = 0; g < 3; ++g) {
      StepBatch b = MakeBatch(g);
      for (std::size_t i = 0; i < names.size(); ++i) {
        b.stats.push_back(SyntheticStatsRecord(g, static_cast<std::uint32_t>(i)));
      }
      TSTAT_ASSERT_OK(writer->Write(b));
      TSTAT_ASSERT_OK(writer->Flush({}));
    }
    TSTAT_ASSERT_OK(writer->Close({}));
  }
  // No file but the segments, the catalog and CLOSED, whatever the names.
  auto files = ListDir(dir.path());
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files.value(), std::vector<std::string>{"worker-00000"});
  auto worker_files = ListDir(dir.Sub("worker-00000"));
  ASSERT_TRUE(worker_files.ok());
  EXPECT_EQ(worker_files->size(), 5u);
  // No HDF5 object named after a tensor: the root holds the tables only.
  const std::set<std::string> tables = {"collections",   "config", "counters",
                                        "header",        "stats",  "stats_capture_index",
                                        "stats_tensors", "steps",  "tensor_collections",
                                        "tensor_shapes", "tensors"};
  const std::set<std::string> root = RootNames(dir.Sub("worker-00000/seg-000000000002.h5"));
  for (const std::string& n : root) EXPECT_TRUE(tables.count(n)) << "unexpected object " << n;

  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  const std::vector<std::string> listed = (*trial)->tensor_names();
  const std::set<std::string> sorted(names.begin(), names.end());
  EXPECT_EQ(listed, std::vector<std::string>(sorted.begin(), sorted.end()));
  EXPECT_EQ(listed.size(), names.size());  // all distinct, none lost
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto info = (*trial)->tensor_info(names[i]);
    TSTAT_ASSERT_OK(info);
    EXPECT_EQ(info->id, i) << "name #" << i;
    EXPECT_EQ(info->name, names[i]);
    EXPECT_EQ(info->collections, std::vector<std::string>{names[i]});
    for (std::int64_t g = 0; g < 3; ++g) {
      auto rec = (*trial)->record(names[i], g);
      TSTAT_ASSERT_OK(rec);
      ExpectRecordEqual(rec.value(), SyntheticStatsRecord(g, static_cast<std::uint32_t>(i)),
                        "name #" + std::to_string(i));
    }
  }
  // Collections named like the tensors: filtering by one finds exactly one.
  EXPECT_EQ((*trial)->tensor_names({"", "layer", Mode::kGlobal}),
            std::vector<std::string>{"layer"});
  // Regex matching is on the verbatim name.
  EXPECT_EQ((*trial)->tensor_names({"^\\.\\.$", "", Mode::kGlobal}),
            std::vector<std::string>{".."});
  EXPECT_EQ((*trial)->tensor_names({"(?i)^layer$", "", Mode::kGlobal}).size(), 3u);
  // An invalid pattern matches nothing.
  EXPECT_TRUE((*trial)->tensor_names({"(", "", Mode::kGlobal}).empty());
}

TEST(NamesTest, TensorsRegisteredLater) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "early")}));
  for (std::int64_t g = 0; g < 6; ++g) {
    if (g == 1) TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(1, "after_first_step")}));
    if (g == 4) TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(2, "in_third_segment")}));
    StepBatch b = MakeBatch(g);
    b.stats.push_back(SyntheticStatsRecord(g, 0));
    if (g >= 1) b.stats.push_back(SyntheticStatsRecord(g, 1));
    if (g >= 4) b.stats.push_back(SyntheticStatsRecord(g, 2));
    TSTAT_ASSERT_OK(writer->Write(b));
    if (g % 2 == 1) TSTAT_ASSERT_OK(writer->Flush({}));  // segments: {0,1} {2,3} {4,5}
  }
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->tensor_names(),
            (std::vector<std::string>{"after_first_step", "early", "in_third_segment"}));
  auto late = (*trial)->series("in_third_segment", StatField::kMean);
  TSTAT_ASSERT_OK(late);
  ASSERT_EQ(late->size(), 2u);
  EXPECT_EQ((*late)[0].step.global_step, 4);
  EXPECT_EQ((*late)[0].value, SyntheticStatsRecord(4, 2).stats.mean);
  EXPECT_EQ((*trial)->series("after_first_step", StatField::kMax)->size(), 5u);
  // Before its registration the run has passed those steps: not saved.
  EXPECT_EQ((*trial)->record("in_third_segment", 1).status().code(), StatusCode::kStepUnavailable);
  EXPECT_EQ((*trial)->step_records(0, 5)->size(), 3u);
  EXPECT_EQ((*trial)->step_records(0, 0)->size(), 1u);
}

TEST(NamesTest, RegistrationErrors) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  // Re-declaring the same tensor is fine; a different name for an id is not.
  TSTAT_EXPECT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  EXPECT_EQ(writer->RegisterTensors({MakeTensorInfo(0, "other")}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->RegisterTensors({MakeTensorInfo(1, std::string("nul\0byte", 8))}).code(),
            StatusCode::kInvalidArgument);
  // Names and collections are stored as fixed-length strings of bounded width.
  const Status long_name =
      writer->RegisterTensors({MakeTensorInfo(1, std::string(kTensorNameChars + 1, 'n'))});
  EXPECT_EQ(long_name.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(long_name.message().find("1025 bytes (at most 1024)"), std::string::npos)
      << long_name.message();
  EXPECT_EQ(
      writer
          ->RegisterTensors({MakeTensorInfo(1, "c", {std::string(kCollectionNameChars + 1, 'c')})})
          .code(),
      StatusCode::kInvalidArgument);
  StepBatch b = MakeBatch(0);
  b.stats.push_back(SyntheticStatsRecord(0, 7));
  const Status undeclared = writer->Write(b);
  EXPECT_EQ(undeclared.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(undeclared.message().find("id 7"), std::string::npos) << undeclared.message();
  EXPECT_EQ(writer->TEST_open_segment_path(), "");  // nothing was started
  EXPECT_EQ(writer->records_lost(), 0u);
}

}  // namespace
}  // namespace tstat::io::testing
