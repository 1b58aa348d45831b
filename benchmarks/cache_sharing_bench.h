// `tstat bench caches`: what a thread reading another core's fresh data costs
// the thread that wrote it, and whether flushing what was read
// (host/session/cache_eviction.h, pipeline.early_capture_evict) takes that
// cost away, on this machine.
//
// A writer thread (the training thread's stand-in) writes `chunks` buffers in
// turn, each from the one before (as a layer's output from its input), with a
// stretch of arithmetic after each, round after round over the same memory.
// A reader thread on another core (the capture thread's) does one of:
//   alone         nothing (it does not exist);
//   reads_other   reads a chunk of its own memory per chunk written;
//   reads_fresh   reads each chunk right after it is written;
//   reads_evicts  reads it, then flushes its lines out of the caches.
// The modes alternate in blocks of rounds in one process; the figures are the
// writer's round times, and the ratio of each mode's mean to alone's.
#pragma once

#include <ostream>

#include "tstat/status.h"

namespace tstat::bench {

struct CacheSharingOptions {
  int rounds = 200;        // per mode, in blocks of 10
  int chunks = 34;         // buffers written in turn per round
  double chunk_kib = 400;  // each buffer's size
  bool json = false;       // one JSON object per line per mode
};

// Prints the table (or the JSON lines) to `out`. InvalidArgument for sizes
// out of range; FailedPrecondition where the process may run on one
// processor only (no other core to read from).
Status RunCacheSharingBench(const CacheSharingOptions& options, std::ostream& out);

}  // namespace tstat::bench
