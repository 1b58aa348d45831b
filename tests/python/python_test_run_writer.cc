// python_test_run_writer RUN_DIR [STEPS [RANK WORLD [STEP_MS]]]: writes the
// run tests/python/test_trials.py reads back. Every value follows from the
// formulas below, which the test repeats in numpy:
//
//   step g (global, 0 ..): EVAL when g % 5 == 3 or 4, TRAIN otherwise; mode
//   steps count per mode. Every step saved; raw snapshots every 3rd mode
//   step; a flush every 4 steps (several segments), each STEP_MS apart.
//   "fc1.weight"          f32 [3, 4]: (g + 1) * (i - 5.5) / 8 + rank
//   "gradient/fc1.weight" f32 [3, 4]: (i % 3 - 1) * 2^-(g + 1)
//   "fc1.bias"            f64 [4]: {g, -g, 0.25, 1e-3}
//   "loss"                scalar: 1 / (g + 1) + rank
// Exit status: 0 written, 1 usage, 2 a tstat error (printed).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tstat/session.h"

namespace {

int Fail(const tstat::Status& s) {
  std::fprintf(stderr, "python_test_run_writer: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using tstat::DType;
  using tstat::Mode;
  using tstat::TensorView;
  if (argc < 2 || argc > 6 || argc == 4) {
    std::fprintf(stderr, "usage: python_test_run_writer RUN_DIR [STEPS [RANK WORLD [STEP_MS]]]\n");
    return 1;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 12;
  const int rank = argc > 4 ? std::atoi(argv[3]) : 0;
  const int world = argc > 4 ? std::atoi(argv[4]) : 1;
  const int step_ms = argc > 5 ? std::atoi(argv[5]) : 0;
  tstat::SessionConfig config;
  config.out_dir = argv[1];
  config.rank = rank;
  config.world_size = world;
  config.save_config = tstat::SaveConfig::Every(1);
  config.raw_save_config = tstat::SaveConfig::Every(3);
  config.pipeline.flush_interval_steps = 4;
  config.rules.enabled = false;
  auto created = tstat::Session::Create(config);
  if (!created.ok()) return Fail(created.status());
  std::unique_ptr<tstat::Session> session = std::move(created).value();

  std::vector<float> weight(12), gradient(12);
  std::vector<double> bias(4);
  for (const tstat::TensorSpec& spec :
       {tstat::TensorSpec{
            "fc1.weight", TensorView::Host(weight.data(), DType::kFloat32, {3, 4}), {"weights"}},
        tstat::TensorSpec{"gradient/fc1.weight",
                          TensorView::Host(gradient.data(), DType::kFloat32, {3, 4}),
                          {"gradients"}},
        tstat::TensorSpec{
            "fc1.bias", TensorView::Host(bias.data(), DType::kFloat64, {4}), {"biases"}}}) {
    if (auto id = session->RegisterTensor(spec); !id.ok()) return Fail(id.status());
  }
  for (int g = 0; g < steps; ++g) {
    const Mode mode = g % 5 == 3 || g % 5 == 4 ? Mode::kEval : Mode::kTrain;
    if (tstat::Status s = session->SetMode(mode); !s.ok()) return Fail(s);
    if (tstat::Status s = session->BeginStep(); !s.ok()) return Fail(s);
    for (int i = 0; i < 12; ++i) {
      weight[i] = static_cast<float>((g + 1) * (i - 5.5) / 8 + rank);
      gradient[i] = static_cast<float>((i % 3 - 1) * std::ldexp(1.0, -(g + 1)));
    }
    bias = {static_cast<double>(g), -static_cast<double>(g), 0.25, 1e-3};
    if (tstat::Status s = session->SaveScalar("loss", 1.0 / (g + 1) + rank); !s.ok()) {
      return Fail(s);
    }
    if (tstat::Status s = session->EndStep(); !s.ok()) return Fail(s);
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  if (tstat::Status s = session->Close(); !s.ok()) return Fail(s);
  return 0;
}
