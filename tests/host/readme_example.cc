// Linear regression trained by hand, captured by tstat (README: "A training loop").
#include <cstdio>
#include <vector>

#include "tstat/session.h"

int main(int argc, char** argv) {
  using namespace tstat;
  SessionConfig config;  // or: Session::CreateFromFile("tstat.json") / $TSTAT_CONFIG
  config.out_dir = argc > 1 ? argv[1] : "run";
  config.save_config = SaveConfig::Every(10);  // stats at every 10th step of each mode
  auto created = Session::Create(config);
  if (!created.ok()) return std::fprintf(stderr, "%s\n", created.status().ToString().c_str()), 1;
  Session& session = **created;
  std::vector<float> w(8, 0.0f), grad;  // grad appears lazily, as a framework's would
  Status s = session.RegisterTensor({"fc.weight", TensorView::Host(w.data(), DType::kFloat32, {8})})
                 .status();
  TensorSpec g("gradient/fc.weight", TensorView::Host(nullptr, DType::kFloat32, {8}));
  g.view_fn = [&grad](TensorView* v) {  // asked at each capture; nullptr = not there yet
    v->data = grad.empty() ? nullptr : grad.data();
    return Status::OK();
  };
  if (s.ok()) s = session.RegisterTensor(g).status();
  for (int step = 0; step < 200 && s.ok() && !session.ShouldStop(); ++step) {
    const Mode mode = step % 50 < 45 ? Mode::kTrain : Mode::kEval;  // 45 TRAIN, 5 EVAL
    float x[8], err = 0.0f;  // prediction - target, with target weights 0.5
    for (int i = 0; i < 8; ++i) x[i] = static_cast<float>((step * 7 + i * 3) % 5) - 2.0f;
    for (int i = 0; i < 8; ++i) err += (w[i] - 0.5f) * x[i];
    if (mode == Mode::kTrain) {
      grad.resize(8);
      for (int i = 0; i < 8; ++i) w[i] -= 0.02f * (grad[i] = err * x[i]);
    }
    s = session.SetMode(mode);
    if (s.ok()) s = session.SaveScalar("loss", 0.5 * err * err);  // saved at every step
    if (s.ok()) s = session.EndStep();  // captures what is due; never waits for disk
  }
  if (Status closed = session.Close(); s.ok()) s = closed;  // drains; the destructor would too
  return s.ok() ? 0 : (std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1);
}
