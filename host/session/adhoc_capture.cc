// RegisterTensor, SaveScalar and SaveTensor.
#include <chrono>
#include <string>

#include "host/session/label_classes.h"
#include "host/session/session_impl.h"

namespace tstat {
namespace {

using host::RegisteredTensor;

std::string Ctx(const std::string& name) { return "tensor \"" + name + "\""; }

std::vector<std::string> Names(const host::CollectionSet& set, const std::vector<int>& cols) {
  std::vector<std::string> out;
  for (int c : cols) out.push_back(set.at(c).name);
  return out;
}

}  // namespace

Result<RegisteredTensor*> Session::Impl::AddAdhoc(const std::string& name, TensorKind kind,
                                                  const TensorView& view, std::vector<int> cols) {
  RegisteredTensor n;
  n.info.name = name;
  n.info.kind = kind;
  n.info.dtype = kind == TensorKind::kScalar ? DType::kFloat64 : view.dtype;
  if (kind == TensorKind::kTensor) {
    n.info.shape = host::ShapeOf(view);
    n.info.space = view.space;
  }
  n.info.collections = Names(*collections, cols);
  n.collections = std::move(cols);
  n.adhoc = true;
  n.name_hash = host::NameHash(name);
  rules.AddNeeds(&n);
  return registry.Add(std::move(n));
}

Result<std::uint32_t> Session::Impl::RegisterLocked(const TensorSpec& spec) {
  TSTAT_RETURN_IF_ERROR(host::CheckTensorName(spec.name));
  const std::string ctx = Ctx(spec.name);
  TSTAT_RETURN_IF_ERROR(host::CheckViewShape(spec.view).WithContext(ctx));
  if (!spec.view_fn && spec.view.data == nullptr) {
    return Status::InvalidArgument(
        ctx + ": null data pointer (register a view callback for tensors allocated later)");
  }
  if (spec.unit_axis < -1 || spec.unit_axis == 0 || spec.unit_axis > 63) {
    return Status::InvalidArgument(ctx +
                                   ": unit_axis must be -1 (by rank) or an axis from 1 to 63 "
                                   "(0 is the batch's), got " +
                                   std::to_string(spec.unit_axis));
  }
  if (registry.Find(spec.name) != nullptr) {
    return Status::InvalidArgument("duplicate tensor name \"" + spec.name +
                                   "\": already registered");
  }
  Result<std::vector<int>> cols =
      collections->Select(spec.name, TensorKind::kTensor, spec.collections);
  if (!cols.ok()) return cols.status().WithContext(ctx);
  if (spec.view.space == MemorySpace::kCuda) {
    TSTAT_RETURN_IF_ERROR(device.EnsurePool(spec.view.device).WithContext(ctx));
  }
  RegisteredTensor t;
  t.info.name = spec.name;
  t.info.kind = TensorKind::kTensor;
  t.info.dtype = spec.view.dtype;
  t.info.shape = host::ShapeOf(spec.view);
  t.info.space = spec.view.space;
  t.info.collections = Names(*collections, cols.value());
  t.collections = std::move(cols).value();
  t.view = spec.view;
  t.view_fn = spec.view_fn;
  if (t.view_fn) t.view.data = nullptr;
  t.unit_axis = spec.unit_axis;
  t.name_hash = host::NameHash(spec.name);
  rules.AddNeeds(&t);
  TSTAT_ASSIGN_OR_RETURN(RegisteredTensor * added, registry.Add(std::move(t)));
  captured.push_back(added);
  return added->info.id;
}

Status Session::Impl::SaveScalarLocked(const std::string& name, double value) {
  TSTAT_RETURN_IF_ERROR(host::CheckTensorName(name).WithContext("scalar"));
  RegisteredTensor* t = registry.Find(name);
  if (t != nullptr && t->info.kind != TensorKind::kScalar) {
    return Status::InvalidArgument("\"" + name + "\" is a tensor, not a scalar");
  }
  if (t == nullptr) {
    TSTAT_ASSIGN_OR_RETURN(std::vector<int> cols,
                           collections->Select(name, TensorKind::kScalar, {}));
    TSTAT_ASSIGN_OR_RETURN(t, AddAdhoc(name, TensorKind::kScalar, TensorView(), std::move(cols)));
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (t->saved_epoch == clock.epoch()) {  // saved before in this step: the last value wins
    for (ScalarRecord& r : pending.scalars) {
      if (r.tensor_id == t->info.id) {
        r.value = value;
        r.wall_time = now;
      }
    }
    return Status::OK();
  }
  pending.scalars.push_back({t->info.id, value, now});
  t->saved_epoch = clock.epoch();
  return Status::OK();
}

Status Session::Impl::SaveTensorLocked(const std::string& name, const TensorView& view,
                                       const SaveTensorOptions& options) {
  TSTAT_RETURN_IF_ERROR(host::CheckTensorName(name));
  const std::string ctx = Ctx(name);
  TSTAT_RETURN_IF_ERROR(host::CheckViewShape(view).WithContext(ctx));
  if (view.data == nullptr) return Status::InvalidArgument(ctx + ": null data pointer");
  RegisteredTensor* t = registry.Find(name);
  if (t != nullptr) {
    if (!t->adhoc || t->info.kind != TensorKind::kTensor) {
      return Status::InvalidArgument(
          ctx + (t->info.kind == TensorKind::kScalar
                     ? ": the name is a scalar's"
                     : ": registered tensors are captured by EndStep, not SaveTensor"));
    }
    if (t->info.dtype != view.dtype) {
      return Status::InvalidArgument(ctx + ": dtype mismatch: saved as " +
                                     DTypeName(t->info.dtype) + " before, now " +
                                     DTypeName(view.dtype));
    }
    if (t->info.space != view.space) {
      return Status::InvalidArgument(ctx + ": memory space differs from its first save");
    }
    if (t->saved_epoch == clock.epoch()) {
      return Status::FailedPrecondition(ctx + ": already saved at this step");
    }
  } else {
    TSTAT_ASSIGN_OR_RETURN(std::vector<int> cols,
                           collections->Select(name, TensorKind::kTensor, options.collections));
    if (view.space == MemorySpace::kCuda) {
      TSTAT_RETURN_IF_ERROR(device.EnsurePool(view.device).WithContext(ctx));
    }
    TSTAT_ASSIGN_OR_RETURN(t, AddAdhoc(name, TensorKind::kTensor, view, std::move(cols)));
  }
  // Confusion is for registered tensors (its predictions are read at
  // EndStep); ad-hoc saves get the rest, delta for host tensors.
  const host::CaptureOptions co = host::MergeOptions(*collections, t->collections);
  StatsOptions o = co.stats;
  o.delta = DeltaOptions();
  o.confusion = ConfusionOptions();
  rules.ApplyNeeds(co, t, view, registry, &o);
  const std::size_t view_bytes = host::ViewBytes(view);
  const bool delta = co.delta && view.space == MemorySpace::kHost;
  if (delta && t->has_previous && t->previous.size() == view_bytes) {
    o.delta = co.stats.delta;
    o.delta.previous = t->previous.data();
  }
  const std::int64_t step = clock.SaveGlobalStep();
  o.sample_seed = t->name_hash ^ static_cast<std::uint64_t>(step);
  std::vector<ReductionResult> results;
  const std::vector<ReductionRequest> requests{{view, o}};
  if (view.space == MemorySpace::kHost) {
    TSTAT_RETURN_IF_ERROR(cpu->Reduce(requests, &results).WithContext(ctx));
    if (!results[0].status.ok()) return results[0].status.WithContext(ctx);
    host::AddResult(t->info.id, o, std::move(results[0]), &pending);
    if (delta) {
      t->previous.assign(static_cast<const std::uint8_t*>(view.data),
                         static_cast<const std::uint8_t*>(view.data) + view_bytes);
      t->has_previous = true;
    }
    if (options.raw) raw->CopyHost(t->info.id, view, &pending, &pending_raw_bytes);
  } else {
    const std::uint64_t bytes = host::ViewBytes(view);
    const bool raw_due = options.raw && raw->Reserve(t->info.id, bytes, &pending);
    host::DevicePool* pool = device.pool();
    bool waited = false;
    host::DeviceCapture* dev = pool->Acquire(&waited);
    std::vector<std::vector<std::uint8_t>> raw_bytes;
    const std::vector<TensorView> raws =
        raw_due ? std::vector<TensorView>{view} : std::vector<TensorView>{};
    std::vector<Status> readable;
    dev->CheckRaws(raws, &readable);
    Status s = readable.empty() ? Status::OK() : readable[0];
    if (s.ok()) s = dev->Enqueue(requests, raws, options.stream);
    if (s.ok()) s = dev->Collect(&results, &raw_bytes);
    pool->Release(dev);
    if (s.ok() && (results.empty() || (raw_due && raw_bytes.empty()))) {
      s = Status::Internal("the device returned no result");
    }
    if (s.ok() && !results[0].status.ok()) s = results[0].status;
    if (!s.ok()) {
      if (raw_due) pipeline->ReleaseRaw(bytes);
      return s.WithContext(ctx);
    }
    host::GrowLabelClasses(t->label_classes.get(), results[0]);
    host::AddResult(t->info.id, o, std::move(results[0]), &pending);
    if (raw_due) {
      pending_raw_bytes += bytes;
      pending.raws.push_back(
          {t->info.id, view.dtype, host::ShapeOf(view), SharedBytes(std::move(raw_bytes[0]))});
    }
  }
  t->saved_epoch = clock.epoch();
  return Status::OK();
}

}  // namespace tstat
