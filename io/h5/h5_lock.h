// The process-wide HDF5 lock.
//
// Debian's libhdf5 is the serial build: the library is not thread-safe, so
// every io entry point that calls HDF5 (the writer thread's Write/Flush, a
// Trial's Refresh/raw reads in another thread) holds this one lock for the
// whole time it touches HDF5 objects -- including when RAII handles close, so
// an H5Lock must be constructed BEFORE the handles of its scope. The lock is
// recursive, so an entry point may call another entry point's helpers.
// Taking it the first time also turns off HDF5's automatic printing of error
// stacks to stderr; errors are read with TakeH5ErrorStack() (h5_error.h).
#pragma once

#include <mutex>

namespace tstat::io {

std::recursive_mutex& H5Mutex();

// Holds H5Mutex() for the scope. Not copyable.
class H5Lock {
 public:
  H5Lock();
  H5Lock(const H5Lock&) = delete;
  H5Lock& operator=(const H5Lock&) = delete;

 private:
  std::lock_guard<std::recursive_mutex> guard_;
};

}  // namespace tstat::io
