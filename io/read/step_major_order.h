// The stats rows of a segment in the order the writer captured them: steps
// ascending, a step's records in capture order. Format 4 stores the rows
// grouped by tensor, with each row's position in its step
// (stats_capture_index); format 3 and older store them in that order
// already. Linear in the rows for what a writer stores; a crafted file
// (positions repeated or out of range, rows of steps the steps table lacks)
// is put in a valid order by sorting instead.
// Thread safety: a plain function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/format/segment_buffers.h"

namespace tstat::io {

// Row indices of b.stats in capture order, into `order` (resized).
void StepMajorOrder(const SegmentBuffers& b, std::vector<std::uint32_t>* order);

// Whether `steps` ascend strictly by global step, as a writer stores them.
bool StepsAscend(const std::vector<StepRow>& steps);
// The index in `steps` (ascending) of `global_step`, or -1. Rows of one
// tensor are consecutive steps: `hint` (the previous row's index) and the
// one after it are tried before a binary search.
std::ptrdiff_t FindStep(const std::vector<StepRow>& steps, std::int64_t global_step,
                        std::size_t hint);

}  // namespace tstat::io
