// loss_bound_writer: a training loop through Session for the loss-bound
// test (loss_bound_test.cc), which kills it with SIGKILL under CPU load.
//
//   loss_bound_writer RUN_DIR FLUSH_SECONDS FLUSH_STEPS STEP_MICROSECONDS
//
// Every step saves the statistics and a raw snapshot of a 65536-float tensor
// (work for the writer thread) and the scalar "g" = its global step.
// After each EndStep it prints "ended <global step> <CLOCK_MONOTONIC ns>"
// (stdout flushed), so the test knows which steps ended and when. Runs until
// killed. Exit status: 1 usage, 2 a tstat error (printed).
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tstat/session.h"

namespace {

long long MonotonicNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int Fail(const tstat::Status& s) {
  std::fprintf(stderr, "loss_bound_writer: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: loss_bound_writer RUN_DIR FLUSH_SECONDS FLUSH_STEPS STEP_US\n");
    return 1;
  }
  tstat::SessionConfig config;
  config.out_dir = argv[1];
  config.save_config = tstat::SaveConfig::Every(1);
  config.raw_save_config = tstat::SaveConfig::Every(1);
  config.pipeline.flush_interval_seconds = std::atof(argv[2]);
  config.pipeline.flush_interval_steps = std::atoll(argv[3]);
  config.pipeline.cpu_threads = 1;
  const long step_us = std::atol(argv[4]);
  auto created = tstat::Session::Create(config);
  if (!created.ok()) return Fail(created.status());
  std::unique_ptr<tstat::Session> session = std::move(created).value();
  std::vector<float> w(65536);
  auto id =
      session->RegisterTensor({"fc.weight",
                               tstat::TensorView::Host(w.data(), tstat::DType::kFloat32, {65536}),
                               {"weights"}});
  if (!id.ok()) return Fail(id.status());
  for (long long g = 0;; ++g) {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(g) + 0.001f * i;
    if (tstat::Status s = session->SaveScalar("g", static_cast<double>(g)); !s.ok()) return Fail(s);
    if (tstat::Status s = session->EndStep(); !s.ok()) return Fail(s);
    std::printf("ended %lld %lld\n", g, MonotonicNs());
    std::fflush(stdout);
    if (step_us > 0) ::usleep(static_cast<useconds_t>(step_us));
  }
}
