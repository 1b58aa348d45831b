// The stats rows of a segment in the order the writer captured them: steps
// ascending, a step's records in capture order. Format 4 stores the rows
// grouped by tensor, with each row's position in its step
// (stats_capture_index); format 3 and older store them in that order
// already. Linear in the rows for what a writer stores; a crafted file
// (positions repeated or out of range, rows of steps the steps table lacks)
// is put in a valid order by sorting instead.
// Thread safety: a plain function.
#pragma once

#include <cstdint>
#include <vector>

#include "io/format/segment_buffers.h"

namespace tstat::io {

// Row indices of b.stats in capture order, into `order` (resized).
void StepMajorOrder(const SegmentBuffers& b, std::vector<std::uint32_t>* order);

}  // namespace tstat::io
