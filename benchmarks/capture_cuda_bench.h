// `tstat bench capture --device cuda`: what Session::EndStep costs the
// training thread when the tensors live on a GPU, and proof that it does not
// wait for the device.
//
// K tensors of N f32 values ("layer<i>.weight", collection `weights`) in one
// device buffer, registered with a session that saves their stats at every
// step (the default stat set; the run is written to a temporary directory).
//   end_step_s: host time of EndStep(stream) with the GPU idle before it
//     (the stream is synchronized first), median / p90 / max over S steps.
//   busy_end_step_s: the same while a kernel of busy_ms milliseconds, enqueued
//     on the same stream just before, is still running; returned_while_busy:
//     every one of those EndSteps returned before that kernel had finished
//     (cudaEventQuery on an event recorded after the kernel said not ready).
//     An EndStep that waited for the device would fail this.
//   device_step_s: the device time of one step's reduction (events around
//     the work EndStep enqueues, idle GPU), median.
// With separate_allocations each tensor is its own cudaMalloc instead of a
// slice of one buffer: the worst case of the per-allocation memory check
// EndStep makes before reducing (kernels/cuda/device_memory_check.h).
// With in_process_rules the session also runs the default rule set in its
// rules thread and captures what those rules need (the weights' deltas: a
// device copy of every weight at every step): the difference is what the
// in-process rules cost EndStep.
// Every record must reach the file: the counters after Close are checked.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tstat/status.h"

namespace tstat::bench {

struct CudaCaptureBenchOptions {
  int device = 0;
  std::int64_t tensors = 1000;
  std::int64_t elements = 1000;  // per tensor
  int steps = 200;               // timed steps per measurement
  double busy_ms = 20.0;         // the long kernel of the busy measurement
  bool separate_allocations = false;
  bool in_process_rules = false;  // InProcessRulesConfig::enabled
  std::string dir;                // "" : $TMPDIR, else /tmp
  bool json = false;
};

struct CudaCaptureBenchResult {
  std::int64_t tensors = 0, elements = 0;
  std::int64_t allocations = 0;  // 1, or tensors with separate_allocations
  bool in_process_rules = false;
  int steps = 0;
  double end_step_s = 0.0, end_step_p90_s = 0.0, end_step_max_s = 0.0;
  double busy_end_step_s = 0.0;
  double busy_ms = 0.0;
  bool returned_while_busy = false;
  int busy_steps_waited = 0;  // busy EndSteps that returned after the kernel ended
  double device_step_s = 0.0;
  std::uint64_t records_written = 0;
};

std::string FormatCudaCaptureJson(const CudaCaptureBenchResult& r);
std::string FormatCudaCaptureText(const CudaCaptureBenchResult& r);

// kNotSupported without CUDA in the build, kUnavailable without a device.
Result<CudaCaptureBenchResult> RunCudaCaptureCase(const CudaCaptureBenchOptions& options);

// The whole subcommand: one JSON object or a few lines of text to `out`.
// Fails when an EndStep waited for the device.
Status RunCudaCaptureBench(const CudaCaptureBenchOptions& options, std::ostream& out);

}  // namespace tstat::bench
