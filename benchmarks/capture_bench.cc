// `tstat bench capture` (see capture_bench.h): the three measurements of a
// case and the driver loop. Output formats are in capture_bench_format.cc.
#include "benchmarks/capture_bench.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "benchmarks/bench_data.h"
#include "benchmarks/bench_temp_dir.h"
#include "benchmarks/bench_timing.h"
#include "host/pipeline/pipeline.h"
#include "host/pipeline/stop_state.h"
#include "io/write/step_sink.h"
#include "tstat/engine.h"
#include "tstat/session.h"

namespace tstat::bench {
namespace {

constexpr int kDefaultRepeats = 5;
// Blocks of about a second: each spans a writer flush (flush_interval_seconds
// is 1 s by default), so the writer's competition for the cores is counted.
constexpr double kBlockSeconds = 1.0;
constexpr double kWriterRecords = 300000.0;  // records queued in the writer phase
// The sustained run: this many blocks of EndSteps back to back, timed through
// Close (every flush the steps cause is inside the time).
constexpr std::int64_t kSustainedBlocks = 3;

double CpuSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Waits until no thread but this one uses the CPU (the writer thread has
// finished the queued steps, OpenMP's workers have stopped spinning): two
// consecutive 5 ms windows in which the rest of the process used under
// 0.5 ms of CPU. Gives up after 10 s (a run that never quiets is measured
// as it is).
void WaitForQuiet() {
  int quiet = 0;
  const double give_up = NowSeconds() + 10.0;
  while (quiet < 2 && NowSeconds() < give_up) {
    const double others0 =
        CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const double others1 =
        CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    quiet = others1 - others0 < 0.5e-3 ? quiet + 1 : 0;
  }
}

// One case's tensors: K views into one buffer of K x N normal-ish f32.
struct Tensors {
  HostBuffer data;
  std::vector<std::string> names;
  std::vector<TensorView> views;
};

Result<Tensors> MakeTensors(const CaptureBenchCase& c) {
  Tensors t;
  TSTAT_ASSIGN_OR_RETURN(t.data, GenerateNormal(DType::kFloat32, c.tensors * c.elements));
  const auto* base = static_cast<const float*>(t.data.data());
  for (std::int64_t i = 0; i < c.tensors; ++i) {
    t.names.push_back("layer" + std::to_string(i) + ".weight");
    t.views.push_back(TensorView::Host(base + i * c.elements, DType::kFloat32, {c.elements}));
  }
  return t;
}

SessionConfig BaseConfig(const CaptureBenchOptions& o, int level, const std::string& out_dir) {
  SessionConfig config;
  config.out_dir = out_dir;
  config.pipeline.cpu_threads = o.threads;
  config.pipeline.compression_level = level;
  config.pipeline.raw_compression_level =
      o.raw_compression_level.value_or(PipelineConfig{}.raw_compression_level);
  return config;
}

Result<std::unique_ptr<Session>> OpenSession(const SessionConfig& config, const Tensors& t) {
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(config));
  for (std::size_t i = 0; i < t.views.size(); ++i) {
    TSTAT_RETURN_IF_ERROR(session->RegisterTensor({t.names[i], t.views[i], {"weights"}}).status());
  }
  return session;
}

Status CheckCounters(const PipelineCounters& c, std::uint64_t records, const char* what) {
  if (c.write_errors || c.records_lost || c.raw_dropped || c.records_written != records) {
    return Status::Internal(std::string(what) + ": " + std::to_string(c.records_written) + " of " +
                            std::to_string(records) + " records written, " +
                            std::to_string(c.records_lost) + " lost, " +
                            std::to_string(c.raw_dropped) + " raw snapshots dropped, " +
                            std::to_string(c.write_errors) + " write errors");
  }
  return Status::OK();
}

// Alternating blocks of Reduce and EndStep; fills engine_s, end_step_s,
// block_steps, stats_waits, and `results` with the last Reduce's results.
Status TimeRatio(const CaptureBenchOptions& o, int level, int repeats, const Tensors& t,
                 const std::string& dir, CaptureBenchResult* r,
                 std::vector<ReductionResult>* results) {
  SessionConfig config = BaseConfig(o, level, dir + "/ratio");
  // The engine alone with the session's threads (ratio), and with every core
  // (ratio_all_cores) when the session leaves one to its writer.
  r->all_cores_threads = DefaultCpuThreads();
  std::int64_t elements = 0;
  for (const TensorView& v : t.views) elements += v.numel;
  const int threads =
      SessionCpuThreads(config.pipeline, static_cast<std::int64_t>(t.views.size()), elements);
  r->threads = threads;
  std::unique_ptr<Backend> engine = CreateCpuBackend({threads});
  std::unique_ptr<Backend> all_cores;
  if (threads != r->all_cores_threads) {
    all_cores = CreateCpuBackend({r->all_cores_threads});
  }
  std::vector<ReductionRequest> requests;
  for (const TensorView& v : t.views) requests.push_back({v, StatsOptions{}});

  config.save_config = SaveConfig::Every(1);  // stats of every tensor at every step
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, OpenSession(config, t));

  // Warm-up (OpenMP pools, first segment, page faults), and the block size.
  std::vector<double> warm;
  for (int i = 0; i < 3; ++i) {
    const double t0 = NowSeconds();
    TSTAT_RETURN_IF_ERROR(engine->Reduce(requests, results));
    warm.push_back(NowSeconds() - t0);
    TSTAT_RETURN_IF_ERROR(session->EndStep());
  }
  const std::int64_t block = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(kBlockSeconds / std::max(Median(warm), 1e-6)), 3, 2000);
  std::vector<double> engine_s, all_cores_s, end_step_s;
  for (int b = 0; b < 2 * repeats + 1; ++b) {
    WaitForQuiet();
    double t0 = NowSeconds();
    for (std::int64_t i = 0; i < block; ++i) {
      TSTAT_RETURN_IF_ERROR(engine->Reduce(requests, results));
    }
    engine_s.push_back((NowSeconds() - t0) / static_cast<double>(block));
    if (all_cores) {
      WaitForQuiet();
      t0 = NowSeconds();
      for (std::int64_t i = 0; i < block; ++i) {
        TSTAT_RETURN_IF_ERROR(all_cores->Reduce(requests, results));
      }
      all_cores_s.push_back((NowSeconds() - t0) / static_cast<double>(block));
    }
    WaitForQuiet();
    t0 = NowSeconds();
    for (std::int64_t i = 0; i < block; ++i) TSTAT_RETURN_IF_ERROR(session->EndStep());
    end_step_s.push_back((NowSeconds() - t0) / static_cast<double>(block));
  }
  for (const ReductionResult& x : *results) TSTAT_RETURN_IF_ERROR(x.status);
  // Sustained: the blocks above leave the writer's tail (its last flush)
  // outside their time; here it is inside.
  WaitForQuiet();
  const std::int64_t sustained = kSustainedBlocks * block;
  const double s0 = NowSeconds();
  for (std::int64_t i = 0; i < sustained; ++i) TSTAT_RETURN_IF_ERROR(session->EndStep());
  TSTAT_RETURN_IF_ERROR(session->Close());
  r->sustained_step_s = (NowSeconds() - s0) / static_cast<double>(sustained);
  const std::uint64_t steps = 3 + static_cast<std::uint64_t>(block) * (2 * repeats + 1) +
                              static_cast<std::uint64_t>(sustained);
  const PipelineCounters c = session->counters();
  TSTAT_RETURN_IF_ERROR(CheckCounters(c, steps * t.views.size(), "EndStep session"));
  r->block_steps = block;
  r->engine_s = Median(engine_s);
  r->end_step_s = Median(end_step_s);
  r->ratio = r->end_step_s / r->engine_s;
  r->engine_all_cores_s = all_cores ? Median(all_cores_s) : r->engine_s;
  r->ratio_all_cores = r->end_step_s / r->engine_all_cores_s;
  r->sustained_ratio = r->sustained_step_s / r->engine_s;
  r->stats_waits = c.stats_waits;
  RemoveTree(config.out_dir);
  return Status::OK();
}

// The pipeline's writer thread on copies of one captured step.
Status TimeWriter(const CaptureBenchCase& c, int level, const Tensors& t,
                  const std::vector<ReductionResult>& results, const std::string& dir,
                  CaptureBenchResult* r) {
  std::vector<TensorInfo> infos;
  StepBatch step;
  for (std::size_t i = 0; i < t.views.size(); ++i) {
    TensorInfo info;
    info.id = static_cast<std::uint32_t>(i);
    info.name = t.names[i];
    info.shape = {c.elements};
    info.collections = {"weights"};
    infos.push_back(std::move(info));
    TensorStatsRecord rec;
    rec.tensor_id = static_cast<std::uint32_t>(i);
    rec.stats = results[i].stats;
    rec.exponent_histogram = results[i].exponent_histogram;
    step.stats.push_back(std::move(rec));
  }
  io::Hdf5RunWriterOptions wo;
  wo.info.run_dir = dir + "/writer";
  wo.info.host = "bench";
  wo.compression_level = level;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<io::StepSink> sink, io::OpenHdf5RunWriter(wo));
  host::Pipeline::Options po;
  po.config.compression_level = level;
  host::StopState stop;
  const auto steps = static_cast<std::int64_t>(
      std::clamp(kWriterRecords / static_cast<double>(c.tensors), 20.0, 5000.0));
  WaitForQuiet();
  const double t0 = NowSeconds();
  {
    host::Pipeline pipeline(po, std::move(sink), &stop);
    for (std::int64_t s = 0; s < steps; ++s) {
      host::PipelineItem item;
      if (s == 0) item.declare = infos;
      item.has_batch = true;
      item.batch = step;
      item.batch.key = StepKey{s, Mode::kTrain, s};
      item.holds_slot = pipeline.AcquireSlot();
      TSTAT_RETURN_IF_ERROR(pipeline.Push(std::move(item)));
    }
    TSTAT_RETURN_IF_ERROR(pipeline.Close());
    const double seconds = NowSeconds() - t0;
    const PipelineCounters counters = pipeline.counters();
    TSTAT_RETURN_IF_ERROR(
        CheckCounters(counters, static_cast<std::uint64_t>(steps * c.tensors), "writer pipeline"));
    r->writer_records = counters.records_written;
    r->records_per_s = static_cast<double>(counters.records_written) / seconds;
    r->writer_step_s = static_cast<double>(c.tensors) / r->records_per_s;
  }
  RemoveTree(wo.info.run_dir);
  return Status::OK();
}

// write() of `bytes` from `data`, `times` times, into a new file, then fsync.
Status PlainWrite(const std::string& path, const void* data, std::size_t bytes,
                  std::int64_t times) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": create: " + std::strerror(errno));
  Status failure;
  for (std::int64_t i = 0; i < times && failure.ok(); ++i) {
    const auto* p = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::write(fd, p + done, bytes - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        failure = Status::IoError(path + ": write: " + std::strerror(errno));
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (failure.ok() && ::fsync(fd) != 0) {
    failure = Status::IoError(path + ": fsync: " + std::strerror(errno));
  }
  ::close(fd);
  return failure;
}

// Raw snapshot sessions against plain writes, alternating.
Status TimeRaw(const CaptureBenchOptions& o, int level, int repeats, const Tensors& t,
               const std::string& dir, CaptureBenchResult* r) {
  const std::size_t step_bytes = t.data.bytes();
  const auto steps = std::max<std::int64_t>(
      1, std::llround(o.raw_mib * 1024.0 * 1024.0 / static_cast<double>(step_bytes)));
  const std::uint64_t total = static_cast<std::uint64_t>(steps) * step_bytes;
  std::vector<double> raw_s, plain_s;
  for (int rep = 0; rep < repeats; ++rep) {
    SessionConfig config = BaseConfig(o, level, dir + "/raw-" + std::to_string(rep));
    config.save_config.base.save_interval = 0;  // no stats: raw snapshots only
    config.raw_save_config = SaveConfig::Every(1);
    config.pipeline.raw_memory_cap_bytes = static_cast<std::int64_t>(total + (64u << 20));
    TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, OpenSession(config, t));
    WaitForQuiet();
    double t0 = NowSeconds();
    for (std::int64_t s = 0; s < steps; ++s) TSTAT_RETURN_IF_ERROR(session->EndStep());
    TSTAT_RETURN_IF_ERROR(session->Close());
    raw_s.push_back(NowSeconds() - t0);
    TSTAT_RETURN_IF_ERROR(CheckCounters(session->counters(),
                                        static_cast<std::uint64_t>(steps) * t.views.size(),
                                        "raw snapshot session"));
    session.reset();
    RemoveTree(config.out_dir);

    const std::string plain = dir + "/plain.bin";
    WaitForQuiet();
    t0 = NowSeconds();
    TSTAT_RETURN_IF_ERROR(PlainWrite(plain, t.data.data(), step_bytes, steps));
    plain_s.push_back(NowSeconds() - t0);
    ::unlink(plain.c_str());
  }
  r->raw_bytes = total;
  r->raw_write_gbps = static_cast<double>(total) / Median(raw_s) / 1e9;
  r->plain_write_gbps = static_cast<double>(total) / Median(plain_s) / 1e9;
  return Status::OK();
}

std::string CaseName(std::int64_t tensors, std::int64_t elements) {
  return "capture_" + std::to_string(tensors) + "x" + std::to_string(elements);
}

}  // namespace

std::vector<CaptureBenchCase> DefaultCaptureCases() {
  std::vector<CaptureBenchCase> cases = {{"", 1000, 1000}, {"", 100, 100000}, {"", 4, 4194304}};
  for (CaptureBenchCase& c : cases) c.name = CaseName(c.tensors, c.elements);
  return cases;
}

Result<CaptureBenchResult> RunCaptureCase(const CaptureBenchCase& c, const CaptureBenchOptions& o) {
  CaptureBenchResult r;
  r.spec = c;
  r.repeats = o.repeats > 0 ? o.repeats : kDefaultRepeats;
  r.compression_level = o.compression_level.value_or(PipelineConfig{}.compression_level);
  r.raw_compression_level =
      o.raw_compression_level.value_or(PipelineConfig{}.raw_compression_level);
  TSTAT_ASSIGN_OR_RETURN(Tensors t, MakeTensors(c));
  TSTAT_ASSIGN_OR_RETURN(std::string dir, MakeTempDir(o.dir, "tstat-bench-capture"));
  std::vector<ReductionResult> results;
  Status s = TimeRatio(o, r.compression_level, r.repeats, t, dir, &r, &results);
  if (s.ok()) s = TimeWriter(c, r.compression_level, t, results, dir, &r);
  if (s.ok() && o.raw_mib > 0) s = TimeRaw(o, r.compression_level, r.repeats, t, dir, &r);
  RemoveTree(dir);
  if (!s.ok()) return s.WithContext(c.name);
  return r;
}

Status RunCaptureBench(const CaptureBenchOptions& o, std::ostream& out, std::ostream& err) {
  if ((o.tensors && *o.tensors < 1) || (o.elements && *o.elements < 1)) {
    return Status::InvalidArgument("--tensors and --elements must be at least 1");
  }
  if (o.compression_level && (*o.compression_level < 0 || *o.compression_level > 9)) {
    return Status::InvalidArgument("--compression-level must be 0..9");
  }
  if (o.raw_compression_level && (*o.raw_compression_level < 0 || *o.raw_compression_level > 9)) {
    return Status::InvalidArgument("--raw-compression-level must be 0..9");
  }
  if (!(o.raw_mib >= 0)) return Status::InvalidArgument("--raw-mib must be >= 0");
  std::vector<CaptureBenchCase> cases;
  if (o.tensors || o.elements) {
    CaptureBenchCase c;
    c.tensors = o.tensors.value_or(1000);
    c.elements = o.elements.value_or(1000);
    c.name = CaseName(c.tensors, c.elements);
    cases.push_back(c);
  } else {
    cases = DefaultCaptureCases();
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    TSTAT_ASSIGN_OR_RETURN(CaptureBenchResult r, RunCaptureCase(cases[i], o));
    if (r.stats_waits > 0) {
      err << "note: " << r.spec.name << ": EndStep waited " << r.stats_waits
          << " times for queue space (the writer fell behind)\n";
    }
    if (o.json) {
      out << FormatCaptureJsonLine(r) << "\n";
    } else {
      if (i == 0) out << FormatCaptureTableHeader();
      out << FormatCaptureTableRow(r);
    }
    out.flush();
  }
  return Status::OK();
}

}  // namespace tstat::bench
