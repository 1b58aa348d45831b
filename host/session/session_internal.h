// Test and tool access to Session internals (not installed).
//
// CreateSessionWithDeps builds a session around injected parts: a StepSink
// (tests/support/testing_sinks.h MemorySink / FaultInjectionSink), a CPU backend (e.g.
// one thread under ThreadSanitizer) and a DeviceCapture factory (a host-memory
// fake that lets the CUDA path run without a GPU). Null members mean the
// production part. Thread safety: as Session.
#pragma once

#include <memory>

#include "host/device/device_capture.h"
#include "host/pipeline/pipeline.h"
#include "io/write/step_sink.h"
#include "tstat/engine.h"
#include "tstat/session.h"

namespace tstat::host {

struct SessionDeps {
  std::unique_ptr<io::StepSink> sink;       // null: the HDF5 run writer (or nothing if dry_run)
  std::unique_ptr<Backend> cpu_backend;     // null: CreateCpuBackend(pipeline.cpu_threads)
  DeviceCaptureFactory device_factory;      // null: CreateCudaDeviceCapture
  std::shared_ptr<BatchObserver> observer;  // null: none (the rule engine's seam)
};

// As Session::Create; with an injected sink, out_dir may be empty (then no
// STOP file is watched) and nothing is written to it.
Result<std::unique_ptr<Session>> CreateSessionWithDeps(const SessionConfig& config,
                                                       SessionDeps deps);

// `config` with TSTAT_RULES_CONFIG applied: when set (non-empty), in-process
// rules are enabled with that file (config_file replaced, config_json
// cleared, plugins kept). CreateSessionWithDeps applies it first.
SessionConfig WithRulesFromEnvironment(SessionConfig config);

}  // namespace tstat::host
