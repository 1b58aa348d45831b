// IsolatedSegmentReads: reads segments once in a child process first, so
// that a file crafted to crash or hang libhdf5's own parser (object headers,
// B-trees: nothing tstat can check through HDF5's API first) ends the child,
// not the reader. See TrialOptions::isolate_segment_reads (tstat/trial.h).
//
// One child serves every check: it is forked at the first one (while the
// reader is still small: a fork copies the page tables of the whole
// process) and reads the paths it is sent over a socket, one reply byte per
// segment. A child that dies or hangs is reaped and reported for that
// segment; the next check starts a new one. The HDF5 lock is held across
// fork(), so no other thread of this process is inside HDF5 when its memory
// is copied; the child, one thread holding that lock, walks each segment
// with WalkSegmentLocked (segment_reader.h: everything libhdf5 parses, not
// the record data tstat decodes itself) and exits with _exit when the
// socket closes.
// Thread safety: one thread at a time (a Trial's).
#pragma once

#include <sys/types.h>

#include <string>

#include "tstat/status.h"

namespace tstat::io {

class IsolatedSegmentReads {
 public:
  // A check that takes longer than `timeout_s` kills the child.
  explicit IsolatedSegmentReads(double timeout_s) : timeout_s_(timeout_s) {}
  ~IsolatedSegmentReads();  // closes the socket and reaps the child
  IsolatedSegmentReads(const IsolatedSegmentReads&) = delete;
  IsolatedSegmentReads& operator=(const IsolatedSegmentReads&) = delete;

  // OK when the child finished reading `path` (whatever the outcome: the
  // caller reads the segment again for its contents or its error), its
  // seal not checked again when `seal_verified` (the caller just did), and
  // with `records_only` only what a read of its records parses, the stats
  // table's metadata only with `stats_table` (WalkSegmentLocked);
  // kCorruption naming `path` when the child was killed by a signal, exited,
  // or ran past the timeout and was killed; kInternal when no child could be
  // started.
  Status Check(const std::string& path, bool seal_verified = false, bool records_only = false,
               bool stats_table = true);

  // Children started so far (the first, and one after each that died).
  int children_started() const { return started_; }

 private:
  Status Start(const std::string& path);
  // Reaps the child (killing it first with `kill`); its wait status.
  int Stop(bool kill);

  double timeout_s_;
  pid_t pid_ = -1;
  int socket_ = -1;
  int started_ = 0;
};

}  // namespace tstat::io
