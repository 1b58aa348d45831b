// RowCopyPlan: reading stored compound rows into the memory type by plain
// copies, when no value needs converting. tstat's tables are stored packed
// (no padding) and read into padded C structs of the same members; libhdf5's
// H5Tconvert then copies member by member through its generic conversion
// path, which was the largest cost of decoding a segment's rows. When every
// member the two types share has the same type on both sides (nested
// compounds member by member), the conversion is a fixed set of byte runs
// (members adjacent on both sides merged into one run); members the stored
// type lacks stay as the caller's background (zeros), as H5Tconvert leaves
// them. Rows that are one little-endian integer stored narrower than it is
// read (tstat stores histogram counts in 16 or 32 bits and reads them as 64)
// are widened by a plain loop. Otherwise (a width or byte order that differs
// inside a compound, a string of another length) there is no plan, and the
// caller converts with H5Tconvert.
// Callers hold the HDF5 lock (h5_lock.h) to build a plan; Apply needs none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "io/h5/h5_handle.h"

namespace tstat::io {

class RowCopyPlan {
 public:
  // The plan for rows stored as `stored` read as `mem`, or nullopt.
  static std::optional<RowCopyPlan> Build(hid_t stored, hid_t mem);

  // Copies `rows` rows of stored_size bytes at `src` into rows of mem_size
  // bytes at `dst` (bytes of `dst` no run covers are left as they are).
  void Apply(const unsigned char* src, std::size_t rows, unsigned char* dst) const;

  struct Run {
    std::size_t src, dst, bytes;
  };
  const std::vector<Run>& runs() const { return runs_; }
  // Whether it widens an integer (then runs() is empty).
  bool widens() const { return widen_; }

 private:
  // Builds the widening of one integer, or false.
  bool BuildWidening(hid_t stored, hid_t mem);

  std::vector<Run> runs_;
  std::size_t stored_size_ = 0, mem_size_ = 0;
  bool widen_ = false;  // one integer widened: stored_size_ < mem_size_
  bool widen_signed_ = false;
};

}  // namespace tstat::io
