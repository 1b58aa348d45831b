// See streamed_table.h.
#include "io/write/streamed_table.h"

#include <hdf5.h>
#include <libdeflate.h>

#include <algorithm>
#include <cstring>

#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_type.h"

namespace tstat::io {

std::string StreamedTable::What(const std::string& path) const {
  return path + ": dataset '" + name_ + "'";
}

Result<H5Type> StreamedTable::FileType() const {
  TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, row_type_());
  return PackedCopy(mem_type.get());
}

Status StreamedTable::Reset(RowTypeFn row_type, int level) {
  Close();
  row_type_ = row_type;
  level_ = std::clamp(level, 0, 9);
  TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, row_type_());
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopy(mem_type.get()));
  packer_ = RowPacker::Make(mem_type.get(), file_type.get());
  if (!packer_) {
    return Status::Internal(std::string("table '") + name_ +
                            "': its rows cannot be packed by copying bytes");
  }
  row_bytes_ = packer_->file_size();
  // The chunk WriteNewDataset gives a 1-D table of more than a chunk's bytes
  // (h5_dataset.cc, ChunkDims), so streamed and whole-written tables agree.
  chunk_rows_ = std::max<std::uint64_t>(kChunkBytes / row_bytes_, 1);
  return Status::OK();
}

void StreamedTable::Close() {
  dataset_ = H5DataSet();
  staged_ = 0;
  written_ = 0;
}

Status StreamedTable::Append(hid_t file, const void* row, ChunkDeflater* deflater,
                             const std::string& path) {
  if (!packer_) return Status::Internal(What(path) + ": appended to before Reset");
  if (level_ == 0) {  // contiguous at Finish: everything stays staged
    const std::size_t at = static_cast<std::size_t>(staged_) * row_bytes_;
    if (stage_.size() < at + row_bytes_) {
      stage_.resize(std::max<std::size_t>(2 * stage_.size(), at + row_bytes_));
    }
    packer_->Pack(static_cast<const std::uint8_t*>(row), 1, stage_.data() + at);
    ++staged_;
    return Status::OK();
  }
  // The chunk's stage is made at the first row, not at Reset: a session
  // of raw snapshots only never needs it (nor its pages, faulted in and
  // zeroed).
  if (staged_ == 0 && stage_.size() < chunk_rows_ * row_bytes_) {
    stage_.resize(chunk_rows_ * row_bytes_);
  }
  packer_->Pack(static_cast<const std::uint8_t*>(row), 1,
                stage_.data() + static_cast<std::size_t>(staged_) * row_bytes_);
  if (++staged_ < chunk_rows_) return Status::OK();
  if (!dataset_.valid()) TSTAT_RETURN_IF_ERROR(CreateChunked(file, path));
  return WriteStagedChunk(deflater, path);
}

Status StreamedTable::CreateChunked(hid_t file, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, FileType());
  TSTAT_ASSIGN_OR_RETURN(dataset_, CreateExtendibleChunked(file, name_, file_type.get(),
                                                           chunk_rows_, level_, What(path)));
  return Status::OK();
}

Status WriteStreamedChunk(hid_t dataset, std::uint8_t* stage, std::uint64_t staged,
                          std::uint64_t chunk, std::size_t element_bytes, std::uint64_t written,
                          int level, ChunkDeflater* deflater, const std::string& what,
                          std::size_t period, std::uint32_t* stored_crc) {
  const hsize_t extent[1] = {written + staged};
  if (written > 0 && H5Dset_extent(dataset, extent) < 0) {
    return H5Failure(StatusCode::kIoError,
                     what + ": extending to " + std::to_string(extent[0]) + " elements failed");
  }
  const std::size_t chunk_bytes = static_cast<std::size_t>(chunk) * element_bytes;
  const std::size_t used = static_cast<std::size_t>(staged) * element_bytes;
  if (used < chunk_bytes) std::memset(stage + used, 0, chunk_bytes - used);
  TSTAT_ASSIGN_OR_RETURN(
      ChunkDeflater::Output z,
      deflater->ShuffleDeflate(stage, chunk_bytes, element_bytes, level, period));
  if (stored_crc != nullptr) {
    *stored_crc = static_cast<std::uint32_t>(libdeflate_crc32(0, z.data, z.size));
  }
  const hsize_t offset[1] = {written};
  if (H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset, z.size, z.data) < 0) {
    return H5Failure(StatusCode::kIoError, what + ": writing the chunk at element " +
                                               std::to_string(written) + " failed");
  }
  return Status::OK();
}

Status StreamedTable::WriteStagedChunk(ChunkDeflater* deflater, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(WriteStreamedChunk(dataset_.get(), stage_.data(), staged_, chunk_rows_,
                                           row_bytes_, written_, level_, deflater, What(path),
                                           static_cast<std::size_t>(step_rows_)));
  written_ += staged_;
  staged_ = 0;
  return Status::OK();
}

Status StreamedTable::Finish(hid_t file, ChunkDeflater* deflater, const std::string& path) {
  if (!dataset_.valid()) {  // never filled a chunk (or level 0): one fixed-size dataset
    const std::uint64_t rows = staged_;
    staged_ = 0;
    if (rows == 0) return Status::OK();
    TSTAT_ASSIGN_OR_RETURN(H5Type file_type, FileType());
    return WriteNewDataset(file, name_, file_type.get(), file_type.get(), {rows}, stage_.data(),
                           level_, path, deflater);
  }
  if (staged_ > 0) TSTAT_RETURN_IF_ERROR(WriteStagedChunk(deflater, path));
  written_ = 0;
  // Checked: closing writes the dataset's final extent and chunk index.
  if (H5Dclose(dataset_.release()) < 0) {
    return H5Failure(StatusCode::kIoError, What(path) + ": close failed");
  }
  return Status::OK();
}

}  // namespace tstat::io
