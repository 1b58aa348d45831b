#include "host/session/request_options.h"

#include <cstring>
#include <string>

#include "host/session/step_records.h"

namespace tstat::host {

const CaptureOptions& RequestOptions::MergedOptions(const std::vector<int>& due) {
  for (const auto& [cols, options] : merged_) {
    if (cols == due) return options;
  }
  if (merged_.size() >= kMaxMerged) {
    merged_overflow_ = MergeOptions(*parts_.collections, due);
    return merged_overflow_;
  }
  merged_.emplace_back(due, MergeOptions(*parts_.collections, due));
  return merged_.back().second;
}

void RequestOptions::Prepare(RegisteredTensor* t, const TensorView& v, const std::vector<int>& due,
                             std::int64_t global_step, StepBatch* batch, StatsOptions* options) {
  const CaptureOptions& co = MergedOptions(due);
  StatsOptions& o = *options;
  o = co.stats;  // assigned: the request's count_values keeps its capacity
  o.sample_seed = t->name_hash ^ static_cast<std::uint64_t>(global_step);
  parts_.rules->ApplyNeeds(co, t, v, *parts_.registry, &o);
  // Delta: host tensors keep a host copy, which the delta pass overwrites
  // with the values it reads (delta.next), and which is first made after
  // the reduction (UpdateDeltaCopies); CUDA tensors a device copy
  // (device_delta.h), copied after the step's reductions are queued.
  if (co.delta && v.space == MemorySpace::kHost) {
    const std::size_t bytes = ViewBytes(v);
    if (t->has_previous && t->previous.size() == bytes && bytes > 0) {
      o.delta.previous = t->previous.data();
      o.delta.next = t->previous.data();
    } else {
      delta_updates_.emplace_back(t, v);
    }
  } else if (co.delta && v.space == MemorySpace::kCuda) {
    DeviceDeltaStore* store = parts_.device->DeltaStore(v.device, t->info.id, batch);
    if (store != nullptr) o.delta.previous = store->Prepare(t->info.id, v, batch);
  }
  if (!co.confusion_predictions.empty()) {
    PreparePredictions(co.confusion_predictions, t, v, batch, &o);
  }
}

void RequestOptions::PreparePredictions(const std::string& name, RegisteredTensor* t,
                                        const TensorView& v, StepBatch* batch, StatsOptions* o) {
  const RegisteredTensor* p = parts_.registry->Find(name);
  std::string problem;
  if (p == nullptr || p->info.kind != TensorKind::kTensor) {
    problem = "confusion: no registered tensor \"" + name + "\" holds the predictions";
  } else {
    TensorView pv;
    const Status s = ResolveView(*p, &pv);
    if (!s.ok() || pv.data == nullptr) {
      problem = "confusion: predictions \"" + name + "\" not available at this step" +
                (s.ok() ? "" : ": " + s.message());
    } else {
      o->confusion.predictions = pv.data;
      o->confusion.predictions_dtype = pv.dtype;
    }
  }
  if (p != nullptr && problem.empty() && p->info.space != v.space) {
    problem = "confusion: predictions \"" + name + "\" are in another memory space";
    o->confusion.predictions = nullptr;
  }
  if (!problem.empty()) batch->drops.push_back({t->info.id, "confusion", problem, 0});
}

bool RequestOptions::NeedsEndStep(const RegisteredTensor& t, const std::vector<int>& due) {
  if (!MergedOptions(due).confusion_predictions.empty()) return true;
  const CollectionSet& collections = *parts_.collections;
  for (int c = 0; c < collections.size(); ++c) {
    const Collection& col = collections.at(c);
    if (col.active && col.options.confusion_predictions == t.info.name) return true;
  }
  return false;
}

void RequestOptions::UpdateDeltaCopies() {
  for (auto& [t, v] : delta_updates_) {
    const std::size_t bytes = ViewBytes(v);
    t->previous.resize(bytes);
    if (bytes > 0) std::memcpy(t->previous.data(), v.data, bytes);
    t->has_previous = true;
  }
  delta_updates_.clear();
}

}  // namespace tstat::host
