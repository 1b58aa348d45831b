// EvictFromCaches: writes a memory range back and drops its lines from every
// processor's caches (x86-64's clflushopt), for the capture thread to call
// on a tensor it has read.
//
// Why: the capture thread reads a layer's output on another core while the
// training thread goes on. The lines it read stay in its core's caches as
// shared copies, and when the training thread later writes over that memory
// (the allocator hands it out again in the backward pass, or to the next
// step's outputs) each write first has to take the line back from the other
// core. Dropping the lines once read moves that cost to the capture thread;
// the training thread's next reads of the tensor come from memory instead.
// Which of the two costs more depends on how the cores share their caches:
// pipeline.early_capture_evict turns it off.
#pragma once

#include <cstddef>

namespace tstat::host {

// Whether EvictFromCaches does anything on this processor (x86-64 with
// clflushopt).
bool CanEvictFromCaches();

// Evicts every cache line that holds a byte of [data, data + bytes). Reads
// and writes nothing; touches no line outside the range. Nothing where
// CanEvictFromCaches() is false.
void EvictFromCaches(const void* data, std::size_t bytes);

}  // namespace tstat::host
