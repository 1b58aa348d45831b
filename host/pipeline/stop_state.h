// StopState: whether training should stop, and why. Set by RequestStop (any
// thread: the training code, the rule engine) and by the writer thread when
// it finds the run's STOP file; read by ShouldStop on the training thread.
// Thread safety: all methods are thread-safe; stopped() is one atomic load.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace tstat::host {

class StopState {
 public:
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // The first reason wins; later requests change nothing.
  void Request(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_.load(std::memory_order_relaxed)) return;
    reason_ = reason.empty() ? "stop requested" : reason;
    stopped_.store(true, std::memory_order_release);
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  mutable std::mutex mu_;
  std::string reason_;
  std::atomic<bool> stopped_{false};
};

}  // namespace tstat::host
