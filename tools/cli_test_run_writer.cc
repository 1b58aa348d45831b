// cli_test_run_writer RUN_DIR: writes the small run that cli_inspect_test.sh
// checks `tstat inspect` and `tstat dump` against. Every value is known by
// hand:
//
//   steps   10 steps ended, every mode step divisible by 2 saved:
//           TRAIN global 0..5 (mode 0..5), EVAL global 6..7 (mode 0..1),
//           TRAIN global 8..9 (mode 6..7)  ->  saved: global 0 2 4 6 8,
//           TRAIN mode steps 0 2 4 6, EVAL mode step 0
//   "x"     f32 [4] = (g+1) * {1, 2, 3, 4} at global step g (collection
//           "weights"): count 4, min g+1, max 4(g+1), mean 2.5(g+1),
//           std sqrt(1.25)(g+1), l2 sqrt(30)(g+1)
//   hostile f32 [5] = {NaN, +Inf, -Inf, 0, 2}, a name with quotes, a comma,
//           a newline, a tab, an ANSI escape, a bidi override and non-ASCII
//           (collection "biases"): nan 1, +inf 1, -inf 1, min 0, max 2, mean 1
//   long    f32 [2] = {-1, 1}, a 150-byte name
//   "loss"  scalar 1/(g+1), saved at the saved steps only (so that exactly
//           5 of the 10 steps queue a batch)
//
// Each step sleeps 2 ms, so the run's step time is at least 20 ms.
// Exit status: 0 written, 1 usage, 2 a tstat error (printed).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "tstat/session.h"

namespace {

// Kept in sync with cli_inspect_test.sh.
// evil "q", n<LF>l<TAB>t<ESC>[1mX <U+202E>Y é→
const char kHostileName[] = "evil \"q\", n\nl\tt\x1b[1mX \xe2\x80\xaeY \xc3\xa9\xe2\x86\x92";

std::string LongName() {
  std::string name = "model";
  while (name.size() < 143) name += "/block";
  return name.substr(0, 143) + ".weight";  // 150 bytes
}

int Fail(const tstat::Status& s) {
  std::fprintf(stderr, "cli_test_run_writer: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using tstat::DType;
  using tstat::Mode;
  using tstat::TensorView;
  if (argc != 2) {
    std::fprintf(stderr, "usage: cli_test_run_writer RUN_DIR\n");
    return 1;
  }
  tstat::SessionConfig config;
  config.out_dir = argv[1];
  config.save_config = tstat::SaveConfig::Every(2);
  auto created = tstat::Session::Create(config);
  if (!created.ok()) return Fail(created.status());
  std::unique_ptr<tstat::Session> session = std::move(created).value();

  std::vector<float> x(4);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> hostile = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, 2.0f};
  std::vector<float> long_values = {-1.0f, 1.0f};
  for (const tstat::TensorSpec& spec :
       {tstat::TensorSpec{"x", TensorView::Host(x.data(), DType::kFloat32, {4}), {"weights"}},
        tstat::TensorSpec{kHostileName, TensorView::Host(hostile.data(), DType::kFloat32, {5}),
                          {"biases"}},
        tstat::TensorSpec{LongName(), TensorView::Host(long_values.data(), DType::kFloat32, {2}),
                          {"weights"}}}) {
    if (auto id = session->RegisterTensor(spec); !id.ok()) return Fail(id.status());
  }

  const Mode modes[10] = {Mode::kTrain, Mode::kTrain, Mode::kTrain, Mode::kTrain, Mode::kTrain,
                          Mode::kTrain, Mode::kEval,  Mode::kEval,  Mode::kTrain, Mode::kTrain};
  std::int64_t mode_step[5] = {0, 0, 0, 0, 0};
  for (int g = 0; g < 10; ++g) {
    if (tstat::Status s = session->SetMode(modes[g]); !s.ok()) return Fail(s);
    if (tstat::Status s = session->BeginStep(); !s.ok()) return Fail(s);
    for (int i = 0; i < 4; ++i) x[i] = static_cast<float>((g + 1) * (i + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const bool saved = mode_step[static_cast<int>(modes[g])]++ % 2 == 0;
    if (saved) {
      if (tstat::Status s = session->SaveScalar("loss", 1.0 / (g + 1)); !s.ok()) return Fail(s);
    }
    if (tstat::Status s = session->EndStep(); !s.ok()) return Fail(s);
  }
  if (tstat::Status s = session->Close(); !s.ok()) return Fail(s);
  const tstat::CaptureTotals t = session->capture_totals();
  std::printf("wrote %s: %llu steps, %llu saved, step %.6f s, capture %.6f s\n", argv[1],
              static_cast<unsigned long long>(t.steps),
              static_cast<unsigned long long>(t.steps_saved), t.step_seconds, t.capture_seconds);
  return 0;
}
