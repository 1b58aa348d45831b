// BackgroundReducer: a thread that reduces the tensors a session captures
// early in the background (Session::CaptureEarly with kInBackground), so
// that the training thread goes on with its next layer while the last
// layer's output is read. The caller keeps each tensor's data alive and
// unchanged until its job is taken back (TakeFinished); jobs finish and are
// taken back in the order they were queued.
//
// The thread runs at normal priority: EndStep waits for it. Waking a
// sleeping thread costs the waker a system call (10 us on a 2-core VM, as
// much as queuing the job): so while jobs keep coming the thread looks for
// them on its own timer - kFirstPoll after the last job, each look twice as
// late as the one before up to kLastPoll - and Submit wakes it only once it
// has slept through kPollFor without any. (Every 100 us throughout cost the
// thread 5.5 ms of CPU a 35 ms step, in timer wake-ups.) A caller that
// waits for a job wakes it at once. With `evict_after_read` the thread
// drops the lines of each tensor it has read from the caches
// (cache_eviction.h) before it hands the job back.
// Thread safety: Submit, TakeFinished and Recycle from one thread at a time
// (the session lock); the reducing thread only touches the job it reduces.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tstat/engine.h"

namespace tstat::host {

class BackgroundReducer {
 public:
  struct Job {
    std::uint32_t id = 0;      // the registered tensor's
    ReductionRequest request;  // its view's data stays valid until taken back
    std::vector<ReductionResult> results;
    Status status;  // Backend::Reduce's
    // Keep a copy of the tensor's bytes as read, in `copy` (a delta's next
    // previous values).
    bool copy_after = false;
    std::vector<std::uint8_t> copy;
  };

  // At most this many jobs, and this many bytes of tensor data, are queued
  // at once (the caller reduces the others on its own thread), so that the
  // tensors held for the thread stay few.
  static constexpr std::size_t kMaxJobs = 256;
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{256} << 20;
  // A training step's layers follow each other within milliseconds; a
  // longer lull (between steps of a slow model, evaluation) puts the
  // thread to sleep until woken.
  static constexpr std::chrono::microseconds kFirstPoll{100};
  static constexpr std::chrono::microseconds kLastPoll{1600};
  static constexpr std::chrono::milliseconds kPollFor{50};

  // `backend` reduces the jobs (one thread: the reducing thread itself).
  BackgroundReducer(std::unique_ptr<Backend> backend, bool evict_after_read);
  // Reduces what is queued, then ends the thread.
  ~BackgroundReducer();
  BackgroundReducer(const BackgroundReducer&) = delete;
  BackgroundReducer& operator=(const BackgroundReducer&) = delete;

  // An empty job to fill (a recycled one keeps its vectors' capacity).
  std::unique_ptr<Job> NewJob();
  // Whether a job reading `v` fits under the limits now.
  bool HasRoomFor(const TensorView& v) const;
  // Queues `job`: the caller asked HasRoomFor first (only the caller
  // queues jobs, so the room is still there).
  void Submit(std::unique_ptr<Job> job);
  // The oldest queued job once it is reduced; nullptr when nothing is
  // queued or, without `wait`, when the oldest is not reduced yet.
  std::unique_ptr<Job> TakeFinished(bool wait);
  // A job taken back, for NewJob to hand out again.
  void Recycle(std::unique_ptr<Job> job);
  std::size_t queued() const;

 private:
  void Run();

  std::unique_ptr<Backend> backend_;
  const bool evict_after_read_;
  mutable std::mutex mu_;
  std::condition_variable work_;  // a job queued, or stopping
  std::condition_variable done_;  // a job reduced
  std::deque<std::unique_ptr<Job>> queue_;
  std::size_t reduced_ = 0;  // queue_'s first reduced_ jobs are done
  std::uint64_t queued_bytes_ = 0;
  bool stopping_ = false;
  bool asleep_ = false;  // waiting untimed: Submit must wake it
  std::vector<std::unique_ptr<Job>> spare_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tstat::host
