// Bounded reads of files in a run directory (io/h5/posix_file.h).
#include "io/h5/posix_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

// Files of a run directory anyone may have put there (findings.jsonl,
// rules-<rank>.json): a FIFO is refused without blocking on it, /dev/zero
// and a file past the bound are not read, a symlink loop is an error.
TEST(ReadRegularFileTest, HostileFilesAreRefusedWithoutBlockingOrReadingThemWhole) {
  TempDir dir;
  const std::string ok = dir.Sub("ok.json");
  std::ofstream(ok) << "{\"a\": 1}";
  auto text = ReadRegularFile(ok, 100);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text.value(), "{\"a\": 1}");
  auto big = ReadRegularFile(ok, 4);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("ok.json"), std::string::npos) << big.status().message();

  const std::string fifo = dir.Sub("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = ReadRegularFile(fifo, 100);  // would block forever without O_NONBLOCK
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);

  EXPECT_EQ(ReadRegularFile("/dev/zero", 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRegularFile(dir.Sub("."), 100).status().code(), StatusCode::kInvalidArgument);

  const std::string loop = dir.Sub("loop.json");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  auto l = ReadRegularFile(loop, 100);
  EXPECT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("loop.json"), std::string::npos) << l.status().message();
  EXPECT_EQ(ReadRegularFile(dir.Sub("missing.json"), 100).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tstat::io::testing
