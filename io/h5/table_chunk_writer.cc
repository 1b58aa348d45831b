// See table_chunk_writer.h.
#include "io/h5/table_chunk_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "io/h5/h5_error.h"

namespace tstat::io {
namespace {

// Appends the copy runs of `file_type` (at file offset `file_base`) taken
// from `mem_type` (at `mem_base`); false when a member cannot be copied as
// bytes (different types, variable-length parts).
bool AddRuns(hid_t mem_type, hid_t file_type, std::size_t mem_base, std::size_t file_base,
             std::vector<RowPacker::Run>* runs) {
  const H5T_class_t cls = H5Tget_class(file_type);
  if (cls != H5Tget_class(mem_type)) return false;
  if (cls == H5T_COMPOUND) {
    const int n = H5Tget_nmembers(file_type);
    if (n < 0 || n != H5Tget_nmembers(mem_type)) return false;
    for (int i = 0; i < n; ++i) {
      char* name = H5Tget_member_name(file_type, static_cast<unsigned>(i));
      if (name == nullptr) return false;
      const int m = H5Tget_member_index(mem_type, name);
      H5free_memory(name);
      if (m < 0) return false;
      H5Type file_member(H5Tget_member_type(file_type, static_cast<unsigned>(i)));
      H5Type mem_member(H5Tget_member_type(mem_type, static_cast<unsigned>(m)));
      if (!file_member.valid() || !mem_member.valid()) return false;
      if (!AddRuns(mem_member.get(), file_member.get(),
                   mem_base + H5Tget_member_offset(mem_type, static_cast<unsigned>(m)),
                   file_base + H5Tget_member_offset(file_type, static_cast<unsigned>(i)), runs)) {
        return false;
      }
    }
    return true;
  }
  if (cls != H5T_INTEGER && cls != H5T_FLOAT && cls != H5T_STRING) return false;
  if (cls == H5T_STRING && H5Tis_variable_str(file_type) != 0) return false;
  if (H5Tequal(mem_type, file_type) <= 0) return false;
  const std::size_t size = H5Tget_size(file_type);
  if (!runs->empty() && runs->back().mem_offset + runs->back().size == mem_base &&
      runs->back().file_offset + runs->back().size == file_base) {
    runs->back().size += size;
  } else {
    runs->push_back({mem_base, file_base, size});
  }
  return true;
}

}  // namespace

std::optional<RowPacker> RowPacker::Make(hid_t mem_type, hid_t file_type) {
  RowPacker p;
  p.mem_size_ = H5Tget_size(mem_type);
  p.file_size_ = H5Tget_size(file_type);
  if (p.mem_size_ == 0 || p.file_size_ == 0) return std::nullopt;
  const bool ok = AddRuns(mem_type, file_type, 0, 0, &p.runs_);
  TakeH5ErrorStack();  // the probing calls above may leave entries
  if (!ok) return std::nullopt;
  std::size_t covered = 0;
  for (const Run& r : p.runs_) covered += r.size;
  if (covered != p.file_size_) return std::nullopt;  // gaps in the file row
  p.identity_ = p.runs_.size() == 1 && p.runs_[0].mem_offset == 0 && p.runs_[0].file_offset == 0 &&
                p.mem_size_ == p.file_size_;
  return p;
}

void RowPacker::Pack(const std::uint8_t* rows, std::size_t n, std::uint8_t* out) const {
  if (identity_) {
    std::memcpy(out, rows, n * mem_size_);
    return;
  }
  for (std::size_t i = 0; i < n; ++i, rows += mem_size_, out += file_size_) {
    for (const Run& r : runs_) std::memcpy(out + r.file_offset, rows + r.mem_offset, r.size);
  }
}

Status WriteDeflatedChunks(hid_t dataset, const RowPacker& packer, const void* data,
                           std::uint64_t rows, std::uint64_t chunk_rows, int level,
                           ChunkDeflater* deflater, const std::string& what) {
  if (chunk_rows == 0) return Status::Internal(what + ": zero rows per chunk");
  const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_rows) * packer.file_size();
  // (Packing and shuffling in one pass measured a few % slower than a
  // memcpy pack followed by the shuffle.)
  std::uint8_t* packed = deflater->InputBuffer(chunk_bytes);
  const auto* in = static_cast<const std::uint8_t*>(data);
  for (std::uint64_t first = 0; first < rows; first += chunk_rows) {
    const std::uint64_t n = std::min(chunk_rows, rows - first);
    packer.Pack(in + first * packer.mem_size(), static_cast<std::size_t>(n), packed);
    if (n < chunk_rows) {  // the edge chunk: whole, zero rows past the end
      std::memset(packed + n * packer.file_size(), 0, chunk_bytes - n * packer.file_size());
    }
    TSTAT_ASSIGN_OR_RETURN(
        ChunkDeflater::Output z,
        deflater->ShuffleDeflate(packed, chunk_bytes, packer.file_size(), level));
    const hsize_t offset[1] = {first};
    if (H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset, z.size, z.data) < 0) {
      return H5Failure(StatusCode::kIoError, what + ": writing a chunk failed");
    }
  }
  return Status::OK();
}

}  // namespace tstat::io
