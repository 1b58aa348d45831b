// C++ consumer of the installed tstat: a short run written to argv[1].
#include <cstdio>
#include <vector>

#include "tstat/session.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tstat::SessionConfig config;
  config.out_dir = argv[1];
  config.save_config = tstat::SaveConfig::Every(1);
  auto created = tstat::Session::Create(config);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<tstat::Session> session = std::move(created).value();
  std::vector<float> w(64, 0.5f);
  if (!session
           ->RegisterTensor(
               {"fc.weight", tstat::TensorView::Host(w.data(), tstat::DType::kFloat32, {8, 8})})
           .ok())
    return 1;
  for (int i = 0; i < 5; ++i) {
    if (!session->SaveScalar("loss", 1.0 / (i + 1)).ok()) return 1;
    if (!session->EndStep().ok()) return 1;
  }
  const tstat::Status s = session->Close();
  const tstat::PipelineCounters c = session->counters();
  std::printf("C++ consumer: %s, %llu records written\n", s.ToString().c_str(),
              static_cast<unsigned long long>(c.records_written));
  return s.ok() && c.records_written == 10 ? 0 : 1;
}
