// HDF5 errors as tstat::Status values.
//
// Every failed HDF5 call leaves a stack of error records (function, message,
// major/minor class). TakeH5ErrorStack() renders it as one line of text and
// clears it, so the Status that reports the failure carries HDF5's own words.
// Call with the HDF5 lock held (h5_lock.h).
#pragma once

#include <string>

#include "tstat/status.h"

namespace tstat::io {

// The current error stack as "H5FD_sec2_write(): file write failed (...) <-
// ... <- H5Dwrite(): can't write data (...)": the innermost cause first, the
// API call last; empty when there is none. Clears it.
std::string TakeH5ErrorStack();

// `code` with the message "<what>: <HDF5 error stack>". Disk-full errors
// (ENOSPC in the stack text) become kResourceExhausted whatever `code` is.
Status H5Failure(StatusCode code, const std::string& what);

}  // namespace tstat::io
