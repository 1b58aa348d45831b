// Names of the files of a run directory (see docs/storage-format.md):
//   RUN/worker-<rank:05d>/seg-<index:012d>.h5      closed, sealed segments
//   RUN/worker-<rank:05d>/seg-<index:012d>.h5.tmp  the segment being written
//   RUN/worker-<rank:05d>/CLOSED                   written last by Close()
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace tstat::io {

// Most workers one run may have: far beyond any job, and small enough that
// every count of workers and ranks fits everywhere it is stored.
inline constexpr int kMaxWorldSize = 1 << 20;

std::string WorkerDirName(int rank);              // "worker-00003"
std::string SegmentFileName(std::int64_t index);  // "seg-000000000007.h5"
// True for "worker-<digits>" (at least 5 digits); sets *rank.
bool ParseWorkerDirName(const std::string& name, int* rank);
// True for "seg-<digits>.h5" exactly (never the .tmp); sets *index.
bool ParseSegmentFileName(const std::string& name, std::int64_t* index);

}  // namespace tstat::io
