// EpisodeJson (episode_json.h).
#include "tools/cli/episode_json.h"

#include "tools/cli/text_format.h"

namespace tstat::cli {

std::string EpisodeJson(const Episode& e) {
  auto step = [](const char* name, const StepKey& k) {
    return std::string(", \"") + name + "_step\": " + std::to_string(k.mode_step) + ", \"" + name +
           "_global_step\": " + std::to_string(k.global_step);
  };
  std::string worst_measure;
  double worst = 0.0;
  if (!e.worst.values.empty()) {
    worst_measure = e.worst.values.front().first;
    worst = e.worst.values.front().second;
  }
  return "{\"id\": " + std::to_string(e.id) + ", \"rule\": " + JsonString(e.rule) +
         ", \"type\": " + JsonString(e.type) + ", \"worker\": " + std::to_string(e.worker) +
         ", \"tensor\": " + JsonString(e.tensor) +
         ", \"severity\": " + JsonString(SeverityName(e.severity)) +
         ", \"mode\": " + JsonString(ModeName(e.first.mode)) + step("first", e.first) +
         step("last", e.last) + step("reported", e.reported) +
         ", \"steps\": " + std::to_string(e.steps) + ", \"open\": " + (e.open ? "true" : "false") +
         ", \"worst_measure\": " + JsonString(worst_measure) +
         ", \"worst_value\": " + JsonNumber(worst) + step("worst", e.worst.step) +
         ", \"message\": " + JsonString(e.opening.message) + "}";
}

}  // namespace tstat::cli
