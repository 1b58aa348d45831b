// CaptureRawFor's requests: raw snapshots of named registered tensors for
// their next N captured steps. Queued from any thread (the API, a rule's
// action on the rules thread, RUN/capture/ polled by EndStep) and applied to
// the tensors at the next EndStep.
// Thread safety: Add from any thread; the rest under the session lock.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "host/session/tensor_registry.h"

namespace tstat::host {

class RawRequestQueue {
 public:
  void Add(std::string tensor, int steps);
  // Gives each queued request's tensor at least that many requested steps.
  // Unknown names, ad-hoc tensors and steps <= 0 capture nothing.
  void Apply(TensorRegistry* registry);
  // Whether `t` gets a requested snapshot at this step (one step used).
  bool Take(RegisteredTensor* t);
  // Registered tensors with requested steps left.
  int tensors_waiting() const { return tensors_waiting_; }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, int>> queued_;  // guarded by mu_
  int tensors_waiting_ = 0;
};

}  // namespace tstat::host
