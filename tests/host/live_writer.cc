// live_writer RUN_DIR GATE_DIR STEPS: the writer process of
// live_reader_test.cc. Writes STEPS TRAIN steps (every step saved and
// flushed at once): tensor "w" = {g, g+1, g+2} (f32) and scalar "loss" =
// 1/(g+1) at global step g. After STEPS/2 steps it waits until the file
// GATE_DIR/half exists, after all steps until GATE_DIR/close exists, then
// closes the session - so the reader can look at the run while it is
// certainly still being written. Exit status: 0 closed, 1 usage, 2 an error.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tstat/session.h"

namespace {

// Waits (at most 120 s) for `path` to exist.
bool WaitForFile(const std::string& path) {
  struct stat st;
  for (int i = 0; i < 24000; ++i) {
    if (::stat(path.c_str(), &st) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "live_writer: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: live_writer RUN_DIR GATE_DIR STEPS\n");
    return 1;
  }
  const std::string gate = argv[2];
  const int steps = std::atoi(argv[3]);
  tstat::SessionConfig config;
  config.out_dir = argv[1];
  config.save_config = tstat::SaveConfig::Every(1);
  config.pipeline.flush_interval_steps = 1;  // each step durable and visible at once
  auto created = tstat::Session::Create(config);
  if (!created.ok()) return Fail(created.status().ToString());
  std::unique_ptr<tstat::Session> session = std::move(created).value();
  std::vector<float> w(3);
  auto id = session->RegisterTensor(
      {"w", tstat::TensorView::Host(w.data(), tstat::DType::kFloat32, {3}), {"weights"}});
  if (!id.ok()) return Fail(id.status().ToString());
  if (!session->SetMode(tstat::Mode::kTrain).ok()) return Fail("SetMode");
  for (int g = 0; g < steps; ++g) {
    if (g == steps / 2 && !WaitForFile(gate + "/half")) return Fail("no 'half' gate");
    for (int i = 0; i < 3; ++i) w[i] = static_cast<float>(g + i);
    if (tstat::Status s = session->SaveScalar("loss", 1.0 / (g + 1)); !s.ok()) {
      return Fail(s.ToString());
    }
    if (tstat::Status s = session->EndStep(); !s.ok()) return Fail(s.ToString());
  }
  if (!WaitForFile(gate + "/close")) return Fail("no 'close' gate");
  if (tstat::Status s = session->Close(); !s.ok()) return Fail(s.ToString());
  return 0;
}
