// See grouped_stats_table.h.
#include "io/write/grouped_stats_table.h"

#include <hdf5.h>
#include <libdeflate.h>

#include <algorithm>
#include <cstring>

#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_type.h"
#include "io/h5/segment_seal.h"
#include "io/write/streamed_table.h"

namespace tstat::io {

Status GroupedStatsTable::Reset(int level) {
  Close();
  level_ = std::clamp(level, 0, 9);
  if (packer_) return Status::OK();
  TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, StatsRowType());
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopy(mem_type.get()));
  packer_ = RowPacker::Make(mem_type.get(), file_type.get());
  if (!packer_) return Status::Internal("stats rows cannot be packed by copying bytes");
  row_bytes_ = packer_->file_size();
  return Status::OK();
}

void GroupedStatsTable::Close() {
  packed_.clear();
  ids_.clear();
  capture_.clear();
  modes_.clear();
}

void GroupedStatsTable::Append(const StatsRow& row, std::uint32_t capture_index) {
  const std::size_t at = packed_.size();
  packed_.resize(at + row_bytes_);
  packer_->Pack(reinterpret_cast<const std::uint8_t*>(&row), 1, packed_.data() + at);
  ids_.push_back(row.tensor_id);
  capture_.push_back(capture_index);
  modes_.push_back(static_cast<std::uint8_t>(1u << (row.mode & 7u)));
}

void GroupedStatsTable::GroupOrder() {
  const std::size_t n = ids_.size();
  order_.resize(n);
  const std::uint32_t max_id = *std::max_element(ids_.begin(), ids_.end());
  if (max_id < 4 * n + 65536) {  // dense ids, as sessions give: a counting sort
    counts_.assign(static_cast<std::size_t>(max_id) + 2, 0);
    for (std::uint32_t id : ids_) ++counts_[id + 1];
    for (std::size_t i = 1; i < counts_.size(); ++i) counts_[i] += counts_[i - 1];
    for (std::uint32_t i = 0; i < n; ++i) order_[counts_[ids_[i]]++] = i;
    return;
  }
  for (std::uint32_t i = 0; i < n; ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [this](std::uint32_t a, std::uint32_t b) { return ids_[a] < ids_[b]; });
}

Status GroupedStatsTable::Finish(hid_t file, ChunkDeflater* deflater, const std::string& path) {
  layout_.reset();
  const std::size_t n = ids_.size();
  if (n == 0) return Status::OK();
  GroupOrder();
  grouped_capture_.resize(n);
  tensor_rows_.clear();
  tensor_modes_.clear();
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint32_t i = order_[k];
    grouped_capture_[k] = capture_[i];
    if (tensor_rows_.empty() || tensor_rows_.back().tensor_id != ids_[i]) {
      tensor_rows_.push_back(StatsTensorRow{ids_[i], k, 0});
      tensor_modes_.push_back(0);
    }
    ++tensor_rows_.back().row_count;
    tensor_modes_.back() |= modes_[i];
  }
  if (level_ == 0) {  // one contiguous dataset: the rows in tensor order, whole
    std::vector<std::uint8_t> grouped(n * row_bytes_);
    for (std::size_t k = 0; k < n; ++k) {
      std::memcpy(grouped.data() + k * row_bytes_,
                  packed_.data() + std::size_t{order_[k]} * row_bytes_, row_bytes_);
    }
    TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, StatsRowType());
    TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopy(mem_type.get()));
    TSTAT_RETURN_IF_ERROR(WriteNewDataset(file, kStatsTable, file_type.get(), file_type.get(), {n},
                                          grouped.data(), 0, path));
  } else {
    TSTAT_RETURN_IF_ERROR(WriteChunks(file, deflater, path));
  }
  TSTAT_RETURN_IF_ERROR(WriteNewDataset(file, kStatsCaptureIndex, H5T_STD_U32LE, H5T_NATIVE_UINT32,
                                        {n}, grouped_capture_.data(), level_, path, deflater));
  TSTAT_ASSIGN_OR_RETURN(H5Type index_type, StatsTensorRowType());
  return WriteTable(file, kStatsTensorsTable, index_type.get(), tensor_rows_, level_, path,
                    deflater);
}

Status GroupedStatsTable::WriteChunks(hid_t file, ChunkDeflater* deflater,
                                      const std::string& path) {
  const std::string what = path + ": dataset 'stats'";
  const std::uint64_t n = ids_.size();
  const std::uint64_t chunk_rows =
      std::min<std::uint64_t>(std::max<std::size_t>(kChunkBytes / row_bytes_, 1), n);
  TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, StatsRowType());
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopy(mem_type.get()));
  TSTAT_ASSIGN_OR_RETURN(
      H5DataSet dataset,
      CreateExtendibleChunked(file, kStatsTable, file_type.get(), chunk_rows, level_, what));
  StatsLayout layout;
  layout.row_bytes = static_cast<std::uint32_t>(row_bytes_);
  layout.chunk_rows = static_cast<std::uint32_t>(chunk_rows);
  layout.rows = n;
  const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_rows) * row_bytes_;
  for (std::uint64_t first = 0; first < n; first += chunk_rows) {
    const std::uint64_t staged = std::min(chunk_rows, n - first);
    std::uint8_t* stage = deflater->InputBuffer(chunk_bytes);
    // The chunk's rows gathered in tensor order straight from the rows as
    // added (no second copy of the segment's rows).
    for (std::uint64_t r = 0; r < staged; ++r) {
      std::memcpy(stage + r * row_bytes_,
                  packed_.data() + std::size_t{order_[first + r]} * row_bytes_, row_bytes_);
    }
    // Each row matched against the one before it: the same tensor's
    // previous step.
    std::uint32_t crc = 0;
    TSTAT_RETURN_IF_ERROR(WriteStreamedChunk(dataset.get(), stage, staged, chunk_rows, row_bytes_,
                                             first, level_, deflater, what, 1, &crc));
    const hsize_t offset[1] = {first};
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t stored = 0;
    if (H5Dget_chunk_info_by_coord(dataset.get(), offset, &filter_mask, &address, &stored) < 0 ||
        address == HADDR_UNDEF || filter_mask != 0 || stored == 0 || stored > UINT32_MAX) {
      return H5Failure(StatusCode::kInternal, what + ": the chunk just written has no address");
    }
    layout.chunks.push_back(
        StatsChunk{address + kSegmentUserBlock, static_cast<std::uint32_t>(stored), crc});
  }
  if (H5Dclose(dataset.release()) < 0) {
    return H5Failure(StatusCode::kIoError, what + ": close failed");
  }
  for (std::size_t k = 0; k < tensor_rows_.size(); ++k) {  // runs: same rows, same modes
    const StatsTensorRow& t = tensor_rows_[k];
    const auto first = static_cast<std::uint32_t>(t.first_row);
    const auto rows = static_cast<std::uint32_t>(t.row_count);
    const std::uint8_t modes = tensor_modes_[k];
    if (!layout.tensors.empty()) {
      StatsTensorRange& run = layout.tensors.back();
      if (run.rows == rows && run.modes == modes &&
          std::uint64_t{run.tensor_id} + run.count == t.tensor_id &&
          std::uint64_t{run.first_row} + std::uint64_t{run.count} * run.rows == first) {
        ++run.count;
        continue;
      }
    }
    layout.tensors.push_back(StatsTensorRange{t.tensor_id, 1, first, rows, modes});
  }
  layout_ = std::move(layout);
  return Status::OK();
}

}  // namespace tstat::io
