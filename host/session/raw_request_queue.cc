#include "host/session/raw_request_queue.h"

#include <algorithm>

namespace tstat::host {

void RawRequestQueue::Add(std::string tensor, int steps) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_.emplace_back(std::move(tensor), steps);
}

void RawRequestQueue::Apply(TensorRegistry* registry) {
  std::vector<std::pair<std::string, int>> requests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests.swap(queued_);
  }
  for (const auto& [name, steps] : requests) {
    RegisteredTensor* t = registry->Find(name);
    if (t == nullptr || t->adhoc || steps <= 0) continue;  // unknown: nothing to capture
    if (t->raw_steps_left == 0) ++tensors_waiting_;
    t->raw_steps_left = std::max(t->raw_steps_left, steps);
  }
}

bool RawRequestQueue::Take(RegisteredTensor* t) {
  if (t->raw_steps_left <= 0) return false;
  if (--t->raw_steps_left == 0) --tensors_waiting_;
  return true;
}

}  // namespace tstat::host
