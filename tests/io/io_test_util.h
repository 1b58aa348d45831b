// Helpers shared by the io tests: temporary run directories, tensors and
// step batches with known contents, and comparison of stats records.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/write/hdf5_run_writer.h"
#include "tstat/stats_record.h"

namespace tstat {
class Trial;
}

namespace tstat::io::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents
// (kept when TSTAT_TEST_KEEP_TMP=1, for debugging).
// A child process running `args` (args[0]: the executable's path) with its
// stdout on a pipe.
struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
};
Child Spawn(const std::vector<std::string>& args);
// Appends what the child has written so far to `text` (all of it, until
// end of file, with `until_eof`: once it is dead).
void Drain(int fd, std::string* text, bool until_eof);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The kinds of hostile file a run directory or a config path may hold, and a
// maker of each at `path`: "fifo", "dev_zero" (a symlink to /dev/zero),
// "directory", "symlink_loop", "huge" (2 GiB, sparse), "empty". False when
// this system cannot make it.
std::vector<std::string> HostileFileKinds();
bool MakeHostileFile(const std::string& path, const std::string& kind);

TensorInfo MakeTensorInfo(std::uint32_t id, std::string name,
                          std::vector<std::string> collections = {}, DType dtype = DType::kFloat32,
                          std::vector<std::int64_t> shape = {3, 8});
TensorInfo MakeScalarInfo(std::uint32_t id, std::string name);
// Tensors 0..n-1 named "w0", "w1", ... (MakeTensorInfo's defaults).
std::vector<TensorInfo> NumberedTensors(std::uint32_t n);

StepBatch MakeBatch(std::int64_t global_step, Mode mode = Mode::kGlobal,
                    std::int64_t mode_step = -1);

// A record computed by the test-support reference from a real seeded f32
// tensor of shape [3, 8] (distinct per (step, tensor)): stat set, exponent
// histogram, and -- when `extras` -- an 8-bucket linear histogram, per-channel
// stats along axis 0, a 5-element sample, plus hand-built delta stats and
// value counts.
TensorStatsRecord ReferenceRecord(std::int64_t step, std::uint32_t tensor_id, bool extras);
// A label-count-only record (has_stats false) over an i32 tensor, with a
// hand-built 4x4 confusion matrix.
TensorStatsRecord LabelRecord(std::int64_t step, std::uint32_t tensor_id);
// A stats-only record with stats that are cheap, distinct functions of (step, tensor).
TensorStatsRecord SyntheticStatsRecord(std::int64_t step, std::uint32_t tensor_id);

// A raw snapshot holding `bytes`.
RawSnapshot MakeRawSnapshot(std::uint32_t tensor_id, DType dtype, std::vector<std::int64_t> shape,
                            std::vector<std::uint8_t> bytes);

// Everything `t` answers about its run (workers, counters, config, steps of
// each mode, tensors and their series, raw snapshots, scalars, every step's
// records, drops), as text: two Trials that answer alike give equal text.
std::string TrialAnswers(Trial& t);

// Seals the segment file at `path` again over its current bytes (for tests
// that edit a closed segment with HDF5 and need the seal to match), and
// removes its worker's catalog, which describes the segment as written: the
// edited file is then what a reader reads (crafted catalogs are tested in
// catalog_test.cc).
Status ResealSegmentFile(const std::string& path);

// Opens a writer for `run_dir` (rank/world_size as given); fails the test on error.
std::unique_ptr<Hdf5RunWriter> OpenWriterOrDie(const std::string& run_dir, int rank = 0,
                                               int world_size = 1,
                                               const std::string& config = "{\"test\": true}",
                                               int compression_level = 4);

// Run `dir`/run: `steps` steps (EVAL every third, TRAIN otherwise) of
// tensors t0 .. t<tensors - 1> (ids 0 ..), each step's records in
// `capture_order` (ids), tensor t at step g when saved(g, t), tensor 0 with
// every extra (ReferenceRecord); a flush every `steps_per_segment` steps.
// Returns the run's path.
std::string WriteTensorRun(const TempDir& dir, std::uint32_t tensors, std::int64_t steps,
                           std::int64_t steps_per_segment,
                           const std::vector<std::uint32_t>& capture_order,
                           const std::function<bool(std::int64_t, std::uint32_t)>& saved);

// gtest assertions: stored fields bit-exact (NaN == NaN), derived sum and l2
// within 1e-12 relative of `want`'s.
void ExpectStatsEqual(const TensorStats& got, const TensorStats& want, const std::string& where);
void ExpectRecordEqual(const TensorStatsRecord& got, const TensorStatsRecord& want,
                       const std::string& where);

// RLIMIT_FSIZE lowered to `bytes` (SIGXFSZ ignored, so writes past it fail
// with EFBIG) for the object's lifetime. Needs no privileges.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) return;
    struct rlimit limited = saved_;
    limited.rlim_cur = bytes;
    set_ = ::setrlimit(RLIMIT_FSIZE, &limited) == 0;
  }
  ~FileSizeLimit() {
    if (set_) {
      EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_), 0);
    }
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool set() const { return set_; }

 private:
  struct rlimit saved_ {};
  sighandler_t old_handler_ = SIG_DFL;
  bool set_ = false;
};
}  // namespace tstat::io::testing

// ASSERT/EXPECT that a Status (or Result) is OK, printing it otherwise.
#define TSTAT_ASSERT_OK(expr)                                              \
  do {                                                                     \
    const auto& tstat_ok_tmp_ = (expr);                                    \
    ASSERT_TRUE(tstat_ok_tmp_.ok())                                        \
        << #expr << ": " << tstat::io::testing::StatusText(tstat_ok_tmp_); \
  } while (0)
#define TSTAT_EXPECT_OK(expr)                                              \
  do {                                                                     \
    const auto& tstat_ok_tmp_ = (expr);                                    \
    EXPECT_TRUE(tstat_ok_tmp_.ok())                                        \
        << #expr << ": " << tstat::io::testing::StatusText(tstat_ok_tmp_); \
  } while (0)

namespace tstat::io::testing {
inline std::string StatusText(const Status& s) { return s.ToString(); }
template <class T>
std::string StatusText(const Result<T>& r) {
  return r.status().ToString();
}
}  // namespace tstat::io::testing
