// See host_test_util.h.
#include "tests/host/host_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace tstat::testing {

Status ForwardingSink::Write(const StepBatch& batch) {
  const int ms = delay_ms_.load();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return inner_->Write(batch);
}

SessionConfig TestConfig() {
  SessionConfig c;
  c.save_config.base.save_interval = 1;
  // One CPU thread: no OpenMP team, which ThreadSanitizer cannot see into
  // (libgomp is not instrumented). TSTAT_TEST_CPU_THREADS overrides it.
  const char* threads = std::getenv("TSTAT_TEST_CPU_THREADS");
  c.pipeline.cpu_threads = threads != nullptr ? std::atoi(threads) : 1;
  c.pipeline.flush_interval_seconds = 0.05;
  c.pipeline.stop_check_interval_ms = 5;
  return c;
}

std::unique_ptr<Session> MakeSession(const SessionConfig& config,
                                     std::shared_ptr<io::StepSink> sink,
                                     const SessionOptionsForTest& options) {
  host::SessionDeps deps;
  deps.sink = std::make_unique<ForwardingSink>(std::move(sink), options.write_delay_ms);
  deps.cpu_backend = CreateCpuBackend({config.pipeline.cpu_threads});
  deps.device_factory = options.device_factory;
  auto s = host::CreateSessionWithDeps(config, std::move(deps));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

const TensorStatsRecord* FindStats(const StepBatch& b, std::uint32_t id) {
  for (const TensorStatsRecord& r : b.stats) {
    if (r.tensor_id == id) return &r;
  }
  return nullptr;
}

const ScalarRecord* FindScalar(const StepBatch& b, std::uint32_t id) {
  for (const ScalarRecord& r : b.scalars) {
    if (r.tensor_id == id) return &r;
  }
  return nullptr;
}

const RawSnapshot* FindRaw(const StepBatch& b, std::uint32_t id) {
  for (const RawSnapshot& r : b.raws) {
    if (r.tensor_id == id) return &r;
  }
  return nullptr;
}

const StepBatch* FindBatch(const std::vector<StepBatch>& batches, std::int64_t g) {
  for (const StepBatch& b : batches) {
    if (b.key.global_step == g) return &b;
  }
  return nullptr;
}

std::vector<std::int64_t> StepsWithStats(const std::vector<StepBatch>& batches, std::uint32_t id) {
  std::vector<std::int64_t> out;
  for (const StepBatch& b : batches) {
    if (FindStats(b, id) != nullptr) out.push_back(b.key.global_step);
  }
  return out;
}

ReductionResult ToResult(const TensorStatsRecord& r) {
  ReductionResult out;
  out.stats = r.stats;
  if (r.exponent_histogram) out.exponent_histogram = r.exponent_histogram->Expand();
  out.linear_histogram = r.linear_histogram;
  out.per_channel = r.per_channel;
  out.label_counts = r.label_counts;
  out.sample = r.sample;
  return out;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tstat_host_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* made = ::mkdtemp(buf.data());
  path_ = made ? made : "";
  EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

namespace {

class FakeDeviceCapture final : public host::DeviceCapture {
 public:
  FakeDeviceCapture(std::shared_ptr<FakeDeviceStats> stats, int delay_ms)
      : stats_(std::move(stats)), delay_ms_(delay_ms), cpu_(CreateCpuBackend({1})) {}

  Status Enqueue(const std::vector<ReductionRequest>& requests, const std::vector<TensorView>& raws,
                 CUstream_st* /*stream*/) override {
    if (pending_) return Status::FailedPrecondition("fake device: Enqueue before Collect");
    ++stats_->enqueues;
    int m = stats_->max_batch.load();
    while (static_cast<int>(requests.size()) > m &&
           !stats_->max_batch.compare_exchange_weak(m, static_cast<int>(requests.size()))) {
    }
    copies_.clear();
    requests_.clear();
    raws_.clear();
    for (const ReductionRequest& r : requests) {
      if (r.tensor.space != MemorySpace::kCuda) {
        return Status::InvalidArgument("fake device: a host tensor in a device batch");
      }
      copies_.emplace_back(Snapshot(r.tensor));
      ReductionRequest c = r;
      c.tensor.data = copies_.back().data();
      c.tensor.space = MemorySpace::kHost;
      requests_.push_back(c);
    }
    for (const TensorView& v : raws) raws_.push_back(Snapshot(v));
    pending_ = true;
    return Status::OK();
  }

  Status Collect(std::vector<ReductionResult>* results,
                 std::vector<std::vector<std::uint8_t>>* raws) override {
    if (!pending_) return Status::FailedPrecondition("fake device: nothing enqueued");
    pending_ = false;
    ++stats_->collects;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    results->clear();
    if (!requests_.empty()) TSTAT_RETURN_IF_ERROR(cpu_->Reduce(requests_, results));
    *raws = std::move(raws_);
    raws_.clear();
    return Status::OK();
  }

 private:
  static std::vector<std::uint8_t> Snapshot(const TensorView& v) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype));
    if (!bytes.empty()) std::memcpy(bytes.data(), v.data, bytes.size());
    return bytes;
  }

  std::shared_ptr<FakeDeviceStats> stats_;
  int delay_ms_;
  std::unique_ptr<Backend> cpu_;
  bool pending_ = false;
  std::vector<std::vector<std::uint8_t>> copies_;
  std::vector<ReductionRequest> requests_;
  std::vector<std::vector<std::uint8_t>> raws_;
};

}  // namespace

host::DeviceCaptureFactory FakeDeviceFactory(std::shared_ptr<FakeDeviceStats> stats,
                                             int collect_delay_ms) {
  return [stats, collect_delay_ms](int /*device*/) -> Result<std::unique_ptr<host::DeviceCapture>> {
    return std::unique_ptr<host::DeviceCapture>(
        std::make_unique<FakeDeviceCapture>(stats, collect_delay_ms));
  };
}

}  // namespace tstat::testing
