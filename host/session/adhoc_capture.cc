// RegisterTensor, SaveScalar and SaveTensor.
#include <chrono>
#include <string>

#include "host/session/label_classes.h"
#include "host/session/session_impl.h"

namespace tstat {
namespace {

using host::RegisteredTensor;

std::vector<std::int64_t> ShapeOf(const TensorView& v) {
  return v.shape.empty() ? std::vector<std::int64_t>{v.numel} : v.shape;
}

std::string Ctx(const std::string& name) { return "tensor \"" + name + "\""; }

std::vector<std::string> Names(const host::CollectionSet& set, const std::vector<int>& cols) {
  std::vector<std::string> out;
  for (int c : cols) out.push_back(set.at(c).name);
  return out;
}

}  // namespace

Status Session::Impl::EnsureDevicePool(int device) {
  if (device != config.pipeline.cuda_device) {
    return Status::InvalidArgument("the tensor is on CUDA device " + std::to_string(device) +
                                   ", the session captures device " +
                                   std::to_string(config.pipeline.cuda_device) +
                                   " (pipeline.cuda_device)");
  }
  if (device_pool) return Status::OK();
  const host::DeviceCaptureFactory factory =
      device_factory ? device_factory : host::CreateCudaDeviceCapture;
  std::vector<std::unique_ptr<host::DeviceCapture>> members;
  for (int i = 0; i < config.pipeline.cuda_inflight; ++i) {
    TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<host::DeviceCapture> m, factory(device));
    members.push_back(std::move(m));
  }
  device_pool = std::make_unique<host::DevicePool>(std::move(members));
  return Status::OK();
}

Result<std::uint32_t> Session::Impl::RegisterLocked(const TensorSpec& spec) {
  TSTAT_RETURN_IF_ERROR(host::CheckTensorName(spec.name));
  const std::string ctx = Ctx(spec.name);
  TSTAT_RETURN_IF_ERROR(host::CheckViewShape(spec.view).WithContext(ctx));
  if (!spec.view_fn && spec.view.data == nullptr) {
    return Status::InvalidArgument(
        ctx + ": null data pointer (register a view callback for tensors allocated later)");
  }
  if (registry.Find(spec.name) != nullptr) {
    return Status::InvalidArgument("duplicate tensor name \"" + spec.name +
                                   "\": already registered");
  }
  Result<std::vector<int>> cols =
      collections->Select(spec.name, TensorKind::kTensor, spec.collections);
  if (!cols.ok()) return cols.status().WithContext(ctx);
  if (spec.view.space == MemorySpace::kCuda) {
    TSTAT_RETURN_IF_ERROR(EnsureDevicePool(spec.view.device).WithContext(ctx));
  }
  RegisteredTensor t;
  t.info.name = spec.name;
  t.info.kind = TensorKind::kTensor;
  t.info.dtype = spec.view.dtype;
  t.info.shape = ShapeOf(spec.view);
  t.info.space = spec.view.space;
  t.info.collections = Names(*collections, cols.value());
  t.collections = std::move(cols).value();
  t.view = spec.view;
  t.view_fn = spec.view_fn;
  if (t.view_fn) t.view.data = nullptr;
  t.name_hash = host::NameHash(spec.name);
  AddRulesNeeds(&t);
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
    RegisteredTensor s;
    s.info.name = name;
    s.info.kind = TensorKind::kScalar;
    s.info.dtype = DType::kFloat64;
    s.info.collections = Names(*collections, cols);
    s.collections = std::move(cols);
    s.adhoc = true;
    s.name_hash = host::NameHash(name);
    AddRulesNeeds(&s);
    TSTAT_ASSIGN_OR_RETURN(t, registry.Add(std::move(s)));
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (t->saved_epoch == epoch) {  // saved before in this step: the last value wins
    for (ScalarRecord& r : pending.scalars) {
      if (r.tensor_id == t->info.id) {
        r.value = value;
        r.wall_time = now;
      }
    }
    return Status::OK();
  }
  pending.scalars.push_back({t->info.id, value, now});
  t->saved_epoch = epoch;
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
    if (t->saved_epoch == epoch) {
      return Status::FailedPrecondition(ctx + ": already saved at this step");
    }
  } else {
    TSTAT_ASSIGN_OR_RETURN(std::vector<int> cols,
                           collections->Select(name, TensorKind::kTensor, options.collections));
    if (view.space == MemorySpace::kCuda) {
      TSTAT_RETURN_IF_ERROR(EnsureDevicePool(view.device).WithContext(ctx));
    }
    RegisteredTensor n;
    n.info.name = name;
    n.info.kind = TensorKind::kTensor;
    n.info.dtype = view.dtype;
    n.info.shape = ShapeOf(view);
    n.info.space = view.space;
    n.info.collections = Names(*collections, cols);
    n.collections = std::move(cols);
    n.adhoc = true;
    n.name_hash = host::NameHash(name);
    AddRulesNeeds(&n);
    TSTAT_ASSIGN_OR_RETURN(t, registry.Add(std::move(n)));
  }
  // Confusion is for registered tensors (its predictions are read at
  // EndStep); ad-hoc saves get the rest, delta for host tensors.
  const host::CaptureOptions co = host::MergeOptions(*collections, t->collections);
  StatsOptions o = co.stats;
  o.delta = DeltaOptions();
  o.confusion = ConfusionOptions();
  ApplyRulesNeeds(co, t, view, &o);
  const std::size_t view_bytes = static_cast<std::size_t>(view.numel) * DTypeSize(view.dtype);
  const bool delta = co.delta && view.space == MemorySpace::kHost;
  if (delta && t->has_previous && t->previous.size() == view_bytes) {
    o.delta = co.stats.delta;
    o.delta.previous = t->previous.data();
  }
  const std::int64_t step = step_open ? key.global_step : last_global + 1;
  o.sample_seed = t->name_hash ^ static_cast<std::uint64_t>(step);
  std::vector<ReductionResult> results;
  const std::vector<ReductionRequest> requests{{view, o}};
  if (view.space == MemorySpace::kHost) {
    TSTAT_RETURN_IF_ERROR(cpu->Reduce(requests, &results).WithContext(ctx));
    if (!results[0].status.ok()) return results[0].status.WithContext(ctx);
    AddResult(t->info.id, o, std::move(results[0]), &pending);
    if (delta) {
      t->previous.assign(static_cast<const std::uint8_t*>(view.data),
                         static_cast<const std::uint8_t*>(view.data) + view_bytes);
      t->has_previous = true;
    }
    if (options.raw) SnapshotHost(t->info.id, view, &pending, &pending_raw_bytes);
  } else {
    const std::uint64_t bytes = static_cast<std::uint64_t>(view.numel) * DTypeSize(view.dtype);
    const bool raw = options.raw && pipeline->ReserveRaw(bytes);
    if (options.raw && !raw) {
      pending.drops.push_back(
          {t->info.id, "raw", RawCapReason(config.pipeline.raw_memory_cap_bytes), bytes});
      pipeline->CountRawDrop(bytes);
    }
    bool waited = false;
    host::DeviceCapture* dev = device_pool->Acquire(&waited);
    std::vector<std::vector<std::uint8_t>> raw_bytes;
    const std::vector<TensorView> raws =
        raw ? std::vector<TensorView>{view} : std::vector<TensorView>{};
    std::vector<Status> readable;
    dev->CheckRaws(raws, &readable);
    Status s = readable.empty() ? Status::OK() : readable[0];
    if (s.ok()) s = dev->Enqueue(requests, raws, options.stream);
    if (s.ok()) s = dev->Collect(&results, &raw_bytes);
    device_pool->Release(dev);
    if (s.ok() && (results.empty() || (raw && raw_bytes.empty()))) {
      s = Status::Internal("the device returned no result");
    }
    if (s.ok() && !results[0].status.ok()) s = results[0].status;
    if (!s.ok()) {
      if (raw) pipeline->ReleaseRaw(bytes);
      return s.WithContext(ctx);
    }
    host::GrowLabelClasses(t->label_classes.get(), results[0]);
    AddResult(t->info.id, o, std::move(results[0]), &pending);
    if (raw) {
      pending_raw_bytes += bytes;
      pending.raws.push_back(
          {t->info.id, view.dtype, ShapeOf(view), SharedBytes(std::move(raw_bytes[0]))});
    }
  }
  t->saved_epoch = epoch;
  return Status::OK();
}

}  // namespace tstat
