// DeviceDeltaStore (delta capture of CUDA tensors) on the CPU: a fake
// DeltaMemory in host memory records allocations, frees and copies. Checks
// the bookkeeping: no previous values at the first save, the slot at the
// next, copies queued only at Commit (after the reductions), the memory cap
// (a DropRecord per refused save, never silent), a size change restarting
// the delta, Abandon, failed copies, and every slot freed.
#include "host/device/device_delta.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

namespace tstat::host {
namespace {

struct FakeMemoryLog {
  int allocations = 0;
  int frees = 0;
  std::vector<std::pair<void*, const void*>> copies;  // dst, src
  std::map<void*, std::size_t> live;
  bool fail_copies = false;
  bool fail_allocations = false;
};

class FakeMemory final : public DeltaMemory {
 public:
  explicit FakeMemory(FakeMemoryLog* log) : log_(log) {}
  Result<void*> Allocate(std::size_t bytes) override {
    if (log_->fail_allocations) return Status::ResourceExhausted("out of device memory");
    ++log_->allocations;
    void* p = ::operator new(bytes);
    log_->live[p] = bytes;
    return p;
  }
  void Free(void* p) override {
    ++log_->frees;
    log_->live.erase(p);
    ::operator delete(p);
  }
  Status CopyAsync(void* dst, const void* src, std::size_t bytes, CUstream_st*) override {
    if (log_->fail_copies) return Status::CudaError("copy failed");
    EXPECT_EQ(log_->live.at(dst), bytes);
    std::memcpy(dst, src, bytes);
    log_->copies.emplace_back(dst, src);
    return Status::OK();
  }

 private:
  FakeMemoryLog* log_;
};

TensorView Floats(std::vector<float>* v) {
  return TensorView::Host(v->data(), DType::kFloat32, static_cast<std::int64_t>(v->size()));
}

TEST(DeviceDeltaStoreTest, FirstSaveHasNoPreviousThenTheSlotHoldsTheLastSavedValues) {
  FakeMemoryLog log;
  {
    DeviceDeltaStore store(std::make_unique<FakeMemory>(&log), 1 << 20);
    std::vector<float> w = {1, 2, 3, 4};
    StepBatch b0;
    EXPECT_EQ(store.Prepare(7, Floats(&w), &b0), nullptr);  // nothing saved yet
    EXPECT_TRUE(log.copies.empty());                        // not before Commit
    ASSERT_TRUE(store.Commit(nullptr).ok());
    ASSERT_EQ(log.copies.size(), 1u);
    EXPECT_EQ(store.bytes_in_use(), 16u);

    w = {5, 6, 7, 8};
    StepBatch b1;
    const void* prev = store.Prepare(7, Floats(&w), &b1);
    ASSERT_NE(prev, nullptr);
    EXPECT_EQ(prev, log.copies[0].first);
    EXPECT_EQ(static_cast<const float*>(prev)[0], 1.0f);  // the values of the previous save
    ASSERT_TRUE(store.Commit(nullptr).ok());
    EXPECT_EQ(static_cast<const float*>(prev)[0], 5.0f);  // now this save's, for the next
    EXPECT_EQ(log.allocations, 1);                        // the slot is reused
    EXPECT_TRUE(b0.drops.empty());
    EXPECT_TRUE(b1.drops.empty());
  }
  EXPECT_EQ(log.frees, 1);
  EXPECT_TRUE(log.live.empty());
}

TEST(DeviceDeltaStoreTest, OverTheCapATensorGetsNoDeltaAndADropRecordEachTime) {
  FakeMemoryLog log;
  DeviceDeltaStore store(std::make_unique<FakeMemory>(&log), 24);  // room for 6 floats
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  for (int step = 0; step < 3; ++step) {
    StepBatch batch;
    store.Prepare(1, Floats(&a), &batch);
    EXPECT_EQ(store.Prepare(2, Floats(&b), &batch), nullptr);
    ASSERT_TRUE(store.Commit(nullptr).ok());
    ASSERT_EQ(batch.drops.size(), 1u) << "step " << step;
    EXPECT_EQ(batch.drops[0].tensor_id, 2u);
    EXPECT_EQ(batch.drops[0].kind, "delta");
    EXPECT_EQ(batch.drops[0].bytes, 16u);
    EXPECT_NE(batch.drops[0].reason.find("delta_memory_cap_bytes"), std::string::npos);
  }
  EXPECT_EQ(store.drops(), 3u);
  EXPECT_EQ(store.slots(), 1u);
  EXPECT_EQ(store.bytes_in_use(), 16u);
  EXPECT_EQ(log.copies.size(), 3u);  // tensor 1 only
}

TEST(DeviceDeltaStoreTest, ASizeChangeRestartsTheDeltaAndFreesTheOldSlot) {
  FakeMemoryLog log;
  DeviceDeltaStore store(std::make_unique<FakeMemory>(&log), 1 << 20);
  std::vector<float> small(4, 1.0f), big(8, 1.0f);
  StepBatch batch;
  store.Prepare(3, Floats(&small), &batch);
  ASSERT_TRUE(store.Commit(nullptr).ok());
  EXPECT_EQ(store.Prepare(3, Floats(&big), &batch), nullptr);  // other size: no previous
  ASSERT_TRUE(store.Commit(nullptr).ok());
  EXPECT_EQ(log.frees, 1);
  EXPECT_EQ(store.bytes_in_use(), 32u);
  EXPECT_NE(store.Prepare(3, Floats(&big), &batch), nullptr);
  store.Abandon();  // the reductions were not queued: no copy
  EXPECT_EQ(log.copies.size(), 2u);
  EXPECT_TRUE(batch.drops.empty());
}

TEST(DeviceDeltaStoreTest, FailedCopiesAndAllocationsAreReportedNotSilent) {
  FakeMemoryLog log;
  DeviceDeltaStore store(std::make_unique<FakeMemory>(&log), 1 << 20);
  std::vector<float> w(4, 1.0f);
  StepBatch batch;
  store.Prepare(1, Floats(&w), &batch);
  log.fail_copies = true;
  const Status s = store.Commit(nullptr);
  EXPECT_EQ(s.code(), StatusCode::kCudaError);
  log.fail_copies = false;
  EXPECT_EQ(store.Prepare(1, Floats(&w), &batch), nullptr);  // the slot holds nothing valid
  ASSERT_TRUE(store.Commit(nullptr).ok());
  EXPECT_NE(store.Prepare(1, Floats(&w), &batch), nullptr);
  store.Abandon();
  log.fail_allocations = true;
  EXPECT_EQ(store.Prepare(2, Floats(&w), &batch), nullptr);
  ASSERT_EQ(batch.drops.size(), 1u);
  EXPECT_NE(batch.drops[0].reason.find("out of device memory"), std::string::npos);
  EXPECT_EQ(store.drops(), 1u);
}

}  // namespace
}  // namespace tstat::host
