// `tstat bench rules` (see rules_bench.h).
#include "benchmarks/rules_bench.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "io/write/step_sink.h"
#include "rules/engine/rule_engine.h"
#include "rules/engine/rules_config.h"
#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "rules/runtime/trial_runner.h"
#include "tstat/rule.h"

namespace tstat::bench {
namespace {

constexpr int kVariants = 4;
constexpr std::int64_t kElements = 4096;
constexpr int kChannels = 16;
constexpr int kClasses = 10;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Unit(std::uint64_t x) {  // deterministic value in [0, 1)
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

// Stats of kElements values ~ N(mean, sd^2), with an exponent histogram.
TensorStats NormalStats(double mean, double sd, ExponentHistogram* hist) {
  TensorStats s;
  const double n = static_cast<double>(kElements);
  s.count = s.finite_count = kElements;
  s.mean = mean;
  s.m2 = sd * sd * n;
  s.min = mean - 4 * sd;
  s.max = mean + 4 * sd;
  s.sum = mean * n;
  s.l2 = std::sqrt((sd * sd + mean * mean) * n);
  s.l1 = 0.8 * sd * n;
  s.amax = std::max(std::fabs(s.min), std::fabs(s.max));
  s.neg_count = kElements / 2;
  s.small_count = 2;
  const int e = static_cast<int>(std::floor(std::log2(sd)));
  const std::uint64_t share[] = {kElements / 16, kElements / 4, kElements / 2, kElements / 8};
  std::uint64_t used = 0;
  for (int k = 0; k < 4; ++k) {
    hist->counts[ExponentHistogram::BinOf(e - 2 + k)] = share[k];
    used += share[k];
  }
  hist->counts[ExponentHistogram::BinOf(e - 3)] += kElements - used;
  return s;
}

// The synthetic run: T tensors (4/10 weights, 4/10 gradients, 1/10 biases,
// 1/10 ReLU outputs), a loss scalar and a labels tensor.
struct SyntheticRun {
  std::vector<TensorInfo> tensors;
  std::uint32_t loss_id = 0, labels_id = 0;
  std::vector<StepBatch> variants;
};

SyntheticRun MakeRun(std::int64_t count) {
  SyntheticRun run;
  for (std::int64_t i = 0; i < count; ++i) {
    TensorInfo t;
    t.id = static_cast<std::uint32_t>(i);
    t.shape = {64, kElements / 64};
    const std::string layer = "layer" + std::to_string(i);
    switch (i % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
        t.name = layer + ".weight", t.collections = {"weights"};
        break;
      case 4:
      case 5:
      case 6:
      case 7:
        t.name = "gradient/" + layer + ".weight", t.collections = {"gradients"};
        break;
      case 8:
        t.name = layer + ".bias", t.collections = {"biases"};
        break;
      default:
        t.name = layer + ".relu_output_0", t.collections = {"activations"};
        t.shape = {kElements / kChannels, kChannels};
    }
    run.tensors.push_back(std::move(t));
  }
  TensorInfo loss;
  loss.id = run.loss_id = static_cast<std::uint32_t>(count);
  loss.name = "loss";
  loss.kind = TensorKind::kScalar;
  loss.collections = {"losses", "scalars"};
  run.tensors.push_back(loss);
  TensorInfo labels;
  labels.id = run.labels_id = static_cast<std::uint32_t>(count + 1);
  labels.name = "labels";
  labels.dtype = DType::kInt64;
  labels.shape = {256};
  labels.collections = {"labels"};
  run.tensors.push_back(labels);

  for (int v = 0; v < kVariants; ++v) {
    StepBatch b;
    for (std::int64_t i = 0; i < count; ++i) {
      TensorStatsRecord r;
      r.tensor_id = static_cast<std::uint32_t>(i);
      ExponentHistogram hist;
      const double u = Unit(static_cast<std::uint64_t>(i) * 7919 + v);
      const int kind = static_cast<int>(i % 10);
      const double sd = kind < 4 ? 0.05 : kind < 8 ? 1e-3 * (1 + u) : kind == 8 ? 0.01 : 0.5;
      r.stats = NormalStats((u - 0.5) * sd, sd, &hist);
      r.exponent_histogram = hist;
      if (kind < 4) {  // weights: the delta against the previous save
        DeltaStats d;
        d.count = d.changed_count = kElements;
        d.l2 = r.stats.l2 * 1e-3 * (1 + u);
        d.l1 = d.l2 * 40;
        d.amax = d.l2 / 10;
        r.delta = d;
      }
      if (kind == 9) {  // ReLU outputs: half zeros, per-channel stats
        r.stats.zero_count = kElements / 2;
        r.stats.neg_count = 0;
        PerChannelStats pc;
        pc.axis = 1;
        for (int c = 0; c < kChannels; ++c) {
          ExponentHistogram unused;
          TensorStats cs = NormalStats(0.3 + 0.01 * c, 0.5, &unused);
          cs.count = cs.finite_count = kElements / kChannels;
          cs.zero_count = cs.count / 2;
          cs.neg_count = 0;
          pc.channels.push_back(cs);
        }
        r.per_channel = std::move(pc);
      }
      b.stats.push_back(std::move(r));
    }
    TensorStatsRecord l;
    l.tensor_id = run.labels_id;
    l.has_stats = false;
    LabelCounts lc;
    ConfusionMatrix cm;
    cm.classes = kClasses;
    cm.counts.assign(kClasses * kClasses, 0);
    for (int c = 0; c < kClasses; ++c) {
      lc.counts.push_back(25 + (c + v) % 3);
      cm.counts[c * kClasses + c] = lc.counts.back();
    }
    l.label_counts = std::move(lc);
    l.confusion = std::move(cm);
    b.stats.push_back(std::move(l));
    b.scalars.push_back(ScalarRecord{run.loss_id, 0.0, 0.0});
    run.variants.push_back(std::move(b));
  }
  return run;
}

// Step s of the run: a variant with its key, wall time and loss.
StepBatch& Prepare(SyntheticRun* run, std::int64_t s, double t0) {
  StepBatch& b = run->variants[static_cast<std::size_t>(s % kVariants)];
  b.key = StepKey{s, Mode::kTrain, s};
  b.wall_time = t0 + 0.1 * static_cast<double>(s);
  b.scalars[0].value = 2.0 / (1.0 + 0.01 * static_cast<double>(s));
  b.scalars[0].wall_time = b.wall_time;
  return b;
}

// The rule types that read something besides the scalar stat rows
// (TensorStats, DeltaStats, scalars): histograms, per-channel stats, label
// counts, confusion matrices, value counts. The others are "stats-only".
bool NeedsMoreThanStats(const std::string& type) {
  static const char* const kTypes[] = {
      "low_precision_range",  // exponent histogram
      "dead_relu",           "saturated_activation",
      "check_input_images",                // per-channel stats
      "class_imbalance",     "confusion",  // label counts, confusion matrix
      "nlp_sequence_ratio",                // value counts
  };
  for (const char* t : kTypes) {
    if (type == t) return true;
  }
  return false;
}

// Every registered rule type with its defaults (neutral values where one is
// required), or only the stats-only ones, plus an expression rule `bench_nan`
// (nan_count > 0).
Result<std::vector<std::unique_ptr<Rule>>> AllRules(const std::string& other_run, bool stats_only,
                                                    std::ostream& err) {
  RuleRegistry registry;
  TSTAT_RETURN_IF_ERROR(RegisterBuiltinRules(&registry));
  const std::map<std::string, std::map<std::string, std::string>> needs = {
      {"tensor_variance", {{"max_threshold", "1e6"}}},
      {"similar_across_runs", {{"other_trials", other_run}}},
  };
  std::vector<std::unique_ptr<Rule>> rules;
  for (const std::string& type : registry.types()) {
    if (type == "stalled_training_rule" || type == "expression") continue;  // alias / below
    if (stats_only && NeedsMoreThanStats(type)) continue;
    RuleSpec spec;
    spec.name = spec.type = type;
    auto it = needs.find(type);
    if (it != needs.end()) spec.parameters = it->second;
    Result<std::unique_ptr<Rule>> rule = registry.Create(spec);
    if (!rule.ok()) {
      spec.collection_names = {"weights", "gradients", "biases", "activations"};
      rule = registry.Create(spec);
    }
    if (!rule.ok()) {
      err << "note: rule " << type << " left out: " << rule.status().ToString() << "\n";
      continue;
    }
    rules.push_back(std::move(rule).value());
  }
  RuleSpec expr;
  expr.name = "bench_nan";
  expr.type = "expression";
  expr.parameters = {{"when", "nan_count > 0"}};
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Rule> e, registry.Create(expr));
  rules.push_back(std::move(e));
  return rules;
}

class Catalog final : public TensorCatalog {
 public:
  explicit Catalog(const std::vector<TensorInfo>& t) : tensors_(t) {}
  const TensorInfo* Find(std::uint32_t id) const override {
    return id < tensors_.size() ? &tensors_[id] : nullptr;
  }

 private:
  const std::vector<TensorInfo>& tensors_;
};

Result<std::string> TempRunDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base && *base ? base : "/tmp") + "/tstat-bench-" + tag + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return Status::IoError("cannot create " + templ);
  return templ;
}

Status WriteSteps(const std::string& dir, SyntheticRun* run, std::int64_t steps) {
  io::Hdf5RunWriterOptions o;
  o.info.run_dir = dir;
  o.info.host = "bench";
  o.compression_level = 0;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<io::StepSink> w, io::OpenHdf5RunWriter(o));
  TSTAT_RETURN_IF_ERROR(w->RegisterTensors(run->tensors));
  for (std::int64_t s = 0; s < steps; ++s) TSTAT_RETURN_IF_ERROR(w->Write(Prepare(run, s, 1.7e9)));
  return w->Close({});
}

Result<RulesBenchResult> EngineCase(const RulesBenchOptions& o, SyntheticRun* run,
                                    const std::string& other_run, bool stats_only,
                                    std::ostream& err) {
  TSTAT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Rule>> rules,
                         AllRules(other_run, stats_only, err));
  RulesBenchResult r;
  r.name = stats_only ? "stats_only" : "all_rules";
  r.tensors = o.tensors;
  r.steps = o.steps;
  r.rules = static_cast<int>(rules.size());
  rules::RuleEngine engine(std::move(rules));
  Catalog catalog(run->tensors);
  std::vector<Finding> findings;
  const auto start = std::chrono::steady_clock::now();
  const double cpu0 = ThreadCpuSeconds();
  for (std::int64_t s = 0; s < o.steps; ++s) {
    engine.Feed(0, Prepare(run, s, 1.7e9), &catalog, &findings);
    r.findings += findings.size();
    findings.clear();
  }
  engine.Finish(&findings);
  r.findings += findings.size();
  r.cpu_seconds = ThreadCpuSeconds() - cpu0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.records = engine.records_evaluated();
  r.records_per_s_per_core = static_cast<double>(r.records) / r.cpu_seconds;
  return r;
}

Result<RulesBenchResult> FollowCase(const RulesBenchOptions& o, SyntheticRun* run,
                                    const std::string& other_run, std::ostream& err) {
  TSTAT_ASSIGN_OR_RETURN(std::string dir, TempRunDir("follow"));
  TSTAT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Rule>> rules,
                         AllRules(other_run, /*stats_only=*/false, err));
  RulesBenchResult r;
  r.name = "follow";
  r.tensors = o.tensors;
  r.steps = o.follow_steps;
  r.rules = static_cast<int>(rules.size());
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::map<std::int64_t, Clock::time_point> flushed;  // step -> Flush() returned
  std::atomic<int> opened{0};                         // 1 ok, -1 failed
  Status writer_status;
  const std::uint32_t nan_tensor = 4;  // a gradient
  std::thread writer([&] {
    io::Hdf5RunWriterOptions wo;
    wo.info.run_dir = dir;
    wo.info.host = "bench";
    wo.compression_level = 0;
    auto w = io::OpenHdf5RunWriter(wo);
    if (!w.ok() || !w.value()->RegisterTensors(run->tensors).ok()) {
      writer_status = w.ok() ? Status::Internal("register failed") : w.status();
      opened = -1;
      return;
    }
    opened = 1;
    for (std::int64_t s = 0; s < o.follow_steps && writer_status.ok(); ++s) {
      StepBatch b = Prepare(run, s, 1.7e9);
      if (s > 0 && s % 5 == 0) b.stats[nan_tensor].stats.nan_count = 1;
      writer_status = w.value()->Write(b);
      if (writer_status.ok()) writer_status = w.value()->Flush({});
      {
        std::lock_guard<std::mutex> lock(mu);
        flushed[s] = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    Status closed = w.value()->Close({});
    if (writer_status.ok()) writer_status = closed;
  });
  while (opened == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<double> latencies;
  Status result;
  if (opened == 1) {
    rules::TrialRunnerOptions ro;
    ro.follow = true;
    ro.poll_interval_s = o.follow_poll_s;
    auto runner = rules::TrialRunner::Open(dir, std::move(rules), ro);
    auto log = rules::FindingsLogWriter::Open(dir + "/" + rules::kFindingsFileName);
    if (!runner.ok() || !log.ok()) {
      result = runner.ok() ? log.status() : runner.status();
    } else {
      rules::ActionRunner::Options ao;
      ao.log = log->get();
      // Logging is what is timed; no training process to stop (the NaNs
      // open critical episodes, which would ask for a stop without a sink).
      ao.stop.never = true;
      rules::ActionRunner acting(ao);
      const auto start = Clock::now();
      const double cpu0 = ThreadCpuSeconds();
      auto count = [&](const Finding&) {
        ++r.findings;
        return Status::OK();
      };
      result = runner.value()->Run(count, [&](const rules::EpisodeEvent& e) {
        TSTAT_RETURN_IF_ERROR(acting.Handle(e));
        if (e.kind != rules::EpisodeEvent::Kind::kOpen || e.episode.rule != "bench_nan") {
          return Status::OK();
        }
        const auto logged = Clock::now();
        std::lock_guard<std::mutex> lock(mu);
        auto it = flushed.find(e.episode.reported.global_step);
        latencies.push_back(
            it == flushed.end()
                ? 0.0  // logged before Flush() had returned
                : std::max(0.0, std::chrono::duration<double>(logged - it->second).count()));
        return Status::OK();
      });
      r.cpu_seconds = ThreadCpuSeconds() - cpu0;
      r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      r.records = runner.value()->engine().records_evaluated();
      (void)log.value()->Close();
    }
  }
  writer.join();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  TSTAT_RETURN_IF_ERROR(writer_status);
  TSTAT_RETURN_IF_ERROR(result);
  r.records_per_s_per_core = r.cpu_seconds > 0 ? static_cast<double>(r.records) / r.cpu_seconds : 0;
  if (!latencies.empty()) {
    std::sort(latencies.begin(), latencies.end());
    r.follow_latency_s = latencies[latencies.size() / 2];
  }
  return r;
}

}  // namespace

std::string FormatRulesJsonLine(const RulesBenchResult& r) {
  char buf[640];
  char latency[32] = "null";
  if (r.follow_latency_s) std::snprintf(latency, sizeof latency, "%.4f", *r.follow_latency_s);
  std::snprintf(buf, sizeof buf,
                "{\"case\": \"%s\", \"records\": %llu, \"seconds\": %.6f, "
                "\"records_per_s_per_core\": %.1f, \"follow_latency_s\": %s, "
                "\"cpu_seconds\": %.6f, \"records_counted\": \"per_record\", "
                "\"tensors\": %lld, \"steps\": %lld, \"rules\": %d, \"findings\": %llu}",
                r.name.c_str(), static_cast<unsigned long long>(r.records), r.seconds,
                r.records_per_s_per_core, latency, r.cpu_seconds, static_cast<long long>(r.tensors),
                static_cast<long long>(r.steps), r.rules,
                static_cast<unsigned long long>(r.findings));
  return buf;
}

Status RunRulesBench(const RulesBenchOptions& o, std::ostream& out, std::ostream& err) {
  if (o.tensors < 1 || o.steps < 1 || o.follow_steps < 0) {
    return Status::InvalidArgument("tensors and steps must be >= 1");
  }
  SyntheticRun run = MakeRun(o.tensors);
  TSTAT_ASSIGN_OR_RETURN(std::string other, TempRunDir("other"));
  Status wrote = WriteSteps(other, &run, 3);  // similar_across_runs compares with it
  std::vector<RulesBenchResult> results;
  Status status = wrote;
  for (bool stats_only : {true, false}) {
    if (!status.ok()) break;
    Result<RulesBenchResult> engine = EngineCase(o, &run, other, stats_only, err);
    status = engine.status();
    if (engine.ok()) results.push_back(engine.value());
  }
  if (status.ok() && o.follow_steps > 0) {
    Result<RulesBenchResult> follow = FollowCase(o, &run, other, err);
    status = follow.status();
    if (follow.ok()) results.push_back(follow.value());
  }
  std::error_code ec;
  std::filesystem::remove_all(other, ec);
  for (const RulesBenchResult& r : results) {
    if (o.json) {
      out << FormatRulesJsonLine(r) << "\n";
      continue;
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "%-11s %6lldx%-5lld %11llu records %9.3f s %14.0f records/s/core", r.name.c_str(),
                  static_cast<long long>(r.tensors), static_cast<long long>(r.steps),
                  static_cast<unsigned long long>(r.records), r.seconds, r.records_per_s_per_core);
    out << line;
    if (r.follow_latency_s) out << "  follow latency " << *r.follow_latency_s << " s";
    out << "  (" << r.rules << " rules, " << r.findings << " findings)\n";
  }
  return status;
}

}  // namespace tstat::bench
