// Steps: opening them (implicit, BeginStep, resume) and EndStep's capture.
//
// EndStep: find the collections due at the step's mode step; for every
// registered tensor with a due collection, resolve its view (or, when the
// previous step's requests still hold, reuse them: host_plan); reduce all due
// host tensors with ONE Backend::Reduce call; enqueue all due CUDA tensors as
// ONE batch on the caller's stream (collected by the pipeline's collector
// thread); copy raw snapshots (host: now; device: device-to-device staging);
// queue the batch. Nothing here touches the disk.
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "host/session/label_classes.h"
#include "host/session/session_impl.h"

namespace tstat {
namespace {

using host::RegisteredTensor;

double Seconds(Session::Impl::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<std::int64_t> ShapeOf(const TensorView& v) {
  return v.shape.empty() ? std::vector<std::int64_t>{v.numel} : v.shape;
}

// Turns every record of `b` into a drop record (the writer queue was full and
// drop_stats_when_full is set). Returns how many records were dropped.
std::uint64_t DropAll(StepBatch* b, const std::string& reason) {
  const std::uint64_t n = b->stats.size() + b->scalars.size() + b->raws.size();
  for (const TensorStatsRecord& r : b->stats) b->drops.push_back({r.tensor_id, "stats", reason, 0});
  for (const ScalarRecord& r : b->scalars) b->drops.push_back({r.tensor_id, "scalar", reason, 0});
  for (const RawSnapshot& r : b->raws) {
    b->drops.push_back({r.tensor_id, "raw", reason, r.bytes.size()});
  }
  b->stats.clear();
  b->scalars.clear();
  b->raws.clear();
  return n;
}

// Whether a request with options `o` yields stats and an exponent
// histogram only (AddResult's short path).
bool RequestsOnlyStats(const StatsOptions& o) {
  return o.label_classes == 0 && o.linear_histogram.bins == 0 && o.per_channel_axis < 0 &&
         o.sample_count == 0 && o.delta.previous == nullptr && o.confusion.predictions == nullptr &&
         o.count_values.empty();
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

std::string RawCapReason(std::int64_t cap_bytes) {
  return "raw snapshot memory cap (" + std::to_string(cap_bytes >> 20) + " MiB) reached";
}

Status Session::Impl::OpenStepLocked(const StepKey* explicit_key) {
  if (step_open) {
    return Status::FailedPrecondition("step " + std::to_string(key.global_step) +
                                      " is open: call EndStep before BeginStep");
  }
  StepKey k;
  // last + 1 must not wrap: the steps after INT64_MAX are refused, not
  // numbered negative and silently not written.
  const auto exhausted = [](const char* what) {
    return Status::ResourceExhausted(std::string(what) +
                                     " step counter is at INT64_MAX: no step can follow");
  };
  if (explicit_key != nullptr) {
    k = *explicit_key;
    const int m = static_cast<int>(k.mode);
    if (m < 1 || m > 4) return Status::InvalidArgument("invalid mode " + std::to_string(m));
    // A negative global step: the caller numbers the mode step only.
    if (k.global_step < 0 && k.mode != Mode::kGlobal && last_global == INT64_MAX) {
      return exhausted("the global");
    }
    if (k.global_step < 0) k.global_step = k.mode == Mode::kGlobal ? k.mode_step : last_global + 1;
    if (k.global_step <= last_global) {
      return Status::FailedPrecondition(
          "steps going backwards: global step " + std::to_string(k.global_step) +
          " is not after the last step " + std::to_string(last_global) +
          " (give a global step of -1 to number the mode step only)");
    }
    if (k.mode == Mode::kGlobal && k.mode_step != k.global_step) {
      return Status::InvalidArgument("a GLOBAL step's mode_step must equal its global_step");
    }
    if (k.mode_step < 0) return Status::InvalidArgument("mode_step is negative");
    if (k.mode_step <= last_mode_step[m - 1]) {
      return Status::FailedPrecondition(std::string("steps going backwards: ") + ModeName(k.mode) +
                                        " step " + std::to_string(k.mode_step) +
                                        " is not after the last " + ModeName(k.mode) + " step " +
                                        std::to_string(last_mode_step[m - 1]));
    }
    next_mode = k.mode;
  } else {
    k.mode = next_mode;
    if (last_global == INT64_MAX) return exhausted("the global");
    if (last_mode_step[static_cast<int>(k.mode) - 1] == INT64_MAX)
      return exhausted(ModeName(k.mode));
    k.global_step = last_global + 1;
    k.mode_step =
        k.mode == Mode::kGlobal ? k.global_step : last_mode_step[static_cast<int>(k.mode) - 1] + 1;
  }
  key = k;
  step_open = true;
  last_global = k.global_step;
  last_mode_step[static_cast<int>(k.mode) - 1] = k.mode_step;
  std::lock_guard<std::mutex> lock(info_mu);
  info_key = k;
  return Status::OK();
}

TensorStatsRecord* Session::Impl::AddResult(std::uint32_t id, const StatsOptions& options,
                                            ReductionResult&& r, StepBatch* batch,
                                            std::size_t* filled, bool only_stats) {
  if (!r.status.ok()) {
    batch->drops.push_back({id, "stats", r.status.message(), 0});
    return nullptr;
  }
  std::vector<TensorStatsRecord>& records = batch->stats;
  // A step of 1,000 fresh records wrote ~0.5 MB (every member of every
  // record, cold memory), 60% of this function's time; in place, only what
  // a result holds is written.
  const bool reuse = filled != nullptr && *filled < records.size();
  TensorStatsRecord& rec = reuse ? records[*filled] : records.emplace_back();
  if (filled != nullptr) ++*filled;
  rec.tensor_id = id;
  // Label counts come with the stat set (tstat before 0.2 left it out).
  rec.has_stats = true;
  rec.stats = r.stats;
  // Trimmed to its non-zero bins: only the span the engine set is read (the
  // bins were written on the reducing core; all 279 missed cache here).
  if (r.exponent_histogram) {
    std::vector<std::uint64_t> buffer;
    if (rec.exponent_histogram) buffer = std::move(rec.exponent_histogram->counts);
    rec.exponent_histogram.emplace(*r.exponent_histogram, std::move(buffer));
  } else {
    rec.exponent_histogram.reset();
  }
  // The rest is written only when asked for: of every member's lines, the
  // writer's core read them last, so each store costs a transfer (and an
  // optional of a trivially copyable payload, such as the delta, is copied
  // whole even when empty).
  if (only_stats) {
    assert(host::HasOnlyStats(rec));
    return &rec;
  }
  rec.linear_histogram = std::move(r.linear_histogram);
  rec.per_channel = std::move(r.per_channel);
  rec.label_counts = std::move(r.label_counts);
  rec.sample = std::move(r.sample);
  rec.delta = std::move(r.delta);
  rec.confusion = std::move(r.confusion);
  if (!options.count_values.empty()) {
    rec.count_values = options.count_values;
    rec.value_counts = std::move(r.value_counts);
  } else {
    rec.count_values.clear();
    rec.value_counts.clear();
  }
  return &rec;
}

void Session::Impl::SnapshotHost(std::uint32_t id, const TensorView& v, StepBatch* batch,
                                 std::uint64_t* reserved) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(v.numel) * DTypeSize(v.dtype);
  if (!pipeline->ReserveRaw(bytes)) {
    batch->drops.push_back({id, "raw", RawCapReason(config.pipeline.raw_memory_cap_bytes), bytes});
    pipeline->CountRawDrop(bytes);
    return;
  }
  *reserved += bytes;
  batch->raws.push_back({id, v.dtype, ShapeOf(v), snapshot_buffers->Copy(v.data, bytes)});
}

void Session::Impl::BuildRequests(bool any_due, bool reusable, StepBatch* batch,
                                  std::uint64_t* raw_reserved, DeviceRaws* device_raws,
                                  Status* problem) {
  host_ids.clear();
  host_only_stats.clear();
  device_label_classes.clear();
  plan_counts = RulesCounts();
  // Whether these requests may serve the next step too: every due tensor a
  // fixed host view whose request holds stats only (no sample seed, delta
  // or predictions that change from step to step).
  bool plan_reusable = reusable;
  bool failed = false;
  const std::size_t registered = any_due ? captured.size() : 0;
  for (std::size_t i = 0; i < registered; ++i) {
    PrefetchForCapture(captured, i);
    RegisteredTensor* t = captured[i];
    due_cols.clear();
    bool raw = false;
    for (int c : t->collections) {
      if (due_stats[c]) due_cols.push_back(c);
      raw = raw || due_raw[c];
    }
    raw = TakeRequestedRaw(t) || raw;
    if (due_cols.empty() && !raw) continue;
    plan_reusable = plan_reusable && !raw && !t->view_fn;
    TensorView& v = resolved_view;
    const Status s = host::ResolveView(*t, &v);
    if (!s.ok()) {
      batch->drops.push_back({t->info.id, "stats", s.message(), 0});
      if (problem->ok()) *problem = s.WithContext("tensor \"" + t->info.name + "\"");
      failed = true;
      continue;
    }
    if (v.data == nullptr) continue;  // not allocated at this step
    const bool on_device = v.space == MemorySpace::kCuda;
    if (!due_cols.empty()) {
      std::vector<std::uint32_t>& ids = on_device ? device_ids : host_ids;
      std::vector<ReductionRequest>& requests = on_device ? device_requests : host_requests;
      if (ids.size() == requests.size()) requests.emplace_back();
      ReductionRequest& r = requests[ids.size()];
      ids.push_back(t->info.id);
      r.tensor = v;
      PrepareOptions(t, v, due_cols, batch, &r.options);
      if (first_rules_collection < collections->size()) CountRulesRecord(due_cols);
      if (on_device) device_label_classes.push_back(t->label_classes);
      if (!on_device) host_only_stats.push_back(RequestsOnlyStats(r.options));
      plan_reusable = plan_reusable && !on_device && host_only_stats.back();
    }
    if (raw && !on_device) SnapshotHost(t->info.id, v, batch, raw_reserved);
    if (raw && on_device) {
      const std::uint64_t bytes = static_cast<std::uint64_t>(v.numel) * DTypeSize(v.dtype);
      if (!pipeline->ReserveRaw(bytes)) {
        batch->drops.push_back(
            {t->info.id, "raw", RawCapReason(config.pipeline.raw_memory_cap_bytes), bytes});
        pipeline->CountRawDrop(bytes);
      } else {
        device_raws->views.push_back(v);
        device_raws->ids.push_back(t->info.id);
        device_raws->bytes += bytes;
      }
    }
  }
  host_plan.valid = plan_reusable && raw_requested_tensors == 0 && delta_updates.empty() &&
                    device_ids.empty() && !failed;
  host_plan.registered = captured.size();
  host_plan.due_stats = due_stats;
}

void Session::Impl::DropUnreadableRaws(host::DeviceCapture* dev, DeviceRaws* raws,
                                       StepBatch* batch) {
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
    const std::uint64_t bytes = static_cast<std::uint64_t>(v.numel) * DTypeSize(v.dtype);
    batch->drops.push_back({raws->ids[j], "raw", readable[j].message(), bytes});
    pipeline->ReleaseRaw(bytes);
    pipeline->CountRawDrop(bytes);
    raws->bytes -= bytes;
  }
  raws->views.resize(kept);
  raws->ids.resize(kept);
}

Status Session::Impl::EndStepLocked(CUstream_st* stream, bool capture_registered) {
  const Clock::time_point t0 = Clock::now();
  BeforeStepCapture();  // rules of earlier steps acted on; RUN/STOP, RUN/capture/ polled
  if (!step_open) TSTAT_RETURN_IF_ERROR(OpenStepLocked(nullptr));
  StepBatch batch = std::move(pending);
  pending = StepBatch();
  std::uint64_t raw_reserved = pending_raw_bytes;
  pending_raw_bytes = 0;
  batch.key = key;
  Status problem;  // the first per-tensor problem, returned after queuing the rest

  bool any_raw_due = false;
  const bool any_due = MarkDueCollections(capture_registered, &any_raw_due);
  device_ids.clear();
  DeviceRaws device_raws;
  // The previous step's host requests serve again when nothing they depend
  // on can have changed (host_plan): the same tensors registered, the same
  // collections due, no raw snapshot due or requested.
  const bool reuse_plan = host_plan.valid && capture_registered && !any_raw_due &&
                          raw_requested_tensors == 0 && host_plan.registered == captured.size() &&
                          host_plan.due_stats == due_stats;
  if (!reuse_plan) {
    // The requests may serve the next step only if no raw snapshot is due.
    BuildRequests(any_due, capture_registered && !any_raw_due, &batch, &raw_reserved, &device_raws,
                  &problem);
  }

  host_requests.resize(host_ids.size());  // past this step's: earlier steps' requests
  device_requests.resize(device_ids.size());
  total_counts.records += plan_counts.records;
  total_counts.rules_only += plan_counts.rules_only;
  total_counts.extended += plan_counts.extended;

  // The records of a step the writer is done with, overwritten in place (no
  // fresh pages, no regrowth copies), unless ad-hoc saves already started
  // this step's vector.
  std::size_t filled = batch.stats.size();
  if (batch.stats.capacity() == 0) {
    batch.stats = pipeline->TakeSpareRecords();
    filled = 0;
  }
  // ApproxRecordBytes of the records, summed while they are in cache.
  std::uint64_t stats_bytes = 0;
  for (std::size_t i = 0; i < filled; ++i) stats_bytes += host::ApproxRecordBytes(batch.stats[i]);
  batch.stats.reserve(filled + host_requests.size() + device_requests.size());
  ReduceOnHost(&batch, &filled, &stats_bytes, &problem);
  batch.stats.erase(batch.stats.begin() + static_cast<std::ptrdiff_t>(filled),
                    batch.stats.end());  // stale records past this step's
  UpdateDeltaCopies();                   // after the reduction read the previous values

  StepFinish finish = EnqueueOnDevice(stream, &device_raws, &batch, &raw_reserved, &problem);
  const bool queued =
      QueueStep(std::move(batch), std::move(finish), stats_bytes, raw_reserved, t0, &problem);
  CloseStep(t0, queued);
  return problem;
}

bool Session::Impl::MarkDueCollections(bool capture_registered, bool* any_raw_due) {
  const int n = collections->size();
  due_stats.assign(n, 0);
  due_raw.assign(n, 0);
  if (capture_registered) ApplyRawRequests();
  bool any_due = capture_registered && raw_requested_tensors > 0;
  for (int i = 0; i < n && capture_registered; ++i) {
    const host::Collection& c = collections->at(i);
    if (!c.active) continue;
    due_stats[i] = c.stats_schedule(key.mode).ShouldSave(key.mode_step);
    due_raw[i] = c.raw_schedule(key.mode).ShouldSave(key.mode_step);
    any_due = any_due || due_stats[i] || due_raw[i];
    *any_raw_due = *any_raw_due || due_raw[i];
  }
  return any_due;
}

void Session::Impl::ReduceOnHost(StepBatch* batch_out, std::size_t* filled_io,
                                 std::uint64_t* stats_bytes_io, Status* problem) {
  StepBatch& batch = *batch_out;
  std::size_t& filled = *filled_io;
  std::uint64_t& stats_bytes = *stats_bytes_io;
  if (host_requests.empty()) return;
  // Small tensors leave a core to the writer (SessionCpuThreads).
  std::int64_t elements = 0;
  for (const ReductionRequest& r : host_requests) elements += r.tensor.numel;
  const auto tensors = static_cast<std::int64_t>(host_requests.size());
  Backend* engine = cpu_small_steps && host::IsSmallTensorStep(tensors, elements)
                        ? cpu_small_steps.get()
                        : cpu.get();
  const Status s = engine->Reduce(host_requests, &host_results);
  for (std::size_t i = 0; i < host_requests.size(); ++i) {
    if (!s.ok()) {
      batch.drops.push_back({host_ids[i], "stats", s.message(), 0});
      continue;
    }
    // The results and records are cold (the reduction streamed the tensors
    // through the caches since): fetch a few ahead.
    constexpr std::size_t kAhead = 4, kBinsAhead = 2;
    if (i + kAhead < host_results.size()) {
      PrefetchForAddResult(
          host_results[i + kAhead],
          filled + kAhead < batch.stats.size() ? &batch.stats[filled + kAhead] : nullptr,
          host_only_stats[i + kAhead]);
    }
    if (i + kBinsAhead < host_results.size()) PrefetchHistogramSpan(host_results[i + kBinsAhead]);
    const bool only_stats = host_only_stats[i];
    const TensorStatsRecord* rec =
        AddResult(host_ids[i], host_requests[i].options, std::move(host_results[i]), &batch,
                  &filled, only_stats);
    if (rec != nullptr) stats_bytes += host::ApproxRecordBytes(*rec, only_stats);
  }
  if (!s.ok() && problem->ok()) *problem = s.WithContext("CPU reduction");
}

Session::Impl::StepFinish Session::Impl::EnqueueOnDevice(CUstream_st* stream,
                                                         DeviceRaws* device_raws_io,
                                                         StepBatch* batch_out,
                                                         std::uint64_t* raw_reserved_io,
                                                         Status* problem) {
  StepBatch& batch = *batch_out;
  DeviceRaws& device_raws = *device_raws_io;
  std::uint64_t& raw_reserved = *raw_reserved_io;
  StepFinish finish;
  if (!device_requests.empty() || !device_raws.views.empty()) {
    const Clock::time_point tw = Clock::now();
    bool waited = false;
    host::DeviceCapture* dev = device_pool->Acquire(&waited);
    if (waited) pipeline->CountWait(Seconds(Clock::now() - tw));
    DropUnreadableRaws(dev, &device_raws, &batch);
    const Status s = dev->Enqueue(device_requests, device_raws.views, stream);
    if (device_delta && s.ok()) {
      // After the reductions on `stream`: they read the previous values first.
      const Status copied = device_delta->Commit(stream);
      if (!copied.ok() && problem->ok()) *problem = copied;
    } else if (device_delta) {
      device_delta->Abandon();
    }
    if (!s.ok()) {
      device_pool->Release(dev);
      pipeline->ReleaseRaw(device_raws.bytes);
      for (std::uint32_t id : device_ids) batch.drops.push_back({id, "stats", s.message(), 0});
      for (std::uint32_t id : device_raws.ids) batch.drops.push_back({id, "raw", s.message(), 0});
      if (problem->ok()) *problem = s;
    } else {
      raw_reserved += device_raws.bytes;
      std::vector<StatsOptions> options;
      for (const ReductionRequest& r : device_requests) options.push_back(r.options);
      std::vector<std::pair<DType, std::vector<std::int64_t>>> raw_layout;
      for (const TensorView& v : device_raws.views) raw_layout.emplace_back(v.dtype, ShapeOf(v));
      finish = [pool = device_pool.get(), dev, ids = device_ids, options = std::move(options),
                raw_ids = std::move(device_raws.ids), raw_layout = std::move(raw_layout),
                label_classes = device_label_classes](StepBatch* b) {
        std::vector<ReductionResult> results;
        std::vector<std::vector<std::uint8_t>> raws;
        const Status got = dev->Collect(&results, &raws);
        pool->Release(dev);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          if (!got.ok() || i >= results.size()) {
            b->drops.push_back({ids[i], "stats", got.ok() ? "no result" : got.message(), 0});
          } else {
            if (i < label_classes.size())
              host::GrowLabelClasses(label_classes[i].get(), results[i]);
            AddResult(ids[i], options[i], std::move(results[i]), b);
          }
        }
        for (std::size_t j = 0; j < raw_ids.size(); ++j) {
          if (!got.ok() || j >= raws.size()) {
            b->drops.push_back({raw_ids[j], "raw", got.ok() ? "no data" : got.message(), 0});
            continue;
          }
          b->raws.push_back({raw_ids[j], raw_layout[j].first, raw_layout[j].second,
                             SharedBytes(std::move(raws[j]))});
        }
      };
    }
  }

  return finish;
}

bool Session::Impl::QueueStep(StepBatch batch, StepFinish finish, std::uint64_t stats_bytes,
                              std::uint64_t raw_reserved, Clock::time_point t0, Status* problem) {
  host::PipelineItem item;
  item.declare = registry.TakeUndeclared();
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
        finish = [inner = std::move(finish), reason, p = pipeline.get()](StepBatch* b) {
          inner(b);
          p->CountRecordsLost(DropAll(b, reason));
        };
      }
      pipeline->ReleaseRaw(raw_reserved);
      raw_reserved = 0;
    } else if (has_records) {
      pipeline->CountStepCaptured();
    }
    const Clock::time_point t1 = Clock::now();
    batch.wall_time = WallTime();
    batch.step_seconds = Seconds(t1 - step_start);
    batch.capture_seconds = capture_seconds + Seconds(t1 - t0);
    item.has_batch = true;
    item.batch = std::move(batch);
    item.stats_bytes = stats_bytes;
    item.raw_bytes = raw_reserved;
    item.finish = std::move(finish);
  }
  const bool queued = item.has_batch;
  if (item.has_batch || !item.declare.empty()) {
    const Status s = pipeline->Push(std::move(item));
    if (!s.ok() && problem->ok()) *problem = s;
    if (s.ok() && queued) ++batches_pushed;
  }

  return queued;
}

void Session::Impl::CloseStep(Clock::time_point t0, bool queued) {
  const Clock::time_point t_end = Clock::now();
  StepTiming timing{key, Seconds(t_end - step_start), capture_seconds + Seconds(t_end - t0)};
  {
    std::lock_guard<std::mutex> lock(info_mu);
    last_timing = timing;
  }
  // Every step, saved or not: the run's capture overhead (stored with the counters).
  pipeline->CountStepTime(timing.step_seconds, timing.capture_seconds, queued);
  step_open = false;
  ++epoch;
  capture_seconds = 0.0;
  step_start = t_end;
}

}  // namespace tstat
