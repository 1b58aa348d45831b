// TensorBoard's record framing (io/tensorboard/record_writer.h): CRC-32C
// against its published check values, the mask, and a file's bytes parsed
// back by hand. (tests/python/test_tensorboard_export.py reads whole exports
// with an independent parser.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "io/tensorboard/record_writer.h"

namespace tstat::io::tensorboard {
namespace {

std::uint32_t Le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[at + i]);
  return v;
}

std::uint64_t Le64(const std::string& s, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[at + i]);
  return v;
}

// Bit by bit, as the definition says: the reference for the table version.
std::uint32_t Crc32cBitwise(const std::string& s) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(TensorBoardRecordTest, Crc32cCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Every length and alignment against the bitwise definition; and a CRC
  // continued over two parts equals the whole's.
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (std::size_t start = 0; start < 9; ++start) {
    for (std::size_t n = 0; start + n <= data.size(); n += 13) {
      const std::string part = data.substr(start, n);
      ASSERT_EQ(Crc32c(part.data(), part.size()), Crc32cBitwise(part)) << start << " " << n;
    }
  }
  const std::uint32_t first = Crc32c(data.data(), 101);
  EXPECT_EQ(Crc32c(data.data() + 101, data.size() - 101, first), Crc32c(data.data(), data.size()));
  const std::uint32_t crc = Crc32c("123456789", 9);
  EXPECT_EQ(MaskedCrc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoardRecordTest, RecordsAreFramedAndTheFileIsNeverOverwritten) {
  char dir[] = "/tmp/tstat-tb-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/events.out.tfevents.test";
  const std::string big(3 << 20, 'x');  // past the 1 MiB buffer
  {
    auto writer = RecordWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Write("first").ok());
    ASSERT_TRUE((*writer)->Write("").ok());
    ASSERT_TRUE((*writer)->Write(big).ok());
    ASSERT_TRUE((*writer)->Close().ok());
    EXPECT_EQ((*writer)->Write("late").code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*writer)->bytes_written(), 3 * 16 + 5 + big.size());
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  for (const std::string& want : {std::string("first"), std::string(), big}) {
    ASSERT_LE(at + 12, bytes.size());
    const std::uint64_t n = Le64(bytes, at);
    EXPECT_EQ(Le32(bytes, at + 8), MaskedCrc32c(bytes.data() + at, 8));
    ASSERT_EQ(n, want.size());
    EXPECT_EQ(bytes.compare(at + 12, n, want), 0);
    EXPECT_EQ(Le32(bytes, at + 12 + n), MaskedCrc32c(want.data(), want.size()));
    at += 16 + n;
  }
  EXPECT_EQ(at, bytes.size());
  const auto again = RecordWriter::Create(path);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find(path), std::string::npos);
  const auto nowhere = RecordWriter::Create(std::string(dir) + "/no/such/dir/f");
  EXPECT_FALSE(nowhere.ok());
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace tstat::io::tensorboard
