// io_bench: throughput of the HDF5 run storage (not a test; run by hand).
//
//   io_bench [DIR]     (default $TMPDIR or /tmp)
//
// 1. Stats records: 1,000 tensors x 500 steps through Hdf5RunWriter, a Flush
//    (with fsync) every 10 steps, deflate level 1 and 4; records/s over
//    Write+Flush (wall and process CPU time), and bytes on disk.
// 2. Raw snapshots: 64 x 4 MiB of f32 normal values, a Flush every 8, at
//    compression levels 0, 1 and 4; MB/s of tensor bytes, against a plain
//    sequential write()+fsync of the same bytes.
// 3. Reading: Trial::Open of the run of (1), records/s, and series() of one
//    tensor over every step.
// 4. Buffering: 10,000 rows written as one H5Dwrite vs appends per step or row.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/format/segment_schema.h"
#include "io/h5/h5_lock.h"
#include "io/write/hdf5_run_writer.h"
#include "tstat/trial.h"

namespace {

using namespace tstat;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of this process (the machine may be shared: wall time is noisy).
double CpuSeconds() {
  timespec ts;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "io_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// `level` for the tables, `raw_level` for the raw snapshots.
std::unique_ptr<io::Hdf5RunWriter> Writer(const std::string& run, int level, int raw_level = 0) {
  io::Hdf5RunWriterOptions o;
  o.info.run_dir = run;
  o.compression_level = level;
  o.raw_compression_level = raw_level;
  auto w = io::Hdf5RunWriter::Open(o);
  Check(w.status());
  return std::move(w).value();
}

TensorStatsRecord Record(std::uint32_t id, std::mt19937_64& rng, bool exp_hist) {
  std::normal_distribution<double> n(0, 1);
  TensorStatsRecord r;
  r.tensor_id = id;
  TensorStats& s = r.stats;
  s.count = s.finite_count = 1 << 20;
  s.neg_count = s.count / 2 + static_cast<std::uint64_t>(n(rng) * 100);
  s.min = -4 - std::fabs(n(rng));
  s.max = 4 + std::fabs(n(rng));
  s.mean = n(rng) * 1e-3;
  s.m2 = static_cast<double>(s.count) * (1 + 0.01 * n(rng));
  s.l1 = static_cast<double>(s.count) * (0.8 + 0.01 * n(rng));
  s.amax = std::max(-s.min, s.max);
  if (exp_hist) {
    ExponentHistogram h;
    for (int b = 120; b < 153; ++b) h.counts[b] = static_cast<std::uint64_t>(1000 + 100 * n(rng));
    r.exponent_histogram = h;
  }
  return r;
}

void StatsBench(const std::string& run, bool exp_hist, int level) {
  constexpr int kTensors = 1000, kSteps = 500, kEvery = 10;
  auto w = Writer(run, level);
  std::vector<TensorInfo> tensors;
  for (int t = 0; t < kTensors; ++t) {
    TensorInfo i;
    i.id = static_cast<std::uint32_t>(t);
    i.name = "model.layers." + std::to_string(t / 10) + ".w" + std::to_string(t % 10);
    tensors.push_back(i);
  }
  Check(w->RegisterTensors(tensors));
  std::mt19937_64 rng(1);
  std::vector<StepBatch> batches(kEvery);
  double write_s = 0, flush_s = 0, cpu_s = 0;
  for (int g = 0; g < kSteps; ++g) {
    StepBatch& b = batches[g % kEvery];
    b = StepBatch();
    b.key = StepKey{g, Mode::kTrain, g};
    for (int t = 0; t < kTensors; ++t) b.stats.push_back(Record(t, rng, exp_hist));
    const double c0 = CpuSeconds();
    const auto t0 = Clock::now();
    Check(w->Write(b));
    const auto t1 = Clock::now();
    write_s += Seconds(t0, t1);
    if ((g + 1) % kEvery == 0) {
      Check(w->Flush({}));
      flush_s += Seconds(t1, Clock::now());
    }
    cpu_s += CpuSeconds() - c0;
  }
  Check(w->Close({}));
  const double records = double(kTensors) * kSteps;
  std::printf(
      "stats%s level %d: %.0f records, wall %.2f s (Write %.2f, Flush %.2f), cpu %.2f s:"
      " %.2f M records/s wall, %.2f M/s cpu; %.1f bytes/record on disk\n",
      exp_hist ? "+exp_hist" : "", level, records, write_s + flush_s, write_s, flush_s, cpu_s,
      records / (write_s + flush_s) / 1e6, records / cpu_s / 1e6,
      double(w->bytes_written()) / records);

  const double c0 = CpuSeconds();
  const auto t0 = Clock::now();
  auto trial = Trial::Open(run);
  Check(trial.status());
  const auto t1 = Clock::now();
  const double c1 = CpuSeconds();
  auto series = (*trial)->series("model.layers.50.w0", StatField::kL2);
  const auto t2 = Clock::now();
  Check(series.status());
  std::printf(
      "  read: Trial::Open wall %.2f s, cpu %.2f s (%.2f M records/s cpu); series() of"
      " %zu points %.1f us\n",
      Seconds(t0, t1), c1 - c0, records / (c1 - c0) / 1e6, series->size(), Seconds(t1, t2) * 1e6);
}

SharedBytes NormalFloats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<std::uint8_t> bytes(n * 4);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = d(rng);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  return SharedBytes(std::move(bytes));
}

void RawBench(const std::string& dir) {
  constexpr int kSnapshots = 64, kEvery = 8;
  constexpr std::size_t kElements = 1 << 20;  // 4 MiB of f32
  std::vector<SharedBytes> data;
  for (int i = 0; i < 4; ++i) data.push_back(NormalFloats(kElements, i));
  const double mb = double(kSnapshots) * kElements * 4 / 1e6;

  // Plain sequential write of the same bytes, one file per "segment".
  {
    const auto t0 = Clock::now();
    const double c0 = CpuSeconds();
    for (int s = 0; s < kSnapshots / kEvery; ++s) {
      const std::string path = dir + "/plain-" + std::to_string(s);
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      for (int i = 0; i < kEvery; ++i) {
        const SharedBytes& b = data[(s * kEvery + i) % 4];
        if (::write(fd, b.data(), b.size()) != static_cast<ssize_t>(b.size())) std::exit(1);
      }
      ::fsync(fd);
      ::close(fd);
    }
    const double s = Seconds(t0, Clock::now());
    const double c = CpuSeconds() - c0;
    std::printf("raw: plain write()+fsync of %.0f MB: wall %.2f s (%.0f MB/s), cpu %.2f s\n", mb, s,
                mb / s, c);
  }
  for (int level : {0, 1, 4}) {
    const std::string run = dir + "/raw-" + std::to_string(level);
    auto w = Writer(run, 1, level);
    TensorInfo info;
    info.name = "activation";
    info.shape = {1024, 1024};
    Check(w->RegisterTensors({info}));
    const auto t0 = Clock::now();
    const double c0 = CpuSeconds();
    for (int g = 0; g < kSnapshots; ++g) {
      StepBatch b;
      b.key = StepKey{g, Mode::kTrain, g};
      b.raws.push_back(RawSnapshot{0, DType::kFloat32, {1024, 1024}, data[g % 4]});
      Check(w->Write(b));
      if ((g + 1) % kEvery == 0) Check(w->Flush({}));
    }
    Check(w->Close({}));
    const double s = Seconds(t0, Clock::now());
    const double c = CpuSeconds() - c0;
    std::printf(
        "raw: Hdf5RunWriter level %d: wall %.2f s (%.0f MB/s), cpu %.2f s (%.0f MB/s),"
        " %.0f MB on disk\n",
        level, s, mb / s, c, mb / c, double(w->bytes_written()) / 1e6);
  }
}

// Why tables are buffered and written once per segment: the same 10,000
// stats rows (10 steps x 1,000 tensors) written into an in-memory HDF5 file
// with shuffle+deflate 4 as one H5Dwrite, as one appending write per step
// (extendible dataset), and one appending write per row.
void AppendBench() {
  constexpr int kRows = 10000, kSteps = 10;
  std::vector<io::StatsRow> rows(kRows);
  std::mt19937_64 rng(3);
  for (int i = 0; i < kRows; ++i) {
    rows[i] = io::StatsRow{};
    rows[i].global_step = i / 1000;
    rows[i].tensor_id = static_cast<std::uint32_t>(i % 1000);
    rows[i].s = io::ToStored(Record(rows[i].tensor_id, rng, false).stats);
  }
  auto type = io::StatsRowType();
  Check(type.status());
  const hid_t mem = type->get();
  for (int per_write : {kRows, kRows / kSteps, 1}) {
    io::H5Lock lock;
    const double c0 = CpuSeconds();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 4 << 20, 0);
    hid_t file = H5Fcreate("append-bench", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t ftype = H5Tcopy(mem);
    H5Tpack(ftype);
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = 6000;
    hid_t space = H5Screate_simple(1, &zero, &unlimited);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
    hid_t ds = H5Dcreate2(file, "stats", ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    for (hsize_t done = 0; done < kRows; done += per_write) {
      const hsize_t n = static_cast<hsize_t>(per_write), total = done + n;
      H5Dset_extent(ds, &total);
      hid_t fspace = H5Dget_space(ds);
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &done, nullptr, &n, nullptr);
      hid_t mspace = H5Screate_simple(1, &n, nullptr);
      if (H5Dwrite(ds, mem, mspace, fspace, H5P_DEFAULT, rows.data() + done) < 0) std::exit(1);
      H5Sclose(mspace);
      H5Sclose(fspace);
    }
    H5Dclose(ds);
    H5Fflush(file, H5F_SCOPE_GLOBAL);
    const ssize_t size = H5Fget_file_image(file, nullptr, 0);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(ftype);
    H5Fclose(file);
    H5Pclose(fapl);
    const double c = CpuSeconds() - c0;
    std::printf("tables: 10,000 stats rows in writes of %5d rows: cpu %.3f s, %.1f bytes/row\n",
                per_write, c, double(size) / kRows);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = argc > 1 ? argv[1] : (tmp && *tmp ? tmp : "/tmp");
  const std::string dir = base + "/tstat-io-bench-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  for (int level : {1, 4}) {
    StatsBench(dir + "/stats-" + std::to_string(level), false, level);
    StatsBench(dir + "/stats-exp-" + std::to_string(level), true, level);
  }
  AppendBench();
  RawBench(dir);
  std::filesystem::remove_all(dir);
  return 0;
}
