#include "host/session/step_clock.h"

#include <string>

namespace tstat::host {

Status StepClock::Open(const StepKey* explicit_key) {
  if (open_) {
    return Status::FailedPrecondition("step " + std::to_string(key_.global_step) +
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
    if (k.global_step < 0 && k.mode != Mode::kGlobal && last_global_ == INT64_MAX) {
      return exhausted("the global");
    }
    if (k.global_step < 0) k.global_step = k.mode == Mode::kGlobal ? k.mode_step : last_global_ + 1;
    if (k.global_step <= last_global_) {
      return Status::FailedPrecondition(
          "steps going backwards: global step " + std::to_string(k.global_step) +
          " is not after the last step " + std::to_string(last_global_) +
          " (give a global step of -1 to number the mode step only)");
    }
    if (k.mode == Mode::kGlobal && k.mode_step != k.global_step) {
      return Status::InvalidArgument("a GLOBAL step's mode_step must equal its global_step");
    }
    if (k.mode_step < 0) return Status::InvalidArgument("mode_step is negative");
    if (k.mode_step <= last_mode_step_[m - 1]) {
      return Status::FailedPrecondition(std::string("steps going backwards: ") + ModeName(k.mode) +
                                        " step " + std::to_string(k.mode_step) +
                                        " is not after the last " + ModeName(k.mode) + " step " +
                                        std::to_string(last_mode_step_[m - 1]));
    }
    next_mode_ = k.mode;
  } else {
    k.mode = next_mode_;
    const int m = static_cast<int>(k.mode);
    if (last_global_ == INT64_MAX) return exhausted("the global");
    if (last_mode_step_[m - 1] == INT64_MAX) return exhausted(ModeName(k.mode));
    k.global_step = last_global_ + 1;
    k.mode_step = k.mode == Mode::kGlobal ? k.global_step : last_mode_step_[m - 1] + 1;
  }
  key_ = k;
  open_ = true;
  last_global_ = k.global_step;
  last_mode_step_[static_cast<int>(k.mode) - 1] = k.mode_step;
  std::lock_guard<std::mutex> lock(info_mu_);
  info_key_ = k;
  return Status::OK();
}

StepTiming StepClock::Close(Clock::time_point t0) {
  const Clock::time_point now = Clock::now();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const StepTiming timing{key_, seconds(now - step_start_), capture_seconds_ + seconds(now - t0)};
  {
    std::lock_guard<std::mutex> lock(info_mu_);
    last_timing_ = timing;
  }
  open_ = false;
  ++epoch_;
  capture_seconds_ = 0.0;
  step_start_ = now;
  return timing;
}

StepKey StepClock::current() const {
  std::lock_guard<std::mutex> lock(info_mu_);
  return info_key_;
}

StepTiming StepClock::last_timing() const {
  std::lock_guard<std::mutex> lock(info_mu_);
  return last_timing_;
}

}  // namespace tstat::host
