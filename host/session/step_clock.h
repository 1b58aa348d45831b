// The session's steps: their numbering (implicit steps, BeginStep's explicit
// keys, the modes' own counters), whether one is open, and its timing (the
// step's wall time and the time spent inside tstat calls during it).
// Thread safety: the session lock serializes every method but current()
// and last_timing(), which read a snapshot under a mutex of their own so
// that no reader waits for a capture call.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

#include "tstat/session.h"
#include "tstat/status.h"

namespace tstat::host {

class StepClock {
 public:
  using Clock = std::chrono::steady_clock;

  StepClock() : step_start_(Clock::now()) {}

  // Opens the next step: numbered after the last one in `next_mode`, or
  // `explicit_key` (BeginStep(key): a negative global step numbers the mode
  // step only). Refuses steps going backwards, an open step, invalid modes
  // and counters at INT64_MAX.
  Status Open(const StepKey* explicit_key);
  // Ends the open step at now: its timing (the capture time plus the time
  // since `t0`, when the ending call began), kept for last_timing(). The
  // next step's wall time starts now.
  StepTiming Close(Clock::time_point t0);

  bool open() const { return open_; }
  const StepKey& key() const { return key_; }  // the open step, or the last one ended
  Mode next_mode() const { return next_mode_; }
  void set_next_mode(Mode mode) { next_mode_ = mode; }
  // The global step an ad-hoc save belongs to now: the open step's, else
  // the next one's.
  std::int64_t SaveGlobalStep() const { return open_ ? key_.global_step : last_global_ + 1; }
  // +1 per ended step: which step ad-hoc saves belong to.
  std::uint64_t epoch() const { return epoch_; }

  // The step's wall time starts at `t` (BeginStep).
  void StartAt(Clock::time_point t) { step_start_ = t; }
  Clock::time_point step_start() const { return step_start_; }
  void AddCaptureTime(Clock::duration d) {
    capture_seconds_ += std::chrono::duration<double>(d).count();
  }
  double capture_seconds() const { return capture_seconds_; }

  StepKey current() const;
  StepTiming last_timing() const;

 private:
  Mode next_mode_ = Mode::kGlobal;
  bool open_ = false;
  StepKey key_;
  std::int64_t last_global_ = -1;
  std::int64_t last_mode_step_[4] = {-1, -1, -1, -1};
  std::uint64_t epoch_ = 0;
  Clock::time_point step_start_;  // BeginStep, else the previous step's end
  double capture_seconds_ = 0.0;  // inside tstat calls during the step

  mutable std::mutex info_mu_;
  StepKey info_key_;        // guarded by info_mu_
  StepTiming last_timing_;  // guarded by info_mu_
};

}  // namespace tstat::host
