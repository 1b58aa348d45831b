// C++ consumer of the installed tstat: a short run written to argv[1], then
// read back through the Trial API (tstat/trial.h), and the engine's
// Version() and CPU backend (tstat/engine.h) - all from libtstat.so.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tstat/engine.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace {

int ReadBack(const char* run) {
  auto opened = tstat::Trial::Open(run);
  if (!opened.ok()) {
    std::fprintf(stderr, "Trial::Open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  tstat::Trial& trial = *opened.value();
  auto mean = trial.series("fc.weight", tstat::StatField::kMean);
  auto loss = trial.scalar_series("loss");
  tstat::StatField l2_field;
  if (!mean.ok() || mean->size() != 5 || (*mean)[4].value != 0.5 || !loss.ok() ||
      loss->size() != 5 || (*loss)[4].value != 1.0 / 5 || !trial.loaded_all_steps() ||
      !tstat::ParseStatField("l2", &l2_field)) {
    std::fprintf(stderr, "Trial read back wrong values\n");
    return 1;
  }
  auto stats = trial.stats("fc.weight", 4);
  // l2 of 64 values of 0.5: sqrt(64 * 0.25) = 4.
  if (!stats.ok() || tstat::StatValue(stats.value(), l2_field) != 4.0) return 1;
  std::printf("C++ consumer: Trial read %zu steps, l2 %g\n", trial.steps().size(),
              tstat::StatValue(stats.value(), l2_field));
  return 0;
}

int UseEngine() {
  std::unique_ptr<tstat::Backend> backend = tstat::CreateCpuBackend();
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<tstat::ReductionRequest> requests(1);
  requests[0].tensor = tstat::TensorView::Host(x.data(), tstat::DType::kFloat32, {4});
  std::vector<tstat::ReductionResult> results;
  if (!backend->Reduce(requests, &results).ok() || results.size() != 1 ||
      results[0].stats.mean != 2.5) {
    return 1;
  }
  std::printf("C++ consumer: tstat %s, %s: mean of 1..4 = %g\n", tstat::Version(),
              backend->description().c_str(), results[0].stats.mean);
  return std::strlen(tstat::Version()) > 0 ? 0 : 1;
}

}  // namespace

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
  if (!s.ok() || c.records_written != 10) return 1;
  return ReadBack(argv[1]) != 0 || UseEngine() != 0 ? 1 : 0;
}
