// `tstat bench overhead`: see overhead_bench.h.
#include "benchmarks/overhead_bench.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "benchmarks/bench_timing.h"
#include "benchmarks/overhead_model.h"
#include "tstat/engine.h"
#include "tstat/session.h"
#include "tstat_torch/adapter.h"

namespace tstat::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// What each configuration captures at its save_interval.
SessionConfig CaptureConfig(const std::string& name, std::int64_t interval,
                            const OverheadBenchOptions& o, const std::string& out_dir) {
  SessionConfig c;
  c.out_dir = out_dir;
  c.pipeline.compression_level = o.compression_level;
  c.pipeline.raw_compression_level = o.raw_compression_level;
  c.pipeline.cpu_threads = o.capture_threads;
  c.collections.push_back(torch_adapter::LabelsCollection(kOverheadClasses));
  if (name == "stats_all") {
    c.save_config = SaveConfig::Every(interval);  // every built-in collection
  } else {
    c.save_config = SaveConfig::Every(0);          // no stats: raw bytes only
    c.raw_save_config = SaveConfig::Every(interval);
    if (name == "raw_weights") c.include_collections = {"weights", "biases"};
  }
  return c;
}

struct Sessioned {
  std::unique_ptr<Session> session;
  std::unique_ptr<OverheadCapture> capture;
};

Result<Sessioned> OpenCapture(const SessionConfig& config, OverheadNet& net) {
  Sessioned s;
  TSTAT_ASSIGN_OR_RETURN(s.session, Session::Create(config));
  Result<std::vector<std::uint32_t>> ids = torch_adapter::RegisterParameters(*s.session, *net);
  if (!ids.ok()) return ids.status();
  s.capture = std::make_unique<OverheadCapture>(s.session.get(), net);
  return s;
}

// Seconds per step of `steps` steps; with `capture`, including Close (the
// writer's backlog is part of the captured block's cost, not the next one's).
struct BlockResult {
  double step_s = 0.0;
  PipelineCounters counters;
};
Result<BlockResult> RunBlock(OverheadNet& net, torch::optim::Optimizer& opt,
                             const SyntheticBatch& batch, std::int64_t steps,
                             Sessioned* captured) {
  const Clock::time_point t0 = Clock::now();
  for (std::int64_t i = 0; i < steps; ++i) {
    TSTAT_RETURN_IF_ERROR(TrainStep(net, opt, batch, captured ? captured->capture.get() : nullptr));
  }
  BlockResult r;
  if (captured != nullptr) {
    TSTAT_RETURN_IF_ERROR(captured->session->Close());
    r.counters = captured->session->counters();
  }
  r.step_s = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(steps);
  return r;
}

Status Validate(const OverheadBenchOptions& o) {
  for (const std::string& c : o.configs) {
    const auto& valid = OverheadConfigNames();
    if (std::find(valid.begin(), valid.end(), c) == valid.end()) {
      std::string list;
      for (const std::string& v : valid) list += (list.empty() ? "" : ", ") + v;
      return Status::InvalidArgument("unknown configuration \"" + c + "\" (valid: " + list + ")");
    }
  }
  for (std::int64_t i : o.intervals) {
    if (i < 1) return Status::InvalidArgument("save intervals must be >= 1, got " + std::to_string(i));
  }
  if (o.steps < 1 || o.repeats < 1 || o.batch < 1) {
    return Status::InvalidArgument("steps, repeats and batch must be >= 1");
  }
  return Status::OK();
}

void PrintCase(const OverheadCase& c, bool json, std::ostream& out) {
  if (json) {
    out << "{\"config\":\"" << c.config << "\",\"save_interval\":" << c.save_interval
        << ",\"step_s\":" << Fixed(c.step_s, 6) << ",\"slowdown\":" << Fixed(c.slowdown, 4)
        << ",\"slowdown_min\":" << Fixed(c.slowdown_min, 4)
        << ",\"slowdown_max\":" << Fixed(c.slowdown_max, 4) << ",\"steps\":" << c.steps
        << ",\"capture_share\":" << Fixed(c.capture_share, 4)
        << ",\"records_dropped\":" << c.records_dropped << "}\n";
    return;
  }
  char line[200];
  std::snprintf(line, sizeof(line), "%-12s %13lld %9.2f %9.3fx  [%.3f, %.3f] %9.1f%% %8llu\n",
                c.config.c_str(), static_cast<long long>(c.save_interval), c.step_s * 1e3,
                c.slowdown, c.slowdown_min, c.slowdown_max, 100.0 * c.capture_share,
                static_cast<unsigned long long>(c.records_dropped));
  out << line;
}

}  // namespace

const std::vector<std::string>& OverheadConfigNames() {
  static const std::vector<std::string> kNames = {"none", "stats_all", "raw_weights", "raw_all"};
  return kNames;
}

std::string DescribeRuntime(int capture_threads) {
  std::ifstream maps("/proc/self/maps");
  std::string line, blas;
  std::vector<std::string> seen;
  while (std::getline(maps, line)) {
    const std::size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = fs::path(path).filename().string();
    const bool is_blas = file.find("blas") != std::string::npos ||
                         file.find("mkl") != std::string::npos ||
                         file.find("blis") != std::string::npos;
    if (is_blas && std::find(seen.begin(), seen.end(), path) == seen.end()) seen.push_back(path);
  }
  bool openblas = false, reference = false;
  for (const std::string& p : seen) {
    openblas = openblas || p.find("openblas") != std::string::npos;
    reference = reference || p.find("/blas/libblas") != std::string::npos;
    blas += (blas.empty() ? "" : ", ") + p;
  }
  const std::string kind = openblas    ? "OpenBLAS"
                           : reference ? "reference BLAS (slow: install libopenblas0-pthread)"
                           : blas.empty() ? "none found" : "other";
  std::string info = "BLAS: " + kind + " (" + (blas.empty() ? "no BLAS mapped" : blas) + ")";
  info += "; torch " + std::string(TORCH_VERSION) + ", intra-op threads " +
          std::to_string(at::get_num_threads()) + ", inter-op threads " +
          std::to_string(at::get_num_interop_threads());
  const int small = SessionCpuThreads(PipelineConfig{}, 1, 1);
  info += "; tstat capture threads " +
          (capture_threads > 0
               ? std::to_string(capture_threads)
               : std::to_string(DefaultCpuThreads()) +
                     (small != DefaultCpuThreads() ? " (" + std::to_string(small) +
                                                         " for steps of tensors under 8,192 values)"
                                                   : std::string()));
  return info;
}

Status RunOverheadBench(const OverheadBenchOptions& o, std::ostream& out, std::ostream& err) {
  TSTAT_RETURN_IF_ERROR(Validate(o));
  std::vector<std::string> configs;
  for (const std::string& c : o.configs) {
    if (c != "none" && std::find(configs.begin(), configs.end(), c) == configs.end()) {
      configs.push_back(c);
    }
  }
  std::error_code ec;
  const fs::path root = fs::temp_directory_path(ec) /
                        ("tstat-bench-overhead-" + std::to_string(::getpid()));
  fs::create_directories(root, ec);
  if (ec) return Status::IoError("cannot create " + root.string() + ": " + ec.message());
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{root};

  // 0 keeps torch's default: on this shared 2-core machine more OpenMP threads
  // than free cores made every step ~10x slower (threads waiting at barriers).
  if (o.threads > 0) at::set_num_threads(o.threads);
  torch::manual_seed(0);
  OverheadNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const SyntheticBatch batch = MakeSyntheticBatch(o.batch, 1);
  for (int i = 0; i < 5; ++i) TSTAT_RETURN_IF_ERROR(TrainStep(net, opt, batch, nullptr));  // warm-up

  (o.json ? err : out) << DescribeRuntime(o.capture_threads) << "\n";
  if (!o.json) {
    out << "batch " << o.batch << " of 3x32x32 images, " << net->parameters().size()
        << " parameter tensors; slowdown = median over " << o.repeats
        << " repeats of captured / uncaptured block time\n";
    out << "config       save_interval   step_ms  slowdown  [min, max]       capture%  dropped\n";
  }
  std::vector<OverheadCase> cases;
  std::vector<double> baseline_steps;
  for (std::int64_t interval : o.intervals) {
    const std::int64_t block = (o.steps + interval - 1) / interval * interval;
    std::vector<std::vector<double>> ratios(configs.size()), step_s(configs.size());
    std::vector<OverheadCase> row(configs.size());
    // Long blocks (save_interval > steps) get fewer repeats, at least one, so
    // that every interval costs about steps * repeats training steps.
    const int repeats = static_cast<int>(std::max<std::int64_t>(
        1, (o.steps * o.repeats + block - 1) / block));
    for (int r = 0; r < repeats; ++r) {
      TSTAT_ASSIGN_OR_RETURN(BlockResult before, RunBlock(net, opt, batch, block, nullptr));
      baseline_steps.push_back(before.step_s);
      for (std::size_t c = 0; c < configs.size(); ++c) {
        const fs::path dir = root / (configs[c] + "-" + std::to_string(interval) + "-" + std::to_string(r));
        TSTAT_ASSIGN_OR_RETURN(Sessioned s,
                               OpenCapture(CaptureConfig(configs[c], interval, o, dir.string()), net));
        Result<BlockResult> captured = RunBlock(net, opt, batch, block, &s);
        if (!captured.ok()) return captured.status().WithContext(configs[c]);
        TSTAT_ASSIGN_OR_RETURN(BlockResult after, RunBlock(net, opt, batch, block, nullptr));
        baseline_steps.push_back(after.step_s);
        ratios[c].push_back(captured->step_s / (0.5 * (before.step_s + after.step_s)));
        step_s[c].push_back(captured->step_s);
        const PipelineCounters& k = captured->counters;
        row[c].records_dropped += k.raw_dropped;
        if (k.capture.step_seconds > 0) row[c].capture_share = k.capture.capture_seconds / k.capture.step_seconds;
        if (k.write_errors > 0) {
          return Status::IoError(configs[c] + ": " + std::to_string(k.write_errors) + " write errors");
        }
        s.session.reset();
        fs::remove_all(dir, ec);
        before = after;
      }
    }
    for (std::size_t c = 0; c < configs.size(); ++c) {
      OverheadCase& oc = row[c];
      oc.config = configs[c];
      oc.save_interval = interval;
      oc.steps = block;
      oc.step_s = Median(step_s[c]);
      oc.slowdown = Median(ratios[c]);
      oc.slowdown_min = *std::min_element(ratios[c].begin(), ratios[c].end());
      oc.slowdown_max = *std::max_element(ratios[c].begin(), ratios[c].end());
      PrintCase(oc, o.json, out);
      out.flush();
      cases.push_back(oc);
    }
  }
  OverheadCase none;
  none.config = "none";
  none.step_s = Median(baseline_steps);
  PrintCase(none, o.json, out);
  cases.insert(cases.begin(), none);
  if (!o.plot_path.empty()) {
    const std::string blas = DescribeRuntime(o.capture_threads);
    const std::string subtitle = "ResNet-style CNN, batch " + std::to_string(o.batch) +
                                 ", CPU, baseline step " + Fixed(none.step_s * 1e3, 1) + " ms; " +
                                 blas.substr(0, blas.find(" ("));
    TSTAT_RETURN_IF_ERROR(WriteOverheadSvg(cases, o.plot_path, subtitle));
    (o.json ? err : out) << "plot: " << o.plot_path << "\n";
  }
  return Status::OK();
}

}  // namespace tstat::bench
