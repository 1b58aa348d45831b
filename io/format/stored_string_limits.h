// How long the strings a segment stores may be (bytes of UTF-8). Segments
// store strings fixed-length (segment_schema.h), so these bound what the
// writer accepts and what a row struct holds. Free of HDF5 so that the host
// can check names against them when they are registered.
#pragma once

#include <cstddef>

namespace tstat::io {

// The longest tensor or scalar name (no NUL) a segment stores.
inline constexpr std::size_t kTensorNameChars = 1024;
// The longest collection name (sessions accept 128; rules' own are longer).
inline constexpr std::size_t kCollectionNameChars = 1024;
// Drop kinds ("raw", "stats", "delta") and reasons; a longer reason is cut
// at a UTF-8 character boundary and ends in "...".
inline constexpr std::size_t kDropKindChars = 32;
inline constexpr std::size_t kDropReasonChars = 1024;

}  // namespace tstat::io
