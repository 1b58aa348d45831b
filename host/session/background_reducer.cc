// See background_reducer.h.
#include "host/session/background_reducer.h"

#include <algorithm>
#include <utility>

#include "host/pipeline/background_thread.h"
#include "host/session/cache_eviction.h"
#include "host/session/step_records.h"

namespace tstat::host {

BackgroundReducer::BackgroundReducer(std::unique_ptr<Backend> backend, bool evict_after_read)
    : backend_(std::move(backend)),
      evict_after_read_(evict_after_read),
      thread_([this] { Run(); }) {}

BackgroundReducer::~BackgroundReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

std::unique_ptr<BackgroundReducer::Job> BackgroundReducer::NewJob() {
  if (spare_.empty()) return std::make_unique<Job>();
  std::unique_ptr<Job> job = std::move(spare_.back());
  spare_.pop_back();
  return job;
}

bool BackgroundReducer::HasRoomFor(const TensorView& v) const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() < kMaxJobs && (queue_.empty() || queued_bytes_ + ViewBytes(v) <= kMaxBytes);
}

void BackgroundReducer::Submit(std::unique_ptr<Job> job) {
  const std::uint64_t bytes = ViewBytes(job->request.tensor);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_bytes_ += bytes;
    queue_.push_back(std::move(job));
    if (!asleep_) return;  // it looks for jobs on its own
  }
  work_.notify_one();
}

std::unique_ptr<BackgroundReducer::Job> BackgroundReducer::TakeFinished(bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty()) return nullptr;
  if (reduced_ == 0) {
    if (!wait) return nullptr;
    if (!asleep_) {
      lock.unlock();
      work_.notify_one();  // between two looks for jobs: look now
      lock.lock();
    }
    done_.wait(lock, [this] { return reduced_ > 0; });
  }
  std::unique_ptr<Job> job = std::move(queue_.front());
  queue_.pop_front();
  --reduced_;
  queued_bytes_ -= ViewBytes(job->request.tensor);
  return job;
}

void BackgroundReducer::Recycle(std::unique_ptr<Job> job) {
  if (job != nullptr && spare_.size() < kMaxJobs) spare_.push_back(std::move(job));
}

std::size_t BackgroundReducer::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void BackgroundReducer::Run() {
  NameCurrentThread("tstat-capture");
  // Where torch's own workers want every core (a BLAS team that spins
  // between calls), this thread takes only what they leave; when the
  // training thread waits for it (TakeFinished), that thread sleeps and
  // its team soon does, which leaves the core to this one.
  LowerCurrentThreadPriority();
  std::vector<ReductionRequest> one(1);
  std::unique_lock<std::mutex> lock(mu_);
  auto last_job = std::chrono::steady_clock::now();
  std::chrono::microseconds poll = kFirstPoll;
  for (;;) {
    if (reduced_ == queue_.size()) {
      if (stopping_) return;
      if (std::chrono::steady_clock::now() - last_job < kPollFor) {
        work_.wait_for(lock, poll);
        poll = std::min(poll * 2, kLastPoll);
      } else {
        asleep_ = true;
        work_.wait(lock, [this] { return stopping_ || reduced_ < queue_.size(); });
        asleep_ = false;
      }
      continue;
    }
    // Jobs are popped only once reduced: this one stays where it is.
    Job* job = queue_[reduced_].get();
    lock.unlock();
    std::swap(one[0], job->request);
    job->status = backend_->Reduce(one, &job->results);
    std::swap(one[0], job->request);
    if (job->copy_after) {
      const TensorView& v = job->request.tensor;
      const auto* data = static_cast<const std::uint8_t*>(v.data);
      job->copy.assign(data, data + ViewBytes(v));
    }
    if (evict_after_read_)
      EvictFromCaches(job->request.tensor.data, ViewBytes(job->request.tensor));
    lock.lock();
    ++reduced_;
    last_job = std::chrono::steady_clock::now();
    poll = kFirstPoll;
    done_.notify_one();
  }
}

}  // namespace tstat::host
