// TSTAT_EXPORT: marks the declarations libtstat.so exports.
//
// The library is compiled with -fvisibility=hidden; only declarations marked
// TSTAT_EXPORT are visible to programs that link the shared library. In the
// static in-tree build the macro changes nothing that matters.
#pragma once

#if defined(_WIN32)
#define TSTAT_EXPORT
#else
#define TSTAT_EXPORT __attribute__((visibility("default")))
#endif
