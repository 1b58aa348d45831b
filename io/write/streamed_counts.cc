// See streamed_counts.h.
#include "io/write/streamed_counts.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/write/streamed_table.h"

namespace tstat::io {
namespace {

hid_t CountType(int width) {
  return width == 2 ? H5T_NATIVE_UINT16 : width == 4 ? H5T_NATIVE_UINT32 : H5T_NATIVE_UINT64;
}

template <class Narrow>
void NarrowInto(const std::uint64_t* in, std::size_t n, std::uint8_t* out) {
  Narrow* o = reinterpret_cast<Narrow*>(out);
  for (std::size_t i = 0; i < n; ++i) o[i] = static_cast<Narrow>(in[i]);
}

void NarrowTo(int width, const std::uint64_t* in, std::size_t n, std::uint8_t* out) {
  if (width == 2) return NarrowInto<std::uint16_t>(in, n, out);
  if (width == 4) return NarrowInto<std::uint32_t>(in, n, out);
  std::memcpy(out, in, n * sizeof(std::uint64_t));
}

}  // namespace

int CountWidthBytes(std::uint64_t any_bits) {
  return any_bits <= UINT16_MAX ? 2 : any_bits <= UINT32_MAX ? 4 : 8;
}

std::string StreamedCounts::What(const std::string& path) const {
  return path + ": dataset '" + name_ + "'";
}

std::uint64_t StreamedCounts::ChunkElements(int width) const {
  // The chunk WriteNewDataset gives a 1-D array of more than a chunk's bytes.
  return kChunkBytes / static_cast<std::size_t>(width);
}

void StreamedCounts::Reset(int level) {
  Close();
  level_ = std::clamp(level, 0, 9);
}

void StreamedCounts::Close() {
  dataset_ = H5DataSet();
  wide_.clear();
  wide_bits_ = 0;
  width_ = 0;
  staged_ = 0;
  written_ = 0;
}

void StreamedCounts::Narrow(std::size_t from, std::size_t n, std::size_t at) {
  NarrowTo(width_, wide_.data() + from, n, stage_.data() + at * static_cast<std::size_t>(width_));
}

Status StreamedCounts::Append(hid_t file, const std::uint64_t* counts, std::size_t n,
                              ChunkDeflater* deflater, const std::string& path) {
  if (width_ == 0) {
    for (std::size_t i = 0; i < n; ++i) wide_bits_ |= counts[i];
    wide_.insert(wide_.end(), counts, counts + n);
    // Level 0 writes one contiguous array at Finish: the width is never fixed early.
    if (level_ == 0 || wide_.size() < ChunkElements(CountWidthBytes(wide_bits_))) {
      return Status::OK();
    }
    return FixWidth(file, deflater, path);
  }
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < n; ++i) bits |= counts[i];
  if (CountWidthBytes(bits) > width_) {
    return Status::Internal(What(path) + ": a count of " + std::to_string(bits) +
                            " bits does not fit the segment's " + std::to_string(8 * width_) +
                            "-bit counts");
  }
  const std::uint64_t chunk = ChunkElements(width_);
  std::size_t done = 0;
  while (done < n) {
    const std::size_t take =
        static_cast<std::size_t>(std::min<std::uint64_t>(chunk - staged_, n - done));
    NarrowTo(width_, counts + done, take,
             stage_.data() + static_cast<std::size_t>(staged_) * static_cast<std::size_t>(width_));
    staged_ += take;
    done += take;
    if (staged_ == chunk) TSTAT_RETURN_IF_ERROR(WriteStaged(deflater, path));
  }
  return Status::OK();
}

Status StreamedCounts::FixWidth(hid_t file, ChunkDeflater* deflater, const std::string& path) {
  width_ = CountWidthBytes(wide_bits_);
  const std::uint64_t chunk = ChunkElements(width_);
  if (stage_.size() < kChunkBytes) stage_.assign(kChunkBytes, 0);
  TSTAT_ASSIGN_OR_RETURN(
      dataset_, CreateExtendibleChunked(file, name_, CountType(width_), chunk, level_, What(path)));
  std::size_t from = 0;
  while (wide_.size() - from >= chunk) {
    Narrow(from, static_cast<std::size_t>(chunk), 0);
    staged_ = chunk;
    from += static_cast<std::size_t>(chunk);
    TSTAT_RETURN_IF_ERROR(WriteStaged(deflater, path));
  }
  staged_ = wide_.size() - from;
  Narrow(from, static_cast<std::size_t>(staged_), 0);
  wide_.clear();
  return Status::OK();
}

Status StreamedCounts::WriteStaged(ChunkDeflater* deflater, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(WriteStreamedChunk(dataset_.get(), stage_.data(), staged_,
                                           ChunkElements(width_), static_cast<std::size_t>(width_),
                                           written_, level_, deflater, What(path)));
  written_ += staged_;
  staged_ = 0;
  return Status::OK();
}

Status StreamedCounts::Finish(hid_t file, ChunkDeflater* deflater, const std::string& path) {
  if (width_ == 0) {  // never filled a chunk (or level 0): one fixed-size array, narrowed
    const std::size_t n = wide_.size();
    if (n == 0) return Status::OK();
    const int width = CountWidthBytes(wide_bits_);
    if (stage_.size() < n * static_cast<std::size_t>(width)) {
      stage_.resize(n * static_cast<std::size_t>(width));
    }
    NarrowTo(width, wide_.data(), n, stage_.data());
    wide_.clear();
    wide_bits_ = 0;
    const hid_t type = CountType(width);
    return WriteNewDataset(file, name_, type, type, {n}, stage_.data(), level_, path, deflater);
  }
  if (staged_ > 0) TSTAT_RETURN_IF_ERROR(WriteStaged(deflater, path));
  written_ = 0;
  width_ = 0;
  // Checked: closing writes the dataset's final extent and chunk index.
  if (H5Dclose(dataset_.release()) < 0) {
    return H5Failure(StatusCode::kIoError, What(path) + ": close failed");
  }
  return Status::OK();
}

}  // namespace tstat::io
