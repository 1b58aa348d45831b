// Reading segments written before format_version 3 (versions 1 and 2), whose
// strings -- attributes, config, tensor names, collections, drop kinds and
// reasons, and in version 1 raw_index's `dataset` and `shape` -- are
// variable-length. libhdf5 reads variable-length data from its global heap
// without validating it: a crafted heap crashes the reading process inside
// libhdf5 (h5py too). So these segments are read only when the person
// running the reader says they trust them: TSTAT_READ_LEGACY_SEGMENTS=1.
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/format/segment_buffers.h"
#include "io/format/segment_schema.h"
#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

inline constexpr char kReadLegacySegmentsEnv[] = "TSTAT_READ_LEGACY_SEGMENTS";

// Whether TSTAT_READ_LEGACY_SEGMENTS is set to 1.
bool LegacySegmentsAllowed();

// kNotSupported naming `path` (a segment without a header table), why it is
// not read and the way to read it anyway.
Status LegacySegmentRefused(const std::string& path);

// The tensors table of a version 1 or 2 segment (variable-length names) as
// the rows of version 3.
Status ReadLegacyTensorRows(hid_t file, const std::string& path, std::vector<TensorRow>* rows);
// Its drops table (variable-length kind and reason) as the rows of version 3.
Status ReadLegacyDropRows(hid_t file, const std::string& path, std::vector<DropRow>* rows);
// A version 1 raw_index (variable-length dataset name and shape), converted
// to the rows and shapes of later versions.
Status ReadRawIndexV1(hid_t file, const std::string& path, SegmentBuffers* b);

}  // namespace tstat::io
