// See packed_raw_dataset.h.
#include "io/write/packed_raw_dataset.h"

#include <algorithm>
#include <cstring>

#include "io/format/segment_schema.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/write/segment_file_writer.h"

namespace tstat::io {

void PackedRawDataset::Reset(int level) {
  level_ = std::clamp(level, 0, 9);
  stage_.clear();
  written_ = 0;
  dataset_ = H5DataSet();
}

Status PackedRawDataset::Append(hid_t file, const std::uint8_t* data, std::size_t n,
                                const std::string& path) {
  if (stage_.capacity() < kChunkBytes) stage_.reserve(kChunkBytes);
  while (n > 0) {
    const std::size_t take = std::min(n, kChunkBytes - stage_.size());
    stage_.insert(stage_.end(), data, data + take);
    data += take;
    n -= take;
    if (stage_.size() < kChunkBytes) break;
    if (!dataset_.valid()) TSTAT_RETURN_IF_ERROR(CreateChunked(file, path));
    TSTAT_RETURN_IF_ERROR(WriteStagedChunk(path));
  }
  return Status::OK();
}

Status PackedRawDataset::CreateChunked(hid_t file, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(EnsureRawGroup(file, path));
  TSTAT_ASSIGN_OR_RETURN(
      dataset_, CreateExtendibleChunked(file, kRawPackedDataset, H5T_STD_U8LE, kChunkBytes, level_,
                                        path + ": dataset '" + kRawPackedDataset + "'"));
  return Status::OK();
}

Status PackedRawDataset::WriteStagedChunk(const std::string& path) {
  const std::string what = path + ": dataset '" + kRawPackedDataset + "'";
  const std::size_t used = stage_.size();
  // The extent first: a chunk is written only where the dataset reaches.
  const hsize_t extent[1] = {written_ + used};
  if (written_ > 0 && H5Dset_extent(dataset_.get(), extent) < 0) {
    return H5Failure(StatusCode::kIoError,
                     what + ": extending to " + std::to_string(extent[0]) + " bytes failed");
  }
  stage_.resize(kChunkBytes, 0);  // an edge chunk is stored whole; readers stop at the extent
  const std::uint8_t* bytes = stage_.data();
  std::size_t size = kChunkBytes;
  if (level_ > 0) {
    // Shuffling 1-byte elements changes nothing: deflate alone is the
    // declared shuffle + deflate.
    TSTAT_ASSIGN_OR_RETURN(ChunkDeflater::Output z, deflater_.Deflate(bytes, size, level_));
    bytes = z.data;
    size = z.size;
  }
  const hsize_t offset[1] = {written_};
  if (H5Dwrite_chunk(dataset_.get(), H5P_DEFAULT, 0, offset, size, bytes) < 0) {
    return H5Failure(StatusCode::kIoError,
                     what + ": writing the chunk at byte " + std::to_string(written_) + " failed");
  }
  written_ += used;
  stage_.clear();
  return Status::OK();
}

Status PackedRawDataset::Finish(hid_t file, const std::string& path) {
  if (!dataset_.valid()) {  // never filled a chunk: one fixed-size dataset, as before
    Status s = WritePackedRawSnapshots(file, stage_, level_, path);
    stage_.clear();
    return s;
  }
  if (!stage_.empty()) TSTAT_RETURN_IF_ERROR(WriteStagedChunk(path));
  // Checked: closing writes the dataset's final extent and chunk index.
  if (H5Dclose(dataset_.release()) < 0) {
    return H5Failure(StatusCode::kIoError,
                     path + ": dataset '" + kRawPackedDataset + "': close failed");
  }
  return Status::OK();
}

}  // namespace tstat::io
