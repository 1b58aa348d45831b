// Session creation and the public methods: each takes the session lock,
// times itself into the step's capture time, and forwards to Session::Impl.
#include "tstat/session.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include "host/pipeline/background_thread.h"
#include "host/pipeline/null_sink.h"
#include "host/session/session_impl.h"
#include "host/session/session_internal.h"

namespace tstat {

struct SessionFactory {
  static std::unique_ptr<Session> Make(std::unique_ptr<Session::Impl> impl) {
    return std::unique_ptr<Session>(new Session(std::move(impl)));
  }
};

namespace {

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

Status Closed() { return Status::FailedPrecondition("the session is closed"); }

}  // namespace

bool host::IsSmallTensorStep(std::int64_t tensors, std::int64_t elements) {
  return tensors > 0 && elements < kSmallTensorElements * tensors;
}

int SessionCpuThreads(const PipelineConfig& pipeline, std::int64_t tensors, std::int64_t elements) {
  if (pipeline.cpu_threads > 0) return pipeline.cpu_threads;
  const int cores = DefaultCpuThreads();
  return host::IsSmallTensorStep(tensors, elements) && cores > 1 ? cores - 1 : cores;
}

Session::Impl::Impl(const SessionConfig& config_in,
                    std::unique_ptr<host::CollectionSet> collections_in,
                    host::DeviceCaptureFactory device_factory)
    : config(config_in),
      collections(std::move(collections_in)),
      device(std::move(device_factory), config.pipeline),
      rules(&config, collections.get(), &stop, &raw_requests) {}

Status Session::Impl::Start(std::unique_ptr<io::StepSink> sink,
                            std::shared_ptr<host::BatchObserver> observer) {
  if (!sink && config.dry_run) sink = std::make_unique<host::NullSink>();
  // The run's files (no injected sink), or the in-process findings log.
  if (!config.out_dir.empty() && !config.dry_run && (!sink || config.rules.enabled)) {
    std::error_code ec;
    std::filesystem::create_directories(config.out_dir, ec);
    if (ec) {
      return Status::IoError("cannot create the run directory " + config.out_dir + ": " +
                             ec.message());
    }
  }
  // The rules first: a bad rules config fails before the run is opened.
  TSTAT_RETURN_IF_ERROR(rules.Start(&observer));
  if (!sink) {
    io::Hdf5RunWriterOptions options;
    options.info.run_dir = config.out_dir;
    options.info.rank = config.rank;
    options.info.world_size = config.world_size;
    options.info.host = HostName();
    options.info.config_json = ConfigToJson(config);
    options.compression_level = config.pipeline.compression_level;
    options.raw_compression_level = config.pipeline.raw_compression_level;
    TSTAT_ASSIGN_OR_RETURN(sink, io::OpenHdf5RunWriter(options));
  }
  host::Pipeline::Options options;
  options.config = config.pipeline;
  if (!config.out_dir.empty() && !config.dry_run) {
    options.stop_file = (std::filesystem::path(config.out_dir) / "STOP").string();
  }
  options.observer = std::move(observer);
  pipeline = std::make_unique<host::Pipeline>(options, std::move(sink), &stop);
  const std::int64_t raw_cap = std::max<std::int64_t>(0, config.pipeline.raw_memory_cap_bytes);
  snapshot_buffers = host::SnapshotBufferPool::Create(static_cast<std::uint64_t>(raw_cap) / 2);
  raw = std::make_unique<host::RawSnapshots>(pipeline.get(), snapshot_buffers.get(),
                                             config.pipeline.raw_memory_cap_bytes);
  host::StepCapture::Parts parts;
  parts.collections = collections.get();
  parts.registry = &registry;
  parts.captured = &captured;
  parts.cpu = cpu.get();
  parts.cpu_small_steps = cpu_small_steps.get();
  parts.pipeline = pipeline.get();
  parts.raw = raw.get();
  parts.raw_requests = &raw_requests;
  parts.rules = &rules;
  parts.device = &device;
  parts.clock = &clock;
  parts.background = background.get();
  capture = std::make_unique<host::StepCapture>(parts);
  rules.StartRunDirRequests();
  clock.StartAt(Clock::now());
  return Status::OK();
}

Status Session::Impl::EndStepLocked(CUstream_st* stream, bool capture_registered) {
  const Clock::time_point t0 = Clock::now();
  capture->FinishEarly(/*wait=*/true, {}, &pending);  // the step's background captures
  rules.BeforeStepCapture(pipeline.get());  // earlier steps judged; RUN/STOP, RUN/capture/ polled
  if (!clock.open()) TSTAT_RETURN_IF_ERROR(clock.Open(nullptr));
  StepBatch batch = std::move(pending);
  pending = StepBatch();
  // The next step's early captures come in one by one: room for as many as
  // this step's, so they are not moved again as the vector grows.
  pending.stats.reserve(batch.stats.size());
  batch.key = clock.key();
  const std::uint64_t raw_reserved = pending_raw_bytes;
  pending_raw_bytes = 0;
  Status problem;  // the first per-tensor problem, returned after queuing the rest
  const host::StepCapture::Outcome outcome =
      capture->Run(std::move(batch), raw_reserved, capture_registered, stream, t0, &problem);
  if (outcome.pushed) rules.CountBatchQueued();
  const StepTiming timing = clock.Close(t0);
  // Every step, saved or not: the run's capture overhead (stored with the counters).
  pipeline->CountStepTime(timing.step_seconds, timing.capture_seconds, outcome.queued);
  return problem;
}

namespace host {

Result<std::unique_ptr<Session>> CreateSessionWithDeps(const SessionConfig& given,
                                                       SessionDeps deps) {
  const SessionConfig config = WithRulesFromEnvironment(given);
  TSTAT_RETURN_IF_ERROR(ValidateConfig(config));
  if (config.out_dir.empty() && !config.dry_run && !deps.sink) {
    return Status::InvalidArgument("out_dir: required (the run directory), unless dry_run");
  }
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<CollectionSet> collections, CollectionSet::Create(config));
  auto impl = std::make_unique<Session::Impl>(config, std::move(collections),
                                              std::move(deps.device_factory));
  // Steps of small tensors leave a core to the writer (SessionCpuThreads);
  // an injected backend is used for every step.
  const int small_threads = SessionCpuThreads(config.pipeline, 1, 1);
  if (!deps.cpu_backend &&
      small_threads != SessionCpuThreads(config.pipeline, 1, kSmallTensorElements)) {
    impl->cpu_small_steps = CreateCpuBackend({small_threads});
  }
  impl->cpu = deps.cpu_backend ? std::move(deps.cpu_backend)
                               : CreateCpuBackend({config.pipeline.cpu_threads});
  // A core for the training thread and one for the capture thread.
  if (config.pipeline.early_capture_thread && host::UsableProcessors() > 1) {
    impl->background = std::make_unique<host::BackgroundReducer>(
        CreateCpuBackend({1}), config.pipeline.early_capture_evict);
  }
  TSTAT_RETURN_IF_ERROR(impl->Start(std::move(deps.sink), std::move(deps.observer)));
  return SessionFactory::Make(std::move(impl));
}

}  // namespace host

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() {
  if (impl_) (void)Close();
}

Result<std::unique_ptr<Session>> Session::Create(const SessionConfig& config) {
  return host::CreateSessionWithDeps(config, {});
}

namespace {

SessionConfig Apply(SessionConfig c, const RunOverrides& o) {
  if (o.out_dir) c.out_dir = *o.out_dir;
  if (o.rank) c.rank = *o.rank;
  if (o.world_size) c.world_size = *o.world_size;
  if (o.dry_run) c.dry_run = *o.dry_run;
  return c;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::CreateFromFile(const std::string& config_path,
                                                         const RunOverrides& overrides) {
  SessionConfig config;
  Result<SessionConfig> loaded = LoadConfigFile(config_path);
  if (loaded.ok()) {
    config = std::move(loaded).value();
  } else if (!(config_path.empty() && loaded.status().code() == StatusCode::kNotFound)) {
    return loaded.status();  // no path and no TSTAT_CONFIG: the defaults
  }
  return Create(Apply(std::move(config), overrides));
}

Result<std::unique_ptr<Session>> Session::CreateFromJson(const std::string& json,
                                                         const RunOverrides& overrides) {
  TSTAT_ASSIGN_OR_RETURN(SessionConfig config, ParseConfigJson(json));
  return Create(Apply(std::move(config), overrides));
}

Result<std::uint32_t> Session::RegisterTensor(const TensorSpec& spec) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  return impl_->RegisterLocked(spec);  // setup: not counted as capture time
}

Status Session::SetMode(Mode mode) {
  const int m = static_cast<int>(mode);
  if (m < 1 || m > 4) return Status::InvalidArgument("invalid mode " + std::to_string(m));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  impl_->clock.set_next_mode(mode);
  return Status::OK();
}

Mode Session::mode() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->clock.next_mode();
}

Status Session::BeginStep() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  const auto t0 = Impl::Clock::now();
  TSTAT_RETURN_IF_ERROR(impl_->clock.Open(nullptr));
  impl_->clock.StartAt(t0);
  impl_->clock.AddCaptureTime(Impl::Clock::now() - t0);
  return Status::OK();
}

Status Session::BeginStep(const StepKey& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  const auto t0 = Impl::Clock::now();
  TSTAT_RETURN_IF_ERROR(impl_->clock.Open(&key));
  impl_->clock.StartAt(t0);
  impl_->clock.AddCaptureTime(Impl::Clock::now() - t0);
  return Status::OK();
}

Status Session::EndStep(CUstream_st* stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  return impl_->EndStepLocked(stream, /*capture_registered=*/true);
}

Result<EarlyCapture> Session::CaptureEarly(std::uint32_t id, EarlyCaptureMode mode) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  CaptureTimer timer(&impl_->clock);
  const auto& all = impl_->registry.all();
  if (id >= all.size() || all[id]->info.id != id || all[id]->adhoc ||
      all[id]->info.kind != TensorKind::kTensor) {
    return Status::InvalidArgument("CaptureEarly: " + std::to_string(id) +
                                   " is not the id of a registered tensor");
  }
  return impl_->capture->CaptureEarly(all[id].get(), &impl_->pending, mode);
}

std::size_t Session::FinishEarly(bool wait, const std::function<bool(std::uint32_t)>& unchanged) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->background == nullptr || impl_->background->queued() == 0) return 0;
  CaptureTimer timer(&impl_->clock);
  return impl_->capture->FinishEarly(wait, unchanged, &impl_->pending);
}

Status Session::SaveScalar(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  CaptureTimer timer(&impl_->clock);
  return impl_->SaveScalarLocked(name, value);
}

Status Session::SaveTensor(const std::string& name, const TensorView& view,
                           const SaveTensorOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return Closed();
  CaptureTimer timer(&impl_->clock);
  return impl_->SaveTensorLocked(name, view, options);
}

bool Session::ShouldStop() const { return impl_->stop.stopped(); }
std::string Session::stop_reason() const { return impl_->stop.reason(); }
void Session::RequestStop(const std::string& reason) { impl_->stop.Request(reason); }
void Session::CaptureRawFor(const std::string& name, int steps) {
  impl_->raw_requests.Add(name, steps);
}

PipelineCounters Session::counters() const { return impl_->pipeline->counters(); }
Status Session::status() const {
  Status s = impl_->pipeline->status();
  if (s.ok() && impl_->rules.thread() != nullptr) s = impl_->rules.thread()->status();
  return s;
}

StepKey Session::current_step() const { return impl_->clock.current(); }

StepTiming Session::last_step_timing() const { return impl_->clock.last_timing(); }

CaptureTotals Session::capture_totals() const { return impl_->pipeline->counters().capture; }

Result<TensorInfo> Session::tensor_info(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const host::RegisteredTensor* t = impl_->registry.Find(name);
  if (t == nullptr) return Status::NotFound("no tensor or scalar named \"" + name + "\"");
  return t->info;
}

const SessionConfig& Session::config() const { return impl_->config; }

Status Session::Close() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed) return impl_->close_status;
  // An open step is ended with what was saved in it; registered tensors are
  // not captured (their memory may be gone when Close runs from a destructor).
  Status s;
  if (impl_->clock.open() || !impl_->pending.scalars.empty() || !impl_->pending.stats.empty() ||
      !impl_->pending.raws.empty() || !impl_->pending.drops.empty()) {
    s = impl_->EndStepLocked(nullptr, /*capture_registered=*/false);
  } else {
    std::vector<TensorInfo> undeclared = impl_->registry.TakeUndeclared();
    if (!undeclared.empty()) {
      host::PipelineItem item;
      item.declare = std::move(undeclared);
      s = impl_->pipeline->Push(std::move(item));
    }
  }
  impl_->closed = true;
  const Status drained = impl_->pipeline->Close();
  impl_->snapshot_buffers->Clear();  // the writer has released every snapshot
  // After the pipeline: every batch has been handed to the rules thread.
  host::RulesThread* rules = impl_->rules.thread();
  const Status ruled = rules != nullptr ? rules->Finish() : Status::OK();
  impl_->rules.Report(impl_->pipeline->counters(), impl_->registry);
  impl_->close_status = !drained.ok() ? drained : !s.ok() ? s : ruled;
  return impl_->close_status;
}

}  // namespace tstat
