#include "benchmarks/read_bench.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "benchmarks/bench_temp_dir.h"
#include "io/write/hdf5_run_writer.h"
#include "tstat/trial.h"

namespace tstat::bench {
namespace {

constexpr std::uint64_t kElements = 4096;  // values behind each record
constexpr int kHistogramBins = 20;

std::string TensorName(std::int64_t i) {
  char name[64];
  std::snprintf(name, sizeof name, "%slayer%05lld.weight", i % 2 ? "gradient/" : "",
                static_cast<long long>(i / 2));
  return name;
}

// A cheap deterministic value in [0, 1) of (a, b).
double Hash01(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

// `x` rounded to float32. Through a volatile: GCC 12 folds the round trip
// of a product through static_cast<float> away.
double Float32(double x) {
  volatile float f = static_cast<float>(x);
  return f;
}

// Step s of tensor i: a weight-like or gradient-like tensor whose scale
// drifts over the run, with noise, so consecutive steps differ as in
// training (the writer's compression sees realistic rows).
void FillRecord(std::int64_t i, std::int64_t s, TensorStatsRecord* r) {
  const double scale =
      (i % 2 ? 1e-3 : 0.05) * (1.0 + 0.1 * std::sin(1e-3 * static_cast<double>(s))) *
      (1.0 + 0.01 * Hash01(static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(s)));
  TensorStats& t = r->stats;
  t.count = t.finite_count = kElements;
  t.neg_count = kElements / 2 - static_cast<std::uint64_t>(16 * Hash01(s, i));
  t.mean = scale * (Hash01(i, s) - 0.5) * 0.02;
  t.m2 = scale * scale * static_cast<double>(kElements);
  // Extremes are elements of a float32 tensor: float32 values (23-bit
  // mantissas); the sums are accumulated in double.
  t.min = Float32(-3.7 * scale);
  t.max = Float32(3.9 * scale);
  t.l1 = 0.798 * scale * static_cast<double>(kElements);
  t.amax = t.max;
  t.sum = t.mean * static_cast<double>(kElements);
  t.l2 = std::sqrt(t.m2 + static_cast<double>(kElements) * t.mean * t.mean);
  ExponentBins& h = *r->exponent_histogram;
  h.first_bin = 150 + static_cast<int>(std::floor(std::log2(scale))) - 14;
  std::uint64_t left = kElements;
  for (int b = kHistogramBins - 1; b > 0; --b) {
    const std::uint64_t c = left >> 1;
    h.counts[static_cast<std::size_t>(b)] = c;
    left -= c;
  }
  h.counts[0] = left;
}

Status WriteRun(const std::string& dir, const ReadBenchOptions& o) {
  io::Hdf5RunWriterOptions wo;
  wo.info.run_dir = dir;
  wo.info.host = "bench";
  wo.compression_level = o.compression_level;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<io::StepSink> w, io::OpenHdf5RunWriter(wo));
  std::vector<TensorInfo> tensors;
  for (std::int64_t i = 0; i < o.tensors; ++i) {
    TensorInfo t;
    t.id = static_cast<std::uint32_t>(i);
    t.name = TensorName(i);
    t.shape = {64, static_cast<std::int64_t>(kElements / 64)};
    t.collections = {i % 2 ? "gradients" : "weights"};
    tensors.push_back(t);
  }
  TensorInfo loss;
  loss.id = static_cast<std::uint32_t>(o.tensors);
  loss.name = "loss";
  loss.kind = TensorKind::kScalar;
  loss.dtype = DType::kFloat64;
  loss.collections = {"losses"};
  tensors.push_back(loss);
  TSTAT_RETURN_IF_ERROR(w->RegisterTensors(tensors));
  StepBatch b;
  b.stats.resize(static_cast<std::size_t>(o.tensors));
  for (std::int64_t i = 0; i < o.tensors; ++i) {
    TensorStatsRecord& r = b.stats[static_cast<std::size_t>(i)];
    r.tensor_id = static_cast<std::uint32_t>(i);
    r.has_stats = true;
    r.exponent_histogram.emplace();
    r.exponent_histogram->counts.resize(kHistogramBins);
  }
  b.scalars.resize(1);
  b.scalars[0].tensor_id = loss.id;
  for (std::int64_t s = 0; s < o.steps; ++s) {
    b.key = StepKey{s, Mode::kTrain, s};
    b.wall_time = 1.7e9 + 0.1 * static_cast<double>(s);
    b.step_seconds = 0.1;
    for (std::int64_t i = 0; i < o.tensors; ++i) {
      FillRecord(i, s, &b.stats[static_cast<std::size_t>(i)]);
    }
    b.scalars[0].value = 2.0 / (1.0 + 1e-3 * static_cast<double>(s));
    b.scalars[0].wall_time = b.wall_time;
    TSTAT_RETURN_IF_ERROR(w->Write(b));
    if ((s + 1) % o.steps_per_segment == 0) TSTAT_RETURN_IF_ERROR(w->Flush({}));
  }
  return w->Close({});
}

double Seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
}

// What a child process left: its output on `fd` (up to `max_output`
// bytes), its wait status and its resources.
struct Finished {
  bool waited = false;
  int status = 0;
  std::string output;
  double wall_s = 0, cpu_s = 0, peak_mib = 0;
};

// Reads `fd` (the child's end closed here already) to its end, then waits
// for `pid`, started at `t0`; its times and peak memory go into *c (or an
// error when it could not be waited for).
Finished Finish(pid_t pid, int fd, std::size_t max_output, std::chrono::steady_clock::time_point t0,
                ReadCase* c) {
  Finished f;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (f.output.size() < max_output) f.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  rusage usage{};
  f.waited = pid > 0 && ::wait4(pid, &f.status, 0, &usage) == pid;
  f.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.cpu_s = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
  f.peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  if (!f.waited) {
    c->error = "fork or wait failed";
  } else {
    c->wall_s = f.wall_s;
    c->cpu_s = f.cpu_s;
    c->peak_mib = f.peak_mib;
  }
  return f;
}

// Runs `body` in a child process: its wall time, CPU time and peak resident
// set are the case's. The child reports "<records>" (ok) or an error line.
template <class Body>
ReadCase InChild(const std::string& name, Body body) {
  ReadCase c;
  c.name = name;
  int fds[2];
  if (::pipe(fds) != 0) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string message;
    const bool ok = body(&message);
    message = (ok ? "ok " : "error ") + message;
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  const Finished f = Finish(pid, fds[0], 65536, t0, &c);
  if (!f.waited) return c;
  const std::string& message = f.output;
  const int status = f.status;
  c.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && message.rfind("ok ", 0) == 0;
  if (c.ok) {
    char* end = nullptr;
    c.answer = std::strtoull(message.c_str() + 3, &end, 10);
    if (end != nullptr && *end == ' ') c.query_s = std::strtod(end + 1, nullptr);
  } else {
    c.error = message.rfind("error ", 0) == 0 ? message.substr(6)
                                              : "exit status " + std::to_string(status);
  }
  return c;
}

std::string SelfExecutable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::uint64_t DirectoryBytes(const std::string& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

// Runs the tstat CLI (`argv`) as the case's process, stdout discarded; the
// exit codes in `ok_codes` mean it worked (check exits 1 on findings).
ReadCase CliCase(const std::string& name, const std::vector<std::string>& argv,
                 const std::vector<int>& ok_codes, std::uint64_t records) {
  ReadCase c;
  c.name = name;
  int fds[2];
  if (::pipe(fds) != 0) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const Finished f = Finish(pid, fds[0], 4096, t0, &c);
  if (!f.waited) return c;
  const std::string& errors = f.output;
  const int status = f.status;
  for (int code : ok_codes) c.ok = c.ok || (WIFEXITED(status) && WEXITSTATUS(status) == code);
  if (c.ok) {
    c.records = records;
  } else {
    c.error = "tstat " + argv[1] + " exited with status " + std::to_string(status) + ": " + errors;
  }
  return c;
}

// Wall seconds since `t0`, as text.
std::string SecondsSince(std::chrono::steady_clock::time_point t0) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return text;
}

bool Wanted(const ReadBenchOptions& o, const std::string& name) {
  return o.cases.empty() || std::find(o.cases.begin(), o.cases.end(), name) != o.cases.end();
}

}  // namespace

std::string FormatReadJsonLine(const ReadCase& c, std::int64_t tensors, std::int64_t steps) {
  std::ostringstream o;
  o << std::setprecision(6) << "{\"case\": \"" << c.name << "\", \"tensors\": " << tensors
    << ", \"steps\": " << steps << ", \"ok\": " << (c.ok ? "true" : "false")
    << ", \"wall_s\": " << c.wall_s << ", \"cpu_s\": " << c.cpu_s << ", \"query_s\": " << c.query_s
    << ", \"peak_mib\": " << c.peak_mib << ", \"records\": " << c.records
    << ", \"answer\": " << c.answer << ", \"records_per_s_per_core\": "
    << (c.records > 0 && c.cpu_s > 0 ? static_cast<double>(c.records) / c.cpu_s : 0.0);
  if (!c.ok) {
    std::string e;
    for (char ch : c.error) {
      if (ch == '"' || ch == '\\') e += '\\';
      e += ch >= 0 && ch < 0x20 ? ' ' : ch;
    }
    o << ", \"error\": \"" << e << "\"";
  }
  o << "}";
  return o.str();
}

Status RunReadBench(const ReadBenchOptions& o, std::ostream& out, std::ostream& err) {
  if (o.run_dir.empty() && (o.tensors < 2 || o.steps < 2 || o.steps_per_segment < 1)) {
    return Status::InvalidArgument(
        "--tensors and --steps must be at least 2, --steps-per-segment 1");
  }
  const std::string cli = o.cli.empty() ? SelfExecutable() : o.cli;
  if (cli.empty()) return Status::FailedPrecondition("cannot find the tstat executable");
  std::vector<ReadCase> cases;
  ScopedTempDir scratch;
  std::string run = o.run_dir;
  std::int64_t tensors = o.tensors, steps = o.steps;
  if (run.empty()) {
    TSTAT_ASSIGN_OR_RETURN(scratch.path, MakeTempDir(o.dir, "tstat-bench-read"));
    run = scratch.path + "/run";
    ReadCase write = InChild("write", [&](std::string* message) {
      const Status s = WriteRun(run, o);
      *message = s.ok() ? std::to_string(o.tensors * o.steps + o.steps) : s.ToString();
      return s.ok();
    });
    write.records = write.answer;
    write.answer = 0;
    cases.push_back(write);
    if (!write.ok) return Status::Internal("writing the run failed: " + write.error);
    if (o.keep) {
      err << "tstat bench read: the run is kept in " << run << "\n";
      scratch.path.clear();  // not removed
    }
  } else {
    // Its size, from the run itself.
    auto trial = Trial::Open(run);
    if (!trial.ok()) return trial.status();
    const std::vector<std::string> names = (*trial)->tensor_names({});
    tensors = static_cast<std::int64_t>(names.size());
    steps = static_cast<std::int64_t>((*trial)->steps(Mode::kGlobal).size());
  }
  const std::uint64_t records = static_cast<std::uint64_t>(tensors * steps + steps);
  std::string series_tensor = TensorName(tensors / 2 / 2 * 2);  // a weight mid-run
  const std::int64_t middle_step = steps / 2;

  if (Wanted(o, "open"))
    cases.push_back(InChild("open", [&](std::string* message) {
      const auto t0 = std::chrono::steady_clock::now();
      auto trial = Trial::Open(run);
      if (!trial.ok()) {
        *message = trial.status().ToString();
        return false;
      }
      const std::size_t workers = (*trial)->workers().size();
      const std::size_t n = (*trial)->steps(Mode::kGlobal).size();
      *message = workers > 0 && n > 0 ? std::to_string(n) + " " + SecondsSince(t0)
                                      : "no workers or no steps";
      return workers > 0 && n > 0;
    }));
  if (Wanted(o, "inspect")) cases.push_back(CliCase("inspect", {cli, "inspect", run}, {0}, 0));
  if (Wanted(o, "series"))
    cases.push_back(InChild("series", [&](std::string* message) {
      auto trial = Trial::Open(run);
      if (!trial.ok()) {
        *message = trial.status().ToString();
        return false;
      }
      if (!o.run_dir.empty()) {
        const std::vector<std::string> names = (*trial)->tensor_names({});
        if (!names.empty()) series_tensor = names[names.size() / 2];
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto points = (*trial)->series(series_tensor, StatField::kL2, Mode::kGlobal, -1);
      if (!points.ok()) {
        *message = points.status().ToString();
        return false;
      }
      *message = std::to_string(points->size()) + " " + SecondsSince(t0);
      return true;
    }));
  if (Wanted(o, "step"))
    cases.push_back(InChild("step", [&](std::string* message) {
      auto trial = Trial::Open(run);
      if (!trial.ok()) {
        *message = trial.status().ToString();
        return false;
      }
      const std::vector<StepKey> all = (*trial)->steps(Mode::kGlobal);
      if (all.empty()) {
        *message = "no steps";
        return false;
      }
      const std::int64_t step = all[all.size() / 2].global_step;
      const auto t0 = std::chrono::steady_clock::now();
      auto records_at = (*trial)->step_records(0, o.run_dir.empty() ? middle_step : step);
      if (!records_at.ok()) {
        *message = records_at.status().ToString();
        return false;
      }
      *message = std::to_string(records_at->size()) + " " + SecondsSince(t0);
      return true;
    }));
  if (Wanted(o, "check")) cases.push_back(CliCase("check", {cli, "check", run}, {0, 1}, records));

  std::uint64_t bytes = DirectoryBytes(run);
  if (o.json) {
    for (const ReadCase& c : cases) out << FormatReadJsonLine(c, tensors, steps) << "\n";
  } else {
    out << "tstat bench read: " << tensors << " tensors x " << steps << " steps, " << std::fixed
        << std::setprecision(1) << static_cast<double>(bytes) / 1e6
        << " MB on disk; each case in a process of its own\n";
    out << "case       wall s    cpu s  query s  peak MiB   answer     records  records/s/core\n";
    for (const ReadCase& c : cases) {
      char line[256];
      std::snprintf(line, sizeof line, "%-8s %8.3f %8.3f %8.3f %9.1f %8llu %11llu %15.0f",
                    c.name.c_str(), c.wall_s, c.cpu_s, c.query_s, c.peak_mib,
                    static_cast<unsigned long long>(c.answer),
                    static_cast<unsigned long long>(c.records),
                    c.records > 0 && c.cpu_s > 0 ? static_cast<double>(c.records) / c.cpu_s : 0.0);
      out << line << (c.ok ? "" : "  FAILED: " + c.error) << "\n";
    }
  }
  for (const ReadCase& c : cases) {
    if (!c.ok) return Status::Internal("case " + c.name + " failed: " + c.error);
  }
  return Status::OK();
}

}  // namespace tstat::bench
