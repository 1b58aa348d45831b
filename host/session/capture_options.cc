// Per-tensor options at capture time: merged collection options plus what
// depends on the step (sample seed, the delta's previous values, the
// confusion predictions), and the raw snapshots asked for by CaptureRawFor.
#include <cstring>
#include <string>

#include "host/session/label_classes.h"
#include "host/session/session_impl.h"

namespace tstat {

void Session::Impl::ApplyRawRequests() {
  std::vector<std::pair<std::string, int>> requests;
  {
    std::lock_guard<std::mutex> lock(raw_requests_mu);
    requests.swap(raw_requests);
  }
  for (const auto& [name, steps] : requests) {
    host::RegisteredTensor* t = registry.Find(name);
    if (t == nullptr || t->adhoc || steps <= 0) continue;  // unknown: nothing to capture
    if (t->raw_steps_left == 0) ++raw_requested_tensors;
    t->raw_steps_left = std::max(t->raw_steps_left, steps);
  }
}

bool Session::Impl::TakeRequestedRaw(host::RegisteredTensor* t) {
  if (t->raw_steps_left <= 0) return false;
  if (--t->raw_steps_left == 0) --raw_requested_tensors;
  return true;
}

const host::CaptureOptions& Session::Impl::MergedOptions(const std::vector<int>& due) {
  for (const auto& [cols, options] : merged_options) {
    if (cols == due) return options;
  }
  if (merged_options.size() >= kMaxMergedOptions) {
    merged_overflow = host::MergeOptions(*collections, due);
    return merged_overflow;
  }
  merged_options.emplace_back(due, host::MergeOptions(*collections, due));
  return merged_options.back().second;
}

namespace {

// "predictions", "logits", "model/predictions", "logits_output": a tensor
// whose last dimension counts the classes.
bool NamesPredictions(const std::string& name) {
  for (const char* word : {"predictions", "logits"}) {
    const std::size_t at = name.find(word);
    if (at == std::string::npos) continue;
    const std::size_t end = at + std::strlen(word);
    const bool left = at == 0 || name[at - 1] == '/' || name[at - 1] == '.' || name[at - 1] == '_';
    const bool right =
        end == name.size() || name[end] == '/' || name[end] == '.' || name[end] == '_';
    if (left && right) return true;
  }
  return false;
}

std::size_t ShapeRank(const TensorView& v) { return v.shape.empty() ? 1 : v.shape.size(); }

}  // namespace

int Session::Impl::LabelClasses(host::RegisteredTensor* t, const TensorView& v) {
  if (!t->label_classes) {
    int classes = 2;
    std::string source = "grown to the largest label seen";
    for (const auto& other : registry.all()) {
      const TensorInfo& p = other->info;
      if (p.kind != TensorKind::kTensor || !IsFloatingDType(p.dtype) || p.shape.size() < 2 ||
          !NamesPredictions(p.name) || p.shape.back() < 2) {
        continue;
      }
      classes = host::ClassesFor(p.shape.back() - 1);
      source = "the last dimension of " + p.name;
      break;
    }
    t->label_classes = std::make_shared<std::atomic<int>>(classes);
    rules_summary.label_classes.push_back({t->info.name, classes, source});
  }
  int classes = t->label_classes->load();
  if (classes > 0 && v.space == MemorySpace::kHost) {
    const std::int64_t largest = host::LargestHostLabel(v);
    if (largest >= classes) {
      classes = host::ClassesFor(largest);
      t->label_classes->store(classes);
    }
  }
  for (auto& l : rules_summary.label_classes) {
    if (l.tensor == t->info.name) l.classes = classes;
  }
  return classes;
}

void Session::Impl::ApplyRulesNeeds(const host::CaptureOptions& co, host::RegisteredTensor* t,
                                    const TensorView& v, StatsOptions* o) {
  // The rules' per-unit stats need units: [batch, units, ...].
  if (co.per_unit_from_rules && ShapeRank(v) < 2) o->per_channel_axis = -1;
  // Inferred label counts, unless configured or impossible (label counts do
  // not come with per-channel or linear histogram statistics).
  if (co.infer_label_classes && o->label_classes == 0 && IsIntegerDType(v.dtype) &&
      o->per_channel_axis < 0 && o->linear_histogram.bins == 0) {
    o->label_classes = LabelClasses(t, v);
  }
}

void Session::Impl::PrepareOptions(host::RegisteredTensor* t, const TensorView& v,
                                   const std::vector<int>& due, StepBatch* batch,
                                   StatsOptions* options) {
  const host::CaptureOptions& co = MergedOptions(due);
  StatsOptions& o = *options;
  o = co.stats;  // assigned: the request's count_values keeps its capacity
  o.sample_seed = t->name_hash ^ static_cast<std::uint64_t>(key.global_step);
  ApplyRulesNeeds(co, t, v, &o);
  // Delta: host tensors keep a host copy; CUDA tensors a device copy
  // (device_delta.h), copied after the step's reductions are queued.
  if (co.delta && v.space == MemorySpace::kHost) {
    const std::size_t bytes = static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype);
    if (t->has_previous && t->previous.size() == bytes) o.delta.previous = t->previous.data();
    delta_updates.emplace_back(t, v);
  } else if (co.delta && v.space == MemorySpace::kCuda) {
    if (!device_delta) {
      Result<std::unique_ptr<host::DeltaMemory>> memory = host::CreateCudaDeltaMemory(v.device);
      if (memory.ok()) {
        device_delta = std::make_unique<host::DeviceDeltaStore>(
            std::move(memory).value(),
            static_cast<std::uint64_t>(config.pipeline.delta_memory_cap_bytes));
      } else {
        batch->drops.push_back({t->info.id, "delta", memory.status().message(), 0});
      }
    }
    if (device_delta) o.delta.previous = device_delta->Prepare(t->info.id, v, batch);
  }
  if (!co.confusion_predictions.empty()) {
    const std::string& name = co.confusion_predictions;
    host::RegisteredTensor* p = registry.Find(name);
    std::string problem;
    if (p == nullptr || p->info.kind != TensorKind::kTensor) {
      problem = "confusion: no registered tensor \"" + name + "\" holds the predictions";
    } else {
      TensorView pv;
      const Status s = host::ResolveView(*p, &pv);
      if (!s.ok() || pv.data == nullptr) {
        problem = "confusion: predictions \"" + name + "\" not available at this step" +
                  (s.ok() ? "" : ": " + s.message());
      } else {
        o.confusion.predictions = pv.data;
        o.confusion.predictions_dtype = pv.dtype;
      }
    }
    if (p != nullptr && problem.empty() && p->info.space != v.space) {
      problem = "confusion: predictions \"" + name + "\" are in another memory space";
      o.confusion.predictions = nullptr;
    }
    if (!problem.empty()) batch->drops.push_back({t->info.id, "confusion", problem, 0});
  }
}

void Session::Impl::UpdateDeltaCopies() {
  for (auto& [t, v] : delta_updates) {
    const std::size_t bytes = static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype);
    t->previous.resize(bytes);
    if (bytes > 0) std::memcpy(t->previous.data(), v.data, bytes);
    t->has_previous = true;
  }
  delta_updates.clear();
}

}  // namespace tstat
