#include "host/session/step_capture.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "host/session/label_classes.h"

namespace tstat::host {
namespace {

using Clock = StepClock::Clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The prefetch helpers are always inlined: GCC deems a function that only
// prefetches free of side effects and drops the calls to it when it is not
// inlined first (at -O2 every prefetch here had vanished).

// Prefetches what AddResult reads of `result` (its stats, and its
// histogram's span and what follows; the 279 counts are skipped) and, for
// writing, `record` when there is one. With `only_stats`, only what
// AddResult's short path touches: up to the end of the histogram members.
[[gnu::always_inline]] inline void PrefetchForAddResult(const ReductionResult& result,
                                                        const TensorStatsRecord* record,
                                                        bool only_stats) {
  const auto* head = reinterpret_cast<const char*>(&result);
  for (const char* p = head; p < reinterpret_cast<const char*>(&result.exponent_histogram);
       p += 64) {
    __builtin_prefetch(p);
  }
  const char* tail = reinterpret_cast<const char*>(&result.linear_histogram);
  for (const char* p = tail - 64; p < (only_stats ? tail : head + sizeof(ReductionResult));
       p += 64) {
    __builtin_prefetch(p);
  }
  if (record == nullptr) return;
  const auto* rec = reinterpret_cast<const char*>(record);
  const std::size_t end =
      only_stats ? offsetof(TensorStatsRecord, linear_histogram) : sizeof(TensorStatsRecord);
  for (std::size_t b = 0; b < end; b += 64) __builtin_prefetch(rec + b, 1);
}

// Prefetches the histogram bins AddResult will read of `result` (its span
// is known once PrefetchForAddResult's lines have arrived).
[[gnu::always_inline]] inline void PrefetchHistogramSpan(const ReductionResult& result) {
  if (!result.exponent_histogram) return;
  const ExponentHistogram& h = *result.exponent_histogram;
  const std::uint64_t* first = h.counts.data() + h.SpanFirst();
  const std::uint64_t* last = h.counts.data() + h.SpanLast();
  for (const std::uint64_t* p = first; p < last; p += 8) __builtin_prefetch(p);
  if (last > first) __builtin_prefetch(last - 1);
}

// Prefetches what EndStep's loop over registered tensors reads: the
// tensor (its collections, view, id) some tensors ahead and, once that has
// arrived, its collection indices and shape. Both missed cache at every step, since
// the previous step's reduction streamed the tensors' data through it.
[[gnu::always_inline]] inline void PrefetchForCapture(const std::vector<RegisteredTensor*>& tensors,
                                                      std::size_t i) {
  constexpr std::size_t kTensorAhead = 8, kCollectionsAhead = 4;
  if (i + kTensorAhead < tensors.size()) {
    const auto* t = reinterpret_cast<const char*>(tensors[i + kTensorAhead]);
    for (std::size_t b = 0; b < sizeof(RegisteredTensor); b += 64) __builtin_prefetch(t + b);
  }
  if (i + kCollectionsAhead < tensors.size()) {
    const RegisteredTensor& t = *tensors[i + kCollectionsAhead];
    __builtin_prefetch(t.collections.data());
    __builtin_prefetch(t.view.shape.data());  // copied by ResolveView
  }
}

}  // namespace

StepCapture::StepCapture(Parts parts)
    : parts_(parts),
      options_(
          RequestOptions::Parts{parts.collections, parts.registry, parts.rules, parts.device}) {}

StepCapture::Outcome StepCapture::Run(StepBatch batch, std::uint64_t raw_reserved,
                                      bool capture_registered, CUstream_st* stream,
                                      Clock::time_point t0, Status* problem) {
  bool any_raw_due = false;
  const bool any_due = MarkDueCollections(capture_registered, &any_raw_due);
  device_ids_.clear();
  DeviceRaws device_raws;
  // The previous step's host requests serve again when nothing they depend
  // on can have changed: the same tensors registered, the same collections
  // due, no raw snapshot due or requested.
  const bool reuse_plan = plan_.valid && !early_this_step_ && capture_registered && !any_raw_due &&
                          parts_.raw_requests->tensors_waiting() == 0 &&
                          plan_.registered == parts_.captured->size() &&
                          plan_.due_stats == due_stats_;
  if (!reuse_plan) {
    // The requests may serve the next step only if no raw snapshot is due.
    BuildRequests(any_due, capture_registered && !any_raw_due && !early_this_step_, &batch,
                  &raw_reserved, &device_raws, problem);
  }
  early_this_step_ = false;
  host_requests_.resize(host_ids_.size());  // past this step's: earlier steps' requests
  device_requests_.resize(device_ids_.size());
  parts_.rules->CountStep();

  // The records of a step the writer is done with, overwritten in place (no
  // fresh pages, no regrowth copies), unless ad-hoc saves already started
  // this step's vector.
  std::size_t filled = batch.stats.size();
  if (batch.stats.capacity() == 0) {
    batch.stats = parts_.pipeline->TakeSpareRecords();
    filled = 0;
  }
  // ApproxRecordBytes of the records, summed while they are in cache.
  std::uint64_t stats_bytes = 0;
  for (std::size_t i = 0; i < filled; ++i) stats_bytes += ApproxRecordBytes(batch.stats[i]);
  batch.stats.reserve(filled + host_requests_.size() + device_requests_.size());
  ReduceOnHost(&batch, &filled, &stats_bytes, problem);
  batch.stats.erase(batch.stats.begin() + static_cast<std::ptrdiff_t>(filled),
                    batch.stats.end());  // stale records past this step's
  options_.UpdateDeltaCopies();          // after the reduction read the previous values

  StepFinish finish = EnqueueOnDevice(stream, &device_raws, &batch, &raw_reserved, problem);
  return QueueStep(std::move(batch), std::move(finish), stats_bytes, raw_reserved, t0, problem);
}

bool StepCapture::MarkDueCollections(bool capture_registered, bool* any_raw_due) {
  const CollectionSet& collections = *parts_.collections;
  const StepKey& key = parts_.clock->key();
  const int n = collections.size();
  due_stats_.assign(n, 0);
  due_raw_.assign(n, 0);
  if (capture_registered) parts_.raw_requests->Apply(parts_.registry);
  bool any_due = capture_registered && parts_.raw_requests->tensors_waiting() > 0;
  for (int i = 0; i < n && capture_registered; ++i) {
    const Collection& c = collections.at(i);
    if (!c.active) continue;
    due_stats_[i] = c.stats_schedule(key.mode).ShouldSave(key.mode_step);
    due_raw_[i] = c.raw_schedule(key.mode).ShouldSave(key.mode_step);
    any_due = any_due || due_stats_[i] || due_raw_[i];
    *any_raw_due = *any_raw_due || due_raw_[i];
  }
  return any_due;
}

Backend* StepCapture::HostBackend(std::int64_t tensors, std::int64_t elements) const {
  // Small tensors leave a core to the writer (SessionCpuThreads).
  return parts_.cpu_small_steps != nullptr && IsSmallTensorStep(tensors, elements)
             ? parts_.cpu_small_steps
             : parts_.cpu;
}

EarlyCapture StepCapture::CaptureEarly(RegisteredTensor* t, StepBatch* batch,
                                       EarlyCaptureMode mode) {
  const StepClock& clock = *parts_.clock;
  if (!clock.open()) return EarlyCapture::kAtEndStep;
  if (t->saved_epoch == clock.epoch()) return EarlyCapture::kCaptured;
  const CollectionSet& collections = *parts_.collections;
  const StepKey& key = clock.key();
  due_cols_.clear();
  for (int c : t->collections) {
    const Collection& col = collections.at(c);
    if (!col.active) continue;
    if (col.raw_schedule(key.mode).ShouldSave(key.mode_step)) return EarlyCapture::kAtEndStep;
    if (col.stats_schedule(key.mode).ShouldSave(key.mode_step)) due_cols_.push_back(c);
  }
  // A raw request (a rule's, CaptureRawFor) may be waiting for it.
  parts_.raw_requests->Apply(parts_.registry);
  if (parts_.raw_requests->tensors_waiting() > 0) return EarlyCapture::kAtEndStep;
  if (due_cols_.empty()) return EarlyCapture::kNotDue;
  if (options_.NeedsEndStep(*t, due_cols_)) return EarlyCapture::kAtEndStep;
  TensorView& v = resolved_view_;
  if (!ResolveView(*t, &v).ok()) return EarlyCapture::kAtEndStep;  // EndStep records the drop
  if (v.data == nullptr) return EarlyCapture::kNotDue;             // not there at this step
  if (v.space != MemorySpace::kHost) return EarlyCapture::kAtEndStep;
  BackgroundReducer* background = mode != EarlyCaptureMode::kNow && parts_.background != nullptr &&
                                          parts_.background->HasRoomFor(v)
                                      ? parts_.background
                                      : nullptr;
  if (background == nullptr && mode == EarlyCaptureMode::kInBackgroundOrAtEndStep) {
    return EarlyCapture::kAtEndStep;
  }
  if (parts_.rules->counts_records()) parts_.rules->CountRecord(due_cols_);
  t->saved_epoch = clock.epoch();
  early_this_step_ = true;
  std::unique_ptr<BackgroundReducer::Job> job =
      background != nullptr ? background->NewJob() : nullptr;
  std::vector<ReductionRequest> request(job != nullptr ? 0 : 1);
  ReductionRequest& r = job != nullptr ? job->request : request[0];
  r.tensor = v;
  options_.Prepare(t, v, due_cols_, key.global_step, batch, &r.options);
  if (job != nullptr) {
    job->id = t->info.id;
    // A delta's previous values are replaced once the reduction has read
    // them: the thread keeps a copy of what it read, which FinishEarly
    // makes the previous values (Prepare's pending update is this tensor's).
    job->copy_after = options_.has_delta_updates();
    background->Submit(std::move(job));  // HasRoomFor said it fits
    options_.DropDeltaUpdates();
    return EarlyCapture::kQueued;
  }
  std::vector<ReductionResult> results;
  const Status s = HostBackend(1, v.numel)->Reduce(request, &results);
  if (!s.ok() || results.empty()) {
    batch->drops.push_back({t->info.id, "stats", s.ok() ? "no result" : s.message(), 0});
  } else {
    AddResult(t->info.id, request[0].options, std::move(results[0]), batch);
  }
  options_.UpdateDeltaCopies();  // after the reduction read the previous values
  return EarlyCapture::kCaptured;
}

std::size_t StepCapture::FinishEarly(bool wait, const std::function<bool(std::uint32_t)>& unchanged,
                                     StepBatch* batch) {
  BackgroundReducer* background = parts_.background;
  if (background == nullptr) return 0;
  std::size_t taken = 0;
  for (std::unique_ptr<BackgroundReducer::Job> job = background->TakeFinished(wait); job != nullptr;
       job = background->TakeFinished(wait)) {
    ++taken;
    RegisteredTensor* t = parts_.registry->all()[job->id].get();
    if (unchanged && !unchanged(job->id)) {
      // Read while it changed: EndStep captures it instead, if its view
      // still gives data (the caller's view gives none for a tensor whose
      // values at this step are gone). The delta pass has overwritten its
      // previous values with what it read: its delta starts again.
      t->saved_epoch = UINT64_MAX;
      if (job->request.options.delta.next != nullptr) {
        t->has_previous = false;
        batch->drops.push_back({job->id, "delta",
                                "changed in place while it was read: its previous values are "
                                "gone, its deltas start again at its next save",
                                0});
      }
      background->Recycle(std::move(job));
      continue;
    }
    if (!job->status.ok() || job->results.empty()) {
      batch->drops.push_back(
          {job->id, "stats", job->status.ok() ? "no result" : job->status.message(), 0});
    } else {
      AddResult(job->id, job->request.options, std::move(job->results[0]), batch);
    }
    if (job->copy_after) {
      t->previous.swap(job->copy);
      t->has_previous = true;
    }
    background->Recycle(std::move(job));
  }
  return taken;
}

void StepCapture::BuildRequests(bool any_due, bool reusable, StepBatch* batch,
                                std::uint64_t* raw_reserved, DeviceRaws* device_raws,
                                Status* problem) {
  host_ids_.clear();
  host_only_stats_.clear();
  device_label_classes_.clear();
  parts_.rules->StartRequests();
  const std::vector<RegisteredTensor*>& captured = *parts_.captured;
  const bool count_records = parts_.rules->counts_records();
  const std::int64_t global_step = parts_.clock->key().global_step;
  // Whether these requests may serve the next step too: every due tensor a
  // fixed host view whose request holds stats only (no sample seed, delta
  // or predictions that change from step to step).
  bool plan_reusable = reusable;
  bool failed = false;
  const std::size_t registered = any_due ? captured.size() : 0;
  for (std::size_t i = 0; i < registered; ++i) {
    PrefetchForCapture(captured, i);
    RegisteredTensor* t = captured[i];
    due_cols_.clear();
    bool raw = false;
    for (int c : t->collections) {
      if (due_stats_[c]) due_cols_.push_back(c);
      raw = raw || due_raw_[c];
    }
    raw = parts_.raw_requests->Take(t) || raw;
    if (due_cols_.empty() && !raw) continue;
    if (t->saved_epoch == parts_.clock->epoch()) continue;  // captured early
    plan_reusable = plan_reusable && !raw && !t->view_fn;
    TensorView& v = resolved_view_;
    const Status s = ResolveView(*t, &v);
    if (!s.ok()) {
      batch->drops.push_back({t->info.id, "stats", s.message(), 0});
      if (problem->ok()) *problem = s.WithContext("tensor \"" + t->info.name + "\"");
      failed = true;
      continue;
    }
    if (v.data == nullptr) continue;  // not allocated at this step
    const bool on_device = v.space == MemorySpace::kCuda;
    if (!due_cols_.empty()) {
      std::vector<std::uint32_t>& ids = on_device ? device_ids_ : host_ids_;
      std::vector<ReductionRequest>& requests = on_device ? device_requests_ : host_requests_;
      if (ids.size() == requests.size()) requests.emplace_back();
      ReductionRequest& r = requests[ids.size()];
      ids.push_back(t->info.id);
      r.tensor = v;
      options_.Prepare(t, v, due_cols_, global_step, batch, &r.options);
      if (count_records) parts_.rules->CountRecord(due_cols_);
      if (on_device) device_label_classes_.push_back(t->label_classes);
      if (!on_device) host_only_stats_.push_back(RequestsOnlyStats(r.options));
      plan_reusable = plan_reusable && !on_device && host_only_stats_.back();
    }
    if (raw && !on_device) parts_.raw->CopyHost(t->info.id, v, batch, raw_reserved);
    if (raw && on_device) {
      const std::uint64_t bytes = ViewBytes(v);
      if (parts_.raw->Reserve(t->info.id, bytes, batch)) {
        device_raws->views.push_back(v);
        device_raws->ids.push_back(t->info.id);
        device_raws->bytes += bytes;
      }
    }
  }
  plan_.valid = plan_reusable && parts_.raw_requests->tensors_waiting() == 0 &&
                !options_.has_delta_updates() && device_ids_.empty() && !failed;
  plan_.registered = captured.size();
  plan_.due_stats = due_stats_;
}

void StepCapture::ReduceOnHost(StepBatch* batch_out, std::size_t* filled_io,
                               std::uint64_t* stats_bytes_io, Status* problem) {
  StepBatch& batch = *batch_out;
  std::size_t& filled = *filled_io;
  std::uint64_t& stats_bytes = *stats_bytes_io;
  if (host_requests_.empty()) return;
  std::int64_t elements = 0;
  for (const ReductionRequest& r : host_requests_) elements += r.tensor.numel;
  const Status s = HostBackend(static_cast<std::int64_t>(host_requests_.size()), elements)
                       ->Reduce(host_requests_, &host_results_);
  for (std::size_t i = 0; i < host_requests_.size(); ++i) {
    if (!s.ok()) {
      batch.drops.push_back({host_ids_[i], "stats", s.message(), 0});
      continue;
    }
    // The results and records are cold (the reduction streamed the tensors
    // through the caches since): fetch a few ahead.
    constexpr std::size_t kAhead = 4, kBinsAhead = 2;
    if (i + kAhead < host_results_.size()) {
      PrefetchForAddResult(
          host_results_[i + kAhead],
          filled + kAhead < batch.stats.size() ? &batch.stats[filled + kAhead] : nullptr,
          host_only_stats_[i + kAhead]);
    }
    if (i + kBinsAhead < host_results_.size()) PrefetchHistogramSpan(host_results_[i + kBinsAhead]);
    const bool only_stats = host_only_stats_[i];
    const TensorStatsRecord* rec =
        AddResult(host_ids_[i], host_requests_[i].options, std::move(host_results_[i]), &batch,
                  &filled, only_stats);
    if (rec != nullptr) stats_bytes += ApproxRecordBytes(*rec, only_stats);
  }
  if (!s.ok() && problem->ok()) *problem = s.WithContext("CPU reduction");
}

void StepCapture::DropUnreadableRaws(DeviceCapture* dev, DeviceRaws* raws, StepBatch* batch) {
  if (raws->views.empty()) return;
  std::vector<Status> readable;
  dev->CheckRaws(raws->views, &readable);
  std::size_t kept = 0;
  for (std::size_t j = 0; j < raws->views.size(); ++j) {
    const TensorView& v = raws->views[j];
    if (j >= readable.size() || readable[j].ok()) {
      raws->views[kept] = v;
      raws->ids[kept] = raws->ids[j];
      ++kept;
      continue;
    }
    const std::uint64_t bytes = ViewBytes(v);
    batch->drops.push_back({raws->ids[j], "raw", readable[j].message(), bytes});
    parts_.pipeline->ReleaseRaw(bytes);
    parts_.pipeline->CountRawDrop(bytes);
    raws->bytes -= bytes;
  }
  raws->views.resize(kept);
  raws->ids.resize(kept);
}

StepCapture::StepFinish StepCapture::EnqueueOnDevice(CUstream_st* stream,
                                                     DeviceRaws* device_raws_io,
                                                     StepBatch* batch_out,
                                                     std::uint64_t* raw_reserved_io,
                                                     Status* problem) {
  StepBatch& batch = *batch_out;
  DeviceRaws& device_raws = *device_raws_io;
  if (device_requests_.empty() && device_raws.views.empty()) return StepFinish();
  Pipeline* pipeline = parts_.pipeline;
  DevicePool* pool = parts_.device->pool();
  DeviceDeltaStore* delta = parts_.device->delta();
  const Clock::time_point tw = Clock::now();
  bool waited = false;
  DeviceCapture* dev = pool->Acquire(&waited);
  if (waited) pipeline->CountWait(Seconds(Clock::now() - tw));
  DropUnreadableRaws(dev, &device_raws, &batch);
  const Status s = dev->Enqueue(device_requests_, device_raws.views, stream);
  if (delta != nullptr && s.ok()) {
    // After the reductions on `stream`: they read the previous values first.
    const Status copied = delta->Commit(stream);
    if (!copied.ok() && problem->ok()) *problem = copied;
  } else if (delta != nullptr) {
    delta->Abandon();
  }
  if (!s.ok()) {
    pool->Release(dev);
    pipeline->ReleaseRaw(device_raws.bytes);
    for (std::uint32_t id : device_ids_) batch.drops.push_back({id, "stats", s.message(), 0});
    for (std::uint32_t id : device_raws.ids) batch.drops.push_back({id, "raw", s.message(), 0});
    if (problem->ok()) *problem = s;
    return StepFinish();
  }
  *raw_reserved_io += device_raws.bytes;
  std::vector<StatsOptions> options;
  for (const ReductionRequest& r : device_requests_) options.push_back(r.options);
  std::vector<std::pair<DType, std::vector<std::int64_t>>> raw_layout;
  for (const TensorView& v : device_raws.views) raw_layout.emplace_back(v.dtype, ShapeOf(v));
  return [pool, dev, ids = device_ids_, options = std::move(options),
          raw_ids = std::move(device_raws.ids), raw_layout = std::move(raw_layout),
          label_classes = device_label_classes_](StepBatch* b) {
    std::vector<ReductionResult> results;
    std::vector<std::vector<std::uint8_t>> raws;
    const Status got = dev->Collect(&results, &raws);
    pool->Release(dev);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!got.ok() || i >= results.size()) {
        b->drops.push_back({ids[i], "stats", got.ok() ? "no result" : got.message(), 0});
      } else {
        if (i < label_classes.size()) GrowLabelClasses(label_classes[i].get(), results[i]);
        AddResult(ids[i], options[i], std::move(results[i]), b);
      }
    }
    for (std::size_t j = 0; j < raw_ids.size(); ++j) {
      if (!got.ok() || j >= raws.size()) {
        b->drops.push_back({raw_ids[j], "raw", got.ok() ? "no data" : got.message(), 0});
        continue;
      }
      b->raws.push_back(
          {raw_ids[j], raw_layout[j].first, raw_layout[j].second, SharedBytes(std::move(raws[j]))});
    }
  };
}

StepCapture::Outcome StepCapture::QueueStep(StepBatch batch, StepFinish finish,
                                            std::uint64_t stats_bytes, std::uint64_t raw_reserved,
                                            Clock::time_point t0, Status* problem) {
  Pipeline* pipeline = parts_.pipeline;
  PipelineItem item;
  item.declare = parts_.registry->TakeUndeclared();
  const bool has_records =
      !batch.stats.empty() || !batch.scalars.empty() || !batch.raws.empty() || finish;
  if (has_records || !batch.drops.empty()) {
    item.holds_slot = has_records && pipeline->AcquireSlot();
    if (has_records && !item.holds_slot) {  // drop_stats_when_full
      const std::string reason = "writer queue full (" + std::to_string(pipeline->QueueSteps()) +
                                 " steps queued): dropped";
      pipeline->CountRecordsLost(DropAll(&batch, reason));
      stats_bytes = 0;
      if (finish) {
        finish = [inner = std::move(finish), reason, pipeline](StepBatch* b) {
          inner(b);
          pipeline->CountRecordsLost(DropAll(b, reason));
        };
      }
      pipeline->ReleaseRaw(raw_reserved);
      raw_reserved = 0;
    } else if (has_records) {
      pipeline->CountStepCaptured();
    }
    const Clock::time_point t1 = Clock::now();
    const StepClock& clock = *parts_.clock;
    batch.wall_time = WallTime();
    batch.step_seconds = Seconds(t1 - clock.step_start());
    batch.capture_seconds = clock.capture_seconds() + Seconds(t1 - t0);
    item.has_batch = true;
    item.batch = std::move(batch);
    item.stats_bytes = stats_bytes;
    item.raw_bytes = raw_reserved;
    item.finish = std::move(finish);
  }
  Outcome outcome;
  outcome.queued = item.has_batch;
  if (item.has_batch || !item.declare.empty()) {
    const Status s = pipeline->Push(std::move(item));
    if (!s.ok() && problem->ok()) *problem = s;
    outcome.pushed = s.ok() && outcome.queued;
  }
  return outcome;
}

}  // namespace tstat::host
