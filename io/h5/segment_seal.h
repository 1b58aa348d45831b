// The seal of a segment file: an integrity header in the HDF5 user block.
//
// A segment file is 512 bytes of seal followed by the HDF5 file. HDF5 looks
// for its superblock at offsets 0, 512, 1024, ... and treats what precedes it
// as a user block (a region reserved for applications that HDF5 never
// interprets), so h5py and h5dump read segments as usual (h5py reports
// userblock_size 512). The seal is plain text padded with NUL bytes:
//     "TSTAT-SEGMENT 1\nlength <file bytes>\ncrc32 <8 hex digits>\n"
// where crc32 (zlib/IEEE, as Python's zlib.crc32; computed with libdeflate)
// covers bytes [512, length).
// A reader verifies the seal BEFORE handing the file to HDF5, so a truncated,
// extended or overwritten segment is reported as kCorruption deterministically
// instead of reaching HDF5's parser with damaged metadata. Any change to the
// 512 header bytes (including the padding) also fails verification.
// Thread safety: plain file I/O; no HDF5, no lock needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::io {

inline constexpr std::uint64_t kSegmentUserBlock = 512;

// The 512 bytes of the seal of a file of `length` bytes whose bytes
// [512, length) have CRC-32 `crc`.
std::string SegmentSealHeader(std::uint64_t length, std::uint32_t crc);
// Computes the checksum of image[512, size) and writes the seal into
// image[0, 512). `size` >= 512.
void SealSegmentImage(std::vector<std::uint8_t>* image);
// Continues `crc` (CRC-32, zlib's) over bytes [begin, end) of the open file
// `fd`; kCorruption if the file ends before `end`, kIoError if it cannot be
// read (errors name `path`).
Status Crc32OfFileRange(int fd, std::uint64_t begin, std::uint64_t end, const std::string& path,
                        std::uint32_t* crc);
// kCorruption (naming `path` and what does not match) unless the seal is
// intact; kIoError when the file cannot be read.
Status VerifySegmentSeal(const std::string& path);

}  // namespace tstat::io
