// See io_test_util.h.
#include "tests/io/io_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/format/segment_catalog.h"
#include "io/h5/posix_file.h"
#include "io/h5/segment_seal.h"
#include "tests/support/data.h"
#include "tests/support/reference.h"
#include "tstat/trial.h"

namespace tstat::io::testing {

std::vector<std::string> HostileFileKinds() {
  return {"fifo", "dev_zero", "directory", "symlink_loop", "huge", "empty"};
}

bool MakeHostileFile(const std::string& path, const std::string& kind) {
  if (kind == "fifo") return ::mkfifo(path.c_str(), 0644) == 0;
  if (kind == "dev_zero") return ::symlink("/dev/zero", path.c_str()) == 0;
  if (kind == "directory") return ::mkdir(path.c_str(), 0755) == 0;
  if (kind == "symlink_loop") return ::symlink(path.c_str(), path.c_str()) == 0;
  if (kind == "huge" || kind == "empty") {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = kind == "empty" || ::ftruncate(fd, std::int64_t{2} << 30) == 0;
    ::close(fd);
    return ok;
  }
  return false;
}

Child Spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Child child;
  child.pid = ::fork();
  if (child.pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  child.out = fds[0];
  return child;
}

void Drain(int fd, std::string* text, bool until_eof) {
  if (!until_eof)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  else
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      text->append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/tstat-io-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed: " << pattern;
  path_ = buffer.data();
}

TempDir::~TempDir() {
  const char* keep = std::getenv("TSTAT_TEST_KEEP_TMP");
  if (keep && *keep == '1') return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TensorInfo MakeTensorInfo(std::uint32_t id, std::string name, std::vector<std::string> collections,
                          DType dtype, std::vector<std::int64_t> shape) {
  TensorInfo t;
  t.id = id;
  t.name = std::move(name);
  t.kind = TensorKind::kTensor;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.space = MemorySpace::kHost;
  t.collections = std::move(collections);
  return t;
}

TensorInfo MakeScalarInfo(std::uint32_t id, std::string name) {
  TensorInfo t = MakeTensorInfo(id, std::move(name), {"losses"}, DType::kFloat64, {});
  t.kind = TensorKind::kScalar;
  return t;
}

std::vector<TensorInfo> NumberedTensors(std::uint32_t n) {
  std::vector<TensorInfo> tensors;
  for (std::uint32_t t = 0; t < n; ++t)
    tensors.push_back(MakeTensorInfo(t, "w" + std::to_string(t)));
  return tensors;
}

StepBatch MakeBatch(std::int64_t global_step, Mode mode, std::int64_t mode_step) {
  StepBatch b;
  b.key = StepKey{global_step, mode, mode_step < 0 ? global_step : mode_step};
  b.wall_time = 1.7e9 + static_cast<double>(global_step);
  b.step_seconds = 0.25 + 0.001 * static_cast<double>(global_step);
  b.capture_seconds = 0.001 * static_cast<double>(global_step % 7);
  return b;
}

TensorStatsRecord ReferenceRecord(std::int64_t step, std::uint32_t tensor_id, bool extras) {
  const auto seed = static_cast<std::uint64_t>(step) * 7919u + tensor_id;
  tstat::testing::HostTensor t =
      tstat::testing::GenerateDefaultTensor(DType::kFloat32, 24, seed, {3, 8});
  StatsOptions options;
  options.exponent_histogram = true;
  if (extras) {
    options.linear_histogram.bins = 8;
    options.per_channel_axis = 0;
    options.sample_count = 5;
    options.sample_seed = seed;
  }
  ReductionResult r = tstat::testing::ReferenceReduce(t.View(), options);
  TensorStatsRecord rec;
  rec.tensor_id = tensor_id;
  rec.stats = r.stats;
  rec.has_stats = true;
  rec.exponent_histogram = r.exponent_histogram;
  rec.linear_histogram = r.linear_histogram;
  rec.per_channel = r.per_channel;
  rec.sample = r.sample;
  if (extras) {
    // Hand-built values for the parts the reference does not compute here.
    rec.delta = DeltaStats{24,   static_cast<std::uint64_t>(step % 24),    1, 1.5 + step,
                           0.75, 0.25 * static_cast<double>(tensor_id + 1)};
    rec.count_values = {0, -1, 7};
    rec.value_counts = {static_cast<std::uint64_t>(step), 0, 3};
  }
  return rec;
}

TensorStatsRecord LabelRecord(std::int64_t step, std::uint32_t tensor_id) {
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 40; ++i) labels.push_back((i * 7 + step) % 6 - 1);  // -1 is out of range
  tstat::testing::HostTensor t = tstat::testing::MakeIntegerTensor(DType::kInt32, labels);
  StatsOptions options;
  options.label_classes = 4;
  ReductionResult r = tstat::testing::ReferenceReduce(t.View(), options);
  TensorStatsRecord rec;
  rec.tensor_id = tensor_id;
  rec.has_stats = false;
  rec.label_counts = r.label_counts;
  ConfusionMatrix m;
  m.classes = 4;
  for (int i = 0; i < 16; ++i) m.counts.push_back(static_cast<std::uint64_t>(i * 3 + step));
  m.invalid = 2;
  rec.confusion = m;
  return rec;
}

TensorStatsRecord SyntheticStatsRecord(std::int64_t step, std::uint32_t tensor_id) {
  TensorStatsRecord rec;
  rec.tensor_id = tensor_id;
  TensorStats& s = rec.stats;
  const double x = static_cast<double>(step) + 0.001 * tensor_id;
  s.count = 4096;
  s.finite_count = 4096 - static_cast<std::uint64_t>(step % 3);
  s.nan_count = static_cast<std::uint64_t>(step % 3);
  s.zero_count = tensor_id % 5;
  s.neg_count = 2000 + tensor_id % 97;
  s.band_lo_count = tensor_id % 3;
  s.small_count = tensor_id % 5;
  s.min = -1.0 - std::sin(x) * 0.5;
  s.max = 1.0 + std::cos(x) * 0.5;
  s.mean = std::sin(x * 1.3) * 1e-2;
  s.m2 = static_cast<double>(s.finite_count) * (0.9 + 0.1 * std::cos(x * 0.7));
  s.l1 = static_cast<double>(s.finite_count) * (0.79 + 0.01 * std::sin(x));
  s.amax = std::max(std::fabs(s.min), std::fabs(s.max));
  const double n = static_cast<double>(s.finite_count);
  s.sum = s.mean * n;
  s.l2 = std::sqrt(s.m2 + n * s.mean * s.mean);
  return rec;
}

std::unique_ptr<Hdf5RunWriter> OpenWriterOrDie(const std::string& run_dir, int rank, int world_size,
                                               const std::string& config, int compression_level) {
  Hdf5RunWriterOptions options;
  options.info.run_dir = run_dir;
  options.info.rank = rank;
  options.info.world_size = world_size;
  options.info.host = "host-" + std::to_string(rank);
  options.info.config_json = config;
  options.compression_level = compression_level;
  auto writer = Hdf5RunWriter::Open(options);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  return writer.ok() ? std::move(writer).value() : nullptr;
}

namespace {

bool SameDouble(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void ExpectNear(double got, double want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_LE(std::fabs(got - want), 1e-12 * std::max(1.0, std::fabs(want))) << what;
}

}  // namespace

void ExpectStatsEqual(const TensorStats& got, const TensorStats& want, const std::string& where) {
#define TSTAT_EXPECT_COUNT(f) EXPECT_EQ(got.f, want.f) << where << " " #f
#define TSTAT_EXPECT_EXACT(f) \
  EXPECT_TRUE(SameDouble(got.f, want.f)) << where << " " #f ": " << got.f << " vs " << want.f
  TSTAT_EXPECT_COUNT(count);
  TSTAT_EXPECT_COUNT(finite_count);
  TSTAT_EXPECT_COUNT(nan_count);
  TSTAT_EXPECT_COUNT(pos_inf_count);
  TSTAT_EXPECT_COUNT(neg_inf_count);
  TSTAT_EXPECT_COUNT(zero_count);
  TSTAT_EXPECT_COUNT(neg_count);
  TSTAT_EXPECT_COUNT(subnormal_count);
  TSTAT_EXPECT_COUNT(band_lo_count);
  TSTAT_EXPECT_COUNT(band_hi_count);
  TSTAT_EXPECT_COUNT(small_count);
  TSTAT_EXPECT_EXACT(min);
  TSTAT_EXPECT_EXACT(max);
  TSTAT_EXPECT_EXACT(mean);
  TSTAT_EXPECT_EXACT(m2);
  TSTAT_EXPECT_EXACT(l1);
  TSTAT_EXPECT_EXACT(amax);
#undef TSTAT_EXPECT_COUNT
#undef TSTAT_EXPECT_EXACT
  ExpectNear(got.sum, want.sum, where + " sum (derived)");
  ExpectNear(got.l2, want.l2, where + " l2 (derived)");
}

void ExpectRecordEqual(const TensorStatsRecord& got, const TensorStatsRecord& want,
                       const std::string& where) {
  EXPECT_EQ(got.tensor_id, want.tensor_id) << where;
  EXPECT_EQ(got.has_stats, want.has_stats) << where;
  if (want.has_stats) ExpectStatsEqual(got.stats, want.stats, where);
  ASSERT_EQ(got.exponent_histogram.has_value(), want.exponent_histogram.has_value()) << where;
  if (want.exponent_histogram) {
    // Every bin, whatever range each side stores (== of ExponentBins).
    EXPECT_TRUE(*got.exponent_histogram == *want.exponent_histogram)
        << where << ": exponent histogram from bin " << got.exponent_histogram->first_bin
        << ", want from bin " << want.exponent_histogram->first_bin;
    EXPECT_EQ(got.exponent_histogram->first_bin, want.exponent_histogram->first_bin) << where;
    EXPECT_EQ(got.exponent_histogram->counts, want.exponent_histogram->counts) << where;
  }
  ASSERT_EQ(got.linear_histogram.has_value(), want.linear_histogram.has_value()) << where;
  if (want.linear_histogram) {
    EXPECT_TRUE(SameDouble(got.linear_histogram->lo, want.linear_histogram->lo)) << where;
    EXPECT_TRUE(SameDouble(got.linear_histogram->hi, want.linear_histogram->hi)) << where;
    EXPECT_EQ(got.linear_histogram->counts, want.linear_histogram->counts) << where;
    EXPECT_EQ(got.linear_histogram->below, want.linear_histogram->below) << where;
    EXPECT_EQ(got.linear_histogram->above, want.linear_histogram->above) << where;
  }
  ASSERT_EQ(got.per_channel.has_value(), want.per_channel.has_value()) << where;
  if (want.per_channel) {
    EXPECT_EQ(got.per_channel->axis, want.per_channel->axis) << where;
    ASSERT_EQ(got.per_channel->channels.size(), want.per_channel->channels.size()) << where;
    for (std::size_t c = 0; c < want.per_channel->channels.size(); ++c) {
      ExpectStatsEqual(got.per_channel->channels[c], want.per_channel->channels[c],
                       where + " channel " + std::to_string(c));
    }
  }
  ASSERT_EQ(got.label_counts.has_value(), want.label_counts.has_value()) << where;
  if (want.label_counts) {
    EXPECT_EQ(got.label_counts->counts, want.label_counts->counts) << where;
    EXPECT_EQ(got.label_counts->out_of_range, want.label_counts->out_of_range) << where;
  }
  ASSERT_EQ(got.delta.has_value(), want.delta.has_value()) << where;
  if (want.delta) {
    EXPECT_EQ(got.delta->count, want.delta->count) << where;
    EXPECT_EQ(got.delta->changed_count, want.delta->changed_count) << where;
    EXPECT_EQ(got.delta->nonfinite_pairs, want.delta->nonfinite_pairs) << where;
    EXPECT_TRUE(SameDouble(got.delta->l1, want.delta->l1)) << where;
    EXPECT_TRUE(SameDouble(got.delta->l2, want.delta->l2)) << where;
    EXPECT_TRUE(SameDouble(got.delta->amax, want.delta->amax)) << where;
  }
  ASSERT_EQ(got.confusion.has_value(), want.confusion.has_value()) << where;
  if (want.confusion) {
    EXPECT_EQ(got.confusion->classes, want.confusion->classes) << where;
    EXPECT_EQ(got.confusion->counts, want.confusion->counts) << where;
    EXPECT_EQ(got.confusion->invalid, want.confusion->invalid) << where;
  }
  EXPECT_EQ(got.count_values, want.count_values) << where;
  EXPECT_EQ(got.value_counts, want.value_counts) << where;
  ASSERT_EQ(got.sample.has_value(), want.sample.has_value()) << where;
  if (want.sample) {
    EXPECT_EQ(got.sample->positions, want.sample->positions) << where;
    ASSERT_EQ(got.sample->values.size(), want.sample->values.size()) << where;
    for (std::size_t i = 0; i < want.sample->values.size(); ++i) {
      EXPECT_TRUE(SameDouble(got.sample->values[i], want.sample->values[i])) << where;
    }
  }
}

RawSnapshot MakeRawSnapshot(std::uint32_t tensor_id, DType dtype, std::vector<std::int64_t> shape,
                            std::vector<std::uint8_t> bytes) {
  RawSnapshot raw;
  raw.tensor_id = tensor_id;
  raw.dtype = dtype;
  raw.shape = std::move(shape);
  raw.bytes = SharedBytes(std::move(bytes));
  return raw;
}

Status ResealSegmentFile(const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  std::vector<std::uint8_t> image(bytes.begin(), bytes.end());
  SealSegmentImage(&image);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(image.data()),
            static_cast<std::streamsize>(image.size()));
  if (!out) return Status::IoError(path + ": rewrite failed");
  return RemoveFile(JoinPath(DirName(path), kCatalogFileName));
}

namespace {

std::string StatsText(const TensorStats& s) {
  std::ostringstream o;
  o.precision(17);
  o << s.count << "," << s.finite_count << "," << s.min << "," << s.max << "," << s.mean << ","
    << s.m2 << "," << s.l1 << "," << s.amax << "," << s.zero_count << "," << s.nan_count;
  return o.str();
}

std::string KeyText(const StepKey& k) {
  return std::to_string(k.global_step) + "/" + std::to_string(static_cast<int>(k.mode)) + "/" +
         std::to_string(k.mode_step);
}

}  // namespace

std::string WriteTensorRun(const TempDir& dir, std::uint32_t tensors, std::int64_t steps,
                           std::int64_t steps_per_segment,
                           const std::vector<std::uint32_t>& capture_order,
                           const std::function<bool(std::int64_t, std::uint32_t)>& saved) {
  const std::string run = dir.Sub("run");
  auto writer = OpenWriterOrDie(run);
  std::vector<TensorInfo> infos;
  for (std::uint32_t t = 0; t < tensors; ++t) {
    infos.push_back(MakeTensorInfo(t, "t" + std::to_string(t)));
  }
  EXPECT_TRUE(writer->RegisterTensors(infos).ok());
  for (std::int64_t g = 0; g < steps; ++g) {
    StepBatch b = MakeBatch(g, g % 3 == 2 ? Mode::kEval : Mode::kTrain);
    for (std::uint32_t t : capture_order) {
      if (saved(g, t)) b.stats.push_back(ReferenceRecord(g, t, t == 0));
    }
    EXPECT_TRUE(writer->Write(b).ok());
    if (g % steps_per_segment == steps_per_segment - 1) {
      EXPECT_TRUE(writer->Flush({}).ok());
    }
  }
  EXPECT_TRUE(writer->Close({}).ok());
  return run;
}

std::string TrialAnswers(Trial& t) {
  std::ostringstream o;
  o.precision(17);
  for (const WorkerSummary& w : t.workers()) {
    const PipelineCounters& c = w.counters;
    o << "worker " << w.rank << " " << w.world_size << " " << w.format_version << " " << w.host
      << " " << w.closed << " " << w.segments << " " << w.bytes << " " << c.steps_captured << " "
      << c.records_written << " " << c.stats_wait_seconds << " " << c.segments_written << " "
      << c.capture.steps << " " << c.capture.step_seconds << "\n";
  }
  o << "config " << t.config_json(0) << "\n";
  for (const std::string& c : t.collections()) o << "collection " << c << "\n";
  for (Mode m : {Mode::kGlobal, Mode::kTrain, Mode::kEval}) {
    for (const StepKey& k : t.steps(m)) o << "step " << KeyText(k) << "\n";
  }
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict}) {
    TensorQuery query;
    query.mode = m;
    o << "tensors of mode " << static_cast<int>(m) << ":";
    for (const std::string& name : t.tensor_names(query)) o << " " << name;
    o << "\n";
  }
  for (const std::string& name : t.tensor_names()) {
    auto info = t.tensor_info(name, 0);
    o << "tensor " << name << " " << (info.ok() ? info->id : 99u) << " "
      << (info.ok() ? info->shape.size() : 99u);
    if (info.ok()) {
      for (std::int64_t d : info->shape) o << " " << d;
      for (const std::string& c : info->collections) o << " " << c;
    }
    o << "\n";
    auto series = t.series(name, StatField::kL2);
    o << "series " << series.status().ToString();
    if (series.ok()) {
      for (const SeriesPoint& p : *series) o << " " << KeyText(p.step) << "=" << p.value;
    }
    o << "\n";
    for (const StepKey& k : t.raw_steps(name, 0)) {
      auto raw = t.raw(name, k.global_step);
      o << "raw " << KeyText(k) << " " << raw.status().ToString();
      if (raw.ok()) o << " " << raw->bytes.size() << " " << int(raw->bytes.back());
      o << "\n";
    }
  }
  for (const std::string& name : t.scalar_names()) {
    auto series = t.scalar_series(name);
    o << "scalar " << name;
    if (series.ok()) {
      for (const SeriesPoint& p : *series) o << " " << KeyText(p.step) << "=" << p.value;
    }
    o << "\n";
  }
  for (const StepKey& k : t.steps(Mode::kGlobal)) {
    auto records = t.step_records(0, k.global_step);
    o << "records " << KeyText(k) << " " << records.status().ToString();
    if (records.ok()) {
      for (const TensorStatsRecord& r : *records) {
        o << " " << r.tensor_id << ":" << StatsText(r.stats) << ":";
        if (r.exponent_histogram) {
          o << r.exponent_histogram->first_bin;
          for (std::uint64_t c : r.exponent_histogram->counts) o << "," << c;
        } else {
          o << "-";
        }
        o << ":" << r.per_channel.has_value() << r.linear_histogram.has_value()
          << r.label_counts.has_value() << r.delta.has_value();
      }
    }
    o << "\n";
  }
  for (const DropRecord& d : t.drops(0)) {
    o << "drop " << d.tensor_id << " " << d.kind << " " << d.reason << " " << d.bytes << "\n";
  }
  o << "complete " << t.loaded_all_steps() << "\n";
  return o.str();
}

}  // namespace tstat::io::testing
