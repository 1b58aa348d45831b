// Segments of format_version 2 (variable-length strings) are refused unless
// TSTAT_READ_LEGACY_SEGMENTS=1, then read exactly as the version 3 segment
// they were made from; version 3 segments store no variable-length data
// (checked with HDF5's own type queries, not tstat's reader).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/h5/h5_lock.h"
#include "io/read/segment_reader.h"
#include "io/write/hdf5_run_writer.h"
#include "tests/io/io_test_util.h"
#include "tests/io/legacy_segment.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

constexpr char kSegment[] = "/worker-00000/seg-000000000000.h5";

// A run with hostile names, collections and a drop with a long reason.
void WriteRun(const std::string& run) {
  Hdf5RunWriterOptions o;
  o.info.run_dir = run;
  o.info.config_json = "{\"save_interval\": 1, \"note\": \"\\u00c4pfel\"}";
  auto writer = Hdf5RunWriter::Open(o);
  TSTAT_ASSERT_OK(writer);
  TSTAT_ASSERT_OK(
      (*writer)->RegisterTensors({MakeTensorInfo(0, "layer/0\n\"w\"", {"weights", "all"}),
                                  MakeTensorInfo(1, "Gewichte/\xC3\x84pfel", {"gradients"}),
                                  MakeTensorInfo(2, std::string(kTensorNameChars, 'x'))}));
  for (std::int64_t g = 0; g < 2; ++g) {
    StepBatch b = MakeBatch(g);
    b.stats.push_back(SyntheticStatsRecord(g, 0));
    b.stats.push_back(SyntheticStatsRecord(g, 1));
    b.drops.push_back(DropRecord{
        2, "raw", "raw snapshot memory cap (256 MiB) reached, step " + std::to_string(g), 1234});
    TSTAT_ASSERT_OK((*writer)->Write(b));
  }
  TSTAT_ASSERT_OK((*writer)->Close({}));
}

void ExpectSameContents(const SegmentContents& a, const SegmentContents& b) {
  EXPECT_EQ(a.header.host, b.header.host);
  EXPECT_EQ(a.header.tstat_version, b.header.tstat_version);
  EXPECT_EQ(a.header.config_json, b.header.config_json);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].collections, b.tensors[i].collections);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
  }
  ASSERT_EQ(a.tables.drops.size(), b.tables.drops.size());
  for (std::size_t i = 0; i < a.tables.drops.size(); ++i) {
    EXPECT_EQ(a.tables.drops[i].drop.kind, b.tables.drops[i].drop.kind);
    EXPECT_EQ(a.tables.drops[i].drop.reason, b.tables.drops[i].drop.reason);
    EXPECT_EQ(a.tables.drops[i].drop.bytes, b.tables.drops[i].drop.bytes);
  }
  EXPECT_EQ(a.tables.stats.size(), b.tables.stats.size());
}

TEST(LegacyFormatTest, Version2IsReadOnlyWhenAllowedAndThenReadsTheSame) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteRun(run);
  const std::string path = run + kSegment;
  auto now = ReadSegment(path);
  TSTAT_ASSERT_OK(now);
  EXPECT_EQ(now->header.format_version, kFormatVersion);
  ASSERT_EQ(now->tensors.size(), 3u);
  EXPECT_EQ(now->tensors[2].name, std::string(kTensorNameChars, 'x'));
  EXPECT_EQ(now->tensors[0].collections, (std::vector<std::string>{"weights", "all"}));
  ASSERT_EQ(now->tables.drops.size(), 2u);
  EXPECT_EQ(now->tables.drops[1].drop.reason, "raw snapshot memory cap (256 MiB) reached, step 1");

  // What a series and a step walk read (the stats table alone; records by
  // step) is the same from the version 2 file.
  const std::string tensor = now->tensors[0].name;
  std::vector<SeriesPoint> series_v3;
  std::vector<TensorStatsRecord> step_v3;
  {
    auto trial = Trial::Open(run);
    TSTAT_ASSERT_OK(trial);
    auto series = (*trial)->series(tensor, StatField::kL2);
    TSTAT_ASSERT_OK(series);
    series_v3 = *series;
    TSTAT_ASSERT_OK((*trial)->step_records_into(0, series_v3.back().step.global_step, &step_v3));
  }
  ASSERT_FALSE(series_v3.empty());
  ASSERT_FALSE(step_v3.empty());

  TSTAT_ASSERT_OK(RewriteAsLegacySegment(path, 2));
  const Status refused = ReadSegment(path).status();
  EXPECT_EQ(refused.code(), StatusCode::kNotSupported) << refused.ToString();
  EXPECT_NE(refused.message().find(path + ": no header table: written before format_version 3"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("TSTAT_READ_LEGACY_SEGMENTS=1"), std::string::npos);
  {
    // The run opens and says why the segment is left out.
    auto trial = Trial::Open(run);
    TSTAT_ASSERT_OK(trial);
    EXPECT_TRUE((*trial)->tensor_names().empty());
  }
  ScopedLegacySegments allow;
  auto legacy = ReadSegment(path);
  TSTAT_ASSERT_OK(legacy);
  EXPECT_EQ(legacy->header.format_version, 2);
  ExpectSameContents(*now, *legacy);
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  auto series = (*trial)->series(tensor, StatField::kL2);
  TSTAT_ASSERT_OK(series);
  ASSERT_EQ(series->size(), series_v3.size());
  for (std::size_t i = 0; i < series->size(); ++i) {
    EXPECT_EQ((*series)[i].step.global_step, series_v3[i].step.global_step);
    EXPECT_EQ((*series)[i].value, series_v3[i].value);
  }
  std::vector<TensorStatsRecord> step_v2;
  TSTAT_ASSERT_OK((*trial)->step_records_into(0, series_v3.back().step.global_step, &step_v2));
  ASSERT_EQ(step_v2.size(), step_v3.size());
  for (std::size_t i = 0; i < step_v2.size(); ++i) {
    EXPECT_EQ(step_v2[i].tensor_id, step_v3[i].tensor_id);
    EXPECT_EQ(step_v2[i].stats.l2, step_v3[i].stats.l2);
    EXPECT_EQ(step_v2[i].exponent_histogram.has_value(), step_v3[i].exponent_histogram.has_value());
  }
}

// Version 4 stores a segment's stats rows grouped by tensor; a run whose
// segments are rewritten as version 3 (rows in capture order, no
// stats_capture_index nor stats_tensors) answers every query the same, and
// both give each step's records in the order they were captured, which
// here differs from step to step.
TEST(LegacyFormatTest, Version3ReadsAsVersion4) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto writer = OpenWriterOrDie(run);
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(writer->RegisterTensors(NumberedTensors(5)));
  const auto captured = [](std::int64_t g) {  // tensor ids in capture order
    std::vector<std::uint32_t> ids;
    for (std::uint32_t k = 0; k < 5; ++k)
      ids.push_back((k * 2 + static_cast<std::uint32_t>(g)) % 5);
    if (g % 4 == 3) ids.pop_back();  // a step without one tensor
    return ids;
  };
  for (std::int64_t g = 0; g < 12; ++g) {
    StepBatch b = MakeBatch(g, g % 3 == 2 ? Mode::kEval : Mode::kTrain, g);
    for (std::uint32_t id : captured(g)) b.stats.push_back(ReferenceRecord(g, id, id % 2 == 0));
    TSTAT_ASSERT_OK(writer->Write(b));
    if (g % 5 == 4) TSTAT_ASSERT_OK(writer->Flush({}));
  }
  TSTAT_ASSERT_OK(writer->Close({}));
  const auto check_order = [&](Trial& t, const char* what) {
    for (std::int64_t g = 0; g < 12; ++g) {
      auto records = t.step_records(0, g);
      TSTAT_ASSERT_OK(records);
      std::vector<std::uint32_t> ids;
      for (const TensorStatsRecord& r : *records) ids.push_back(r.tensor_id);
      EXPECT_EQ(ids, captured(g)) << what << " step " << g;
      for (const TensorStatsRecord& r : *records) {
        ExpectRecordEqual(r, ReferenceRecord(g, r.tensor_id, r.tensor_id % 2 == 0), "record");
      }
    }
  };
  std::string v4;
  {
    auto trial = Trial::Open(run);
    TSTAT_ASSERT_OK(trial);
    v4 = TrialAnswers(**trial);
    check_order(**trial, "version 4");
  }
  for (std::int64_t seg = 0; seg < 3; ++seg) {
    TSTAT_ASSERT_OK(RewriteAsVersion3Segment(run + "/worker-00000/" + SegmentFileName(seg)));
  }
  auto segment = ReadSegment(run + kSegment);
  TSTAT_ASSERT_OK(segment);
  EXPECT_EQ(segment->header.format_version, 3);
  EXPECT_TRUE(segment->tables.stats_capture_index.empty());
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  // All but the worker line (its format version and the files' bytes).
  const auto after_first_line = [](const std::string& text) {
    return text.substr(text.find('\n'));
  };
  EXPECT_EQ(after_first_line(TrialAnswers(**trial)), after_first_line(v4));
  EXPECT_EQ((*trial)->workers()[0].format_version, 3);
  check_order(**trial, "version 3");
}

// What h5py or h5dump users see is fixed-length strings: no dataset or
// attribute of a version 3 segment has a variable-length part.
TEST(LegacyFormatTest, Version3StoresNoVariableLengthData) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteRun(run);
  const std::string path = run + kSegment;
  H5Lock lock;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  struct Seen {
    std::vector<std::string> variable;
    int objects = 0;
  } seen;
  auto check_type = [](hid_t type, const std::string& what, Seen* s) {
    if (H5Tdetect_class(type, H5T_VLEN) > 0 ||
        (H5Tdetect_class(type, H5T_STRING) > 0 && H5Tget_class(type) == H5T_STRING &&
         H5Tis_variable_str(type) > 0)) {
      s->variable.push_back(what);
    }
    if (H5Tget_class(type) == H5T_COMPOUND) {
      for (int i = 0; i < H5Tget_nmembers(type); ++i) {
        hid_t m = H5Tget_member_type(type, static_cast<unsigned>(i));
        if (H5Tget_class(m) == H5T_STRING && H5Tis_variable_str(m) > 0) s->variable.push_back(what);
        H5Tclose(m);
      }
    }
  };
  struct Ctx {
    Seen* seen;
    decltype(check_type)* check;
  } ctx{&seen, &check_type};
  H5Ovisit(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t root, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        auto* c = static_cast<Ctx*>(data);
        hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
        if (info->type == H5O_TYPE_DATASET) {
          hid_t t = H5Dget_type(obj);
          (*c->check)(t, std::string("dataset ") + name, c->seen);
          H5Tclose(t);
          ++c->seen->objects;
        }
        for (hsize_t i = 0; i < info->num_attrs; ++i) {
          hid_t a =
              H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT);
          hid_t t = H5Aget_type(a);
          (*c->check)(t, std::string("attribute of ") + name, c->seen);
          H5Tclose(t);
          H5Aclose(a);
          ++c->seen->objects;
        }
        H5Oclose(obj);
        return 0;
      },
      &ctx);
  H5Fclose(file);
  EXPECT_GT(seen.objects, 10);
  EXPECT_TRUE(seen.variable.empty()) << seen.variable.front();
}

}  // namespace
}  // namespace tstat::io::testing
