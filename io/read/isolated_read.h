// CheckSegmentInChild: reads a segment once in a forked child process, so
// that a file crafted to crash or hang libhdf5's own parser (object headers,
// B-trees: nothing tstat can check through HDF5's API first) ends the child,
// not the reader. See TrialOptions::isolate_segment_reads (tstat/trial.h).
//
// The HDF5 lock is held across fork(), so no other thread of this process
// is inside HDF5 when its memory is copied; the child reads with that lock
// (ReadSegmentLocked), exits with _exit and runs nothing else.
#pragma once

#include <string>

#include "tstat/status.h"

namespace tstat::io {

// OK when the child finished reading (whatever the outcome: the caller
// reads the segment again for its contents or its error); kCorruption naming
// `path` when the child was killed by a signal, exited otherwise than the
// reader does, or ran past `timeout_s` and was killed; kInternal when no
// child could be started.
Status CheckSegmentInChild(const std::string& path, double timeout_s);

}  // namespace tstat::io
