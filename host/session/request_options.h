// The StatsOptions of one registered tensor's request at EndStep: its due
// collections' merged options, what the rules need of it, the step's sample
// seed, the delta against its previous save (host: a copy kept in the
// registry entry; CUDA: the session's device delta store), and the
// confusion matrix's predictions. Problems (a predictions tensor missing,
// no device memory for a delta) become drop records, never errors.
// Thread safety: the session lock serializes every method.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "host/config/collection_set.h"
#include "host/session/session_device.h"
#include "host/session/session_rules.h"
#include "host/session/tensor_registry.h"
#include "tstat/engine.h"

namespace tstat::host {

class RequestOptions {
 public:
  // The parts the options are read from; they outlive this object.
  struct Parts {
    const CollectionSet* collections = nullptr;
    TensorRegistry* registry = nullptr;
    SessionRules* rules = nullptr;
    SessionDevice* device = nullptr;
  };
  explicit RequestOptions(Parts parts) : parts_(parts) {}

  // The options of `t` (view `v`) with collections `due` at `global_step`,
  // written over *options (its vectors keep their capacity).
  void Prepare(RegisteredTensor* t, const TensorView& v, const std::vector<int>& due,
               std::int64_t global_step, StepBatch* batch, StatsOptions* options);
  // Whether `t` with collections `due` must be captured at EndStep rather
  // than early: a confusion matrix is computed from it (it reads another
  // tensor at EndStep) or reads it (it is a collection's predictions).
  bool NeedsEndStep(const RegisteredTensor& t, const std::vector<int>& due);
  // After the host reduction read them: keeps the host delta tensors'
  // current values as their previous ones.
  void UpdateDeltaCopies();
  // Whether host delta copies are waiting for UpdateDeltaCopies.
  bool has_delta_updates() const { return !delta_updates_.empty(); }
  // Forgets the waiting copies: someone else makes them (CaptureEarly's
  // capture thread).
  void DropDeltaUpdates() { delta_updates_.clear(); }

 private:
  // MergeOptions(collections, due), computed once per set of due
  // collections (collections do not change once the session exists): the
  // merge copies vectors and strings. The reference is valid until the
  // next call.
  const CaptureOptions& MergedOptions(const std::vector<int>& due);
  void PreparePredictions(const std::string& name, RegisteredTensor* t, const TensorView& v,
                          StepBatch* batch, StatsOptions* o);

  Parts parts_;
  // A deque: references stay valid as it grows; at most kMaxMerged.
  static constexpr std::size_t kMaxMerged = 64;
  std::deque<std::pair<std::vector<int>, CaptureOptions>> merged_;
  CaptureOptions merged_overflow_;  // past the cap: recomputed per call
  std::vector<std::pair<RegisteredTensor*, TensorView>> delta_updates_;
};

}  // namespace tstat::host
