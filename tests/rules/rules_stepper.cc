// A training process for the out-of-process tests and the stop-check cost
// measurement.
//
//   rules_stepper train RUN STEP_MS NAN_STEP MAX_STEPS
//     A session on RUN (every step saved and flushed) with one gradient,
//     "fc1.weight_grad", that holds a NaN from NAN_STEP on; a step takes
//     STEP_MS. Before each EndStep it notes whether RUN/STOP exists (stat,
//     independently of the session), after it whether ShouldStop(); stops
//     when ShouldStop(). Prints one line:
//       stop_file_before_step=K stopped_after_step=J steps=N reason=...
//     (-1 when it never happened).
//   rules_stepper bench RUN STEPS
//     The cost of the EndStep poll of RUN/STOP and RUN/capture/: EndStep
//     with nothing due, stop_check_interval_ms 0 (a check at every step)
//     against a check interval of one hour (never), interleaved in rounds.
//     Prints ns per EndStep for both and their difference.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "tstat/session.h"

namespace {

int Fail(const tstat::Status& s) {
  std::fprintf(stderr, "rules_stepper: %s\n", s.ToString().c_str());
  return 1;
}

int Train(const std::string& run, int step_ms, int nan_step, int max_steps) {
  tstat::SessionConfig config;
  config.out_dir = run;
  config.save_config.base.save_interval = 1;
  config.pipeline.flush_interval_steps = 1;  // each step readable by `tstat rules --follow`
  config.pipeline.cpu_threads = 1;
  auto created = tstat::Session::Create(config);
  if (!created.ok()) return Fail(created.status());
  tstat::Session& session = *created.value();
  std::vector<float> grad(16, 0.25f);
  auto id = session.RegisterTensor(
      {"fc1.weight_grad", tstat::TensorView::Host(grad.data(), tstat::DType::kFloat32, 16),
       {"gradients"}});
  if (!id.ok()) return Fail(id.status());
  const std::string stop_file = run + "/STOP";
  int seen = -1, stopped = -1, steps = 0;
  for (int k = 0; k < max_steps; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));  // forward, backward
    if (k >= nan_step) grad[3] = std::numeric_limits<float>::quiet_NaN();
    struct stat st;
    if (seen < 0 && ::stat(stop_file.c_str(), &st) == 0) seen = k;
    if (tstat::Status s = session.EndStep(); !s.ok()) return Fail(s);
    steps = k + 1;
    if (session.ShouldStop()) {
      stopped = k;
      break;
    }
  }
  const std::string reason = session.stop_reason();
  if (tstat::Status s = session.Close(); !s.ok()) return Fail(s);
  std::printf("stop_file_before_step=%d stopped_after_step=%d steps=%d reason=%s\n", seen, stopped,
              steps, reason.c_str());
  return 0;
}

// ns per EndStep of `session` over `n` steps.
double TimeSteps(tstat::Session& session, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) (void)session.EndStep();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         n;
}

int Bench(const std::string& run, int steps) {
  std::unique_ptr<tstat::Session> sessions[2];
  for (int i = 0; i < 2; ++i) {
    tstat::SessionConfig config;
    config.out_dir = run + (i == 0 ? "/every_step" : "/never");
    config.save_config.base.save_interval = 0;  // nothing due: EndStep is pure bookkeeping
    config.pipeline.stop_check_interval_ms = i == 0 ? 0 : 3600 * 1000;
    auto created = tstat::Session::Create(config);
    if (!created.ok()) return Fail(created.status());
    sessions[i] = std::move(created).value();
  }
  const int rounds = 10;
  std::vector<double> with, without;
  for (int r = 0; r < rounds; ++r) {  // interleaved: the machine is shared and noisy
    with.push_back(TimeSteps(*sessions[0], steps / rounds));
    without.push_back(TimeSteps(*sessions[1], steps / rounds));
  }
  std::sort(with.begin(), with.end());
  std::sort(without.begin(), without.end());
  const double a = with[rounds / 2], b = without[rounds / 2];
  std::printf("EndStep, nothing due: %.0f ns with a RUN/STOP + RUN/capture/ check at every step, "
              "%.0f ns without; the check costs %.0f ns per step (median of %d rounds of %d)\n",
              a, b, a - b, rounds, steps / rounds);
  for (auto& s : sessions) (void)s->Close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "train" && argc == 6) {
    return Train(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
  }
  if (mode == "bench" && argc == 4) return Bench(argv[2], std::atoi(argv[3]));
  std::fprintf(stderr,
               "usage: rules_stepper train RUN STEP_MS NAN_STEP MAX_STEPS\n"
               "       rules_stepper bench RUN STEPS\n");
  return 2;
}
