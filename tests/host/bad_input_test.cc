// Bad input to the capture API, each case with the error it must produce:
// invalid configs, unknown collections, duplicate names, null pointers, bad
// dtypes and shapes, dtype mismatches, hostile names, misuse after Close.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tstat/session.h"

namespace tstat {
namespace {

using testing::MakeSession;
using testing::TestConfig;

void ExpectError(const Status& s, StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos)
      << "message: " << s.message() << "\nwanted: " << needle;
}

template <class T>
void ExpectError(const Result<T>& r, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok());
  ExpectError(r.status(), code, needle);
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<io::MemorySink>();
    session_ = MakeSession(TestConfig(), sink_);
    ASSERT_NE(session_, nullptr);
  }
  Result<std::uint32_t> Register(const std::string& name, DType dtype = DType::kFloat32,
                                 std::vector<std::int64_t> shape = {4},
                                 std::vector<std::string> collections = {}) {
    TensorSpec spec;
    spec.name = name;
    spec.view = TensorView::Host(data_.data(), dtype, std::move(shape));
    spec.collections = std::move(collections);
    return session_->RegisterTensor(spec);
  }

  std::vector<double> data_ = std::vector<double>(64, 1.0);
  std::shared_ptr<io::MemorySink> sink_;
  std::unique_ptr<Session> session_;
};

TEST_F(BadInputTest, InvalidConfigsAreRejectedAtCreation) {
  ExpectError(Session::CreateFromJson(R"({"save_config": {"save_intervall": 1}})"),
              StatusCode::kInvalidArgument, "save_config.save_intervall: unknown field");
  ExpectError(Session::CreateFromJson(R"({"dry_run": true, "include_collections": ["nope"]})"),
              StatusCode::kInvalidArgument, "unknown collection \"nope\"");
  ExpectError(Session::Create(SessionConfig{}), StatusCode::kInvalidArgument, "out_dir: required");
  ExpectError(Session::CreateFromFile("/nonexistent/tstat.json"), StatusCode::kIoError,
              "/nonexistent/tstat.json");
}

TEST_F(BadInputTest, UnknownCollection) {
  ExpectError(Register("x", DType::kFloat32, {4}, {"weightz"}), StatusCode::kInvalidArgument,
              "unknown collection \"weightz\"");
  ExpectError(session_->SaveTensor("y", TensorView::Host(data_.data(), DType::kFloat32, 4),
                                   SaveTensorOptions{{"nope"}, false, nullptr}),
              StatusCode::kInvalidArgument, "unknown collection \"nope\"");
}

TEST_F(BadInputTest, DuplicateTensorName) {
  ASSERT_TRUE(Register("fc.weight").ok());
  ExpectError(Register("fc.weight"), StatusCode::kInvalidArgument, "duplicate tensor name");
  ASSERT_TRUE(session_->SaveScalar("lr", 0.1).ok());
  ExpectError(Register("lr"), StatusCode::kInvalidArgument, "duplicate tensor name");
  ExpectError(session_->SaveScalar("fc.weight", 1.0), StatusCode::kInvalidArgument,
              "is a tensor, not a scalar");
  ExpectError(session_->SaveTensor("fc.weight", TensorView::Host(data_.data(), DType::kFloat32, 4)),
              StatusCode::kInvalidArgument, "registered tensors are captured by EndStep");
}

TEST_F(BadInputTest, NullPointer) {
  TensorSpec spec;
  spec.name = "w";
  spec.view = TensorView::Host(nullptr, DType::kFloat32, 4);
  ExpectError(session_->RegisterTensor(spec), StatusCode::kInvalidArgument, "null data pointer");
  ExpectError(session_->SaveTensor("t", TensorView::Host(nullptr, DType::kFloat32, 4)),
              StatusCode::kInvalidArgument, "null data pointer");
}

TEST_F(BadInputTest, InvalidDtypeAndShape) {
  ExpectError(Register("a", static_cast<DType>(42)), StatusCode::kInvalidArgument, "invalid dtype");
  ExpectError(Register("b", DType::kFloat32, {2, -3}), StatusCode::kInvalidArgument,
              "shape[1] is negative");
  TensorSpec spec;
  spec.name = "c";
  spec.view = TensorView::Host(data_.data(), DType::kFloat32, {2, 2});
  spec.view.numel = 5;
  ExpectError(session_->RegisterTensor(spec), StatusCode::kInvalidArgument,
              "shape has 4 elements but numel is 5");
}

// A tensor larger than the engine reduces is refused when registered (and
// when saved ad hoc), naming the limit, instead of being dropped at every step.
TEST_F(BadInputTest, TensorTooLargeForTheEngine) {
  const std::int64_t huge = std::int64_t{1} << 61;
  ExpectError(Register("a", DType::kFloat32, {huge}), StatusCode::kInvalidArgument,
              "numel 2305843009213693952 is more than 1125899906842624 (2^50)");
  TensorSpec spec;
  spec.name = "b";
  spec.view = TensorView::Host(data_.data(), DType::kFloat32, huge);
  ExpectError(session_->RegisterTensor(spec), StatusCode::kInvalidArgument, "(2^50)");
  ExpectError(session_->SaveTensor("c", TensorView::Host(data_.data(), DType::kFloat32, huge)),
              StatusCode::kInvalidArgument, "(2^50)");
}

// Numeric config fields out of their documented ranges are errors naming the
// field and the value.
TEST_F(BadInputTest, ConfigLimitsAreErrors) {
  const auto config = [](const std::string& json) {
    return ParseConfigJson(R"({"out_dir": "/tmp/x", )" + json + "}");
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("world_size": 2147483647)", "world_size: must be in [1, 1048576], got 2147483647"},
      {R"("pipeline": {"flush_interval_seconds": 1e308})", "pipeline.flush_interval_seconds"},
      {R"("pipeline": {"cpu_threads": 100000})", "pipeline.cpu_threads: must be in [0, 4096]"},
      {R"("pipeline": {"stop_check_interval_ms": 1000000000000})", "pipeline.stop_check_interval_ms"},
      {R"("pipeline": {"flush_interval_steps": 1000000000000000})", "pipeline.flush_interval_steps"},
      {R"("stats": {"band_lo": 2, "band_hi": 1})", "band_lo: 2.000000 is above band_hi 1.000000"},
  };
  for (const auto& [json, needle] : cases) {
    SCOPED_TRACE(json);
    Result<SessionConfig> parsed = config(json);
    if (parsed.ok()) {
      ExpectError(ValidateConfig(*parsed), StatusCode::kInvalidArgument, needle);
    } else {
      ExpectError(parsed.status(), StatusCode::kInvalidArgument, needle);
    }
  }
  SessionConfig nul;
  nul.out_dir = std::string("/tmp/a\0b", 8);
  ExpectError(ValidateConfig(nul), StatusCode::kInvalidArgument, "out_dir: contains a NUL");
}

// A huge value is never echoed back in full: every config error stays short.
TEST_F(BadInputTest, ConfigErrorsDoNotEchoHugeValues) {
  const std::string big(std::size_t{10} << 20, 'x');
  const std::vector<std::string> configs = {
      R"({"out_dir": "/tmp/x", ")" + big + R"(": 1})",
      R"({"out_dir": "/tmp/x", "pipeline": {"cpu_threads": ")" + big + R"("}})",
      R"({"out_dir": "/tmp/x", "include_collections": [")" + big + R"("]})",
      R"({"out_dir": "/tmp/x", "collections": [{"name": "c", "include_regex": ["()" + big + R"("]}]})",
      R"({"out_dir": "/tmp/x", "rules": {"enabled": true, "stop_on": ")" + big + R"("}})",
      R"({"out_dir": "/tmp/x", "save_config": {"save_interval": 9223372036854775807)" + big +
          R"(}})",
  };
  for (const std::string& json : configs) {
    Result<SessionConfig> parsed = ParseConfigJson(json);
    const Status s = parsed.ok() ? ValidateConfig(*parsed) : parsed.status();
    ASSERT_FALSE(s.ok()) << json.substr(0, 80);
    EXPECT_LT(s.message().size(), 2000u) << json.substr(0, 80) << ": " << s.message().substr(0, 300);
  }
}

// An integer too large for its field says so (it is an integer).
TEST_F(BadInputTest, IntegerOutOfRangeIsNamedAsSuch) {
  ExpectError(ParseConfigJson(R"({"save_config": {"save_interval": 9223372036854775807}})"),
              StatusCode::kInvalidArgument,
              "save_config.save_interval: 9223372036854775807 is out of the range of a 64-bit "
              "integer");
  ExpectError(ParseConfigJson(R"({"world_size": 3000000000})"), StatusCode::kInvalidArgument,
              "world_size: 3000000000 is out of the range of a 32-bit integer");
  ExpectError(ParseConfigJson(R"({"world_size": 2.5})"), StatusCode::kInvalidArgument,
              "world_size: expected a 32-bit integer, got a number 2.5");
}

// The step counters stop at INT64_MAX with an error instead of wrapping.
TEST_F(BadInputTest, StepCountersDoNotWrap) {
  ASSERT_TRUE(session_->BeginStep(StepKey{INT64_MAX, Mode::kTrain, 5}).ok());
  ASSERT_TRUE(session_->EndStep().ok());
  ExpectError(session_->BeginStep(), StatusCode::kResourceExhausted,
              "step counter is at INT64_MAX");
  ExpectError(session_->EndStep(), StatusCode::kResourceExhausted, "INT64_MAX");
}

TEST_F(BadInputTest, DtypeMismatchOfAnAdhocTensor) {
  ASSERT_TRUE(
      session_->SaveTensor("probe", TensorView::Host(data_.data(), DType::kFloat32, 4)).ok());
  ExpectError(session_->SaveTensor("probe", TensorView::Host(data_.data(), DType::kFloat32, 4)),
              StatusCode::kFailedPrecondition, "already saved at this step");
  ASSERT_TRUE(session_->EndStep().ok());
  ExpectError(session_->SaveTensor("probe", TensorView::Host(data_.data(), DType::kFloat64, 4)),
              StatusCode::kInvalidArgument, "dtype mismatch: saved as f32 before, now f64");
  ASSERT_TRUE(
      session_->SaveTensor("probe", TensorView::Host(data_.data(), DType::kFloat32, 4)).ok());
}

TEST_F(BadInputTest, CudaTensorsWithoutAUsableDevice) {
  TensorSpec spec;
  spec.name = "dev";
  spec.view = TensorView::Host(data_.data(), DType::kFloat32, 4);
  spec.view.space = MemorySpace::kCuda;
  const Result<std::uint32_t> r = session_->RegisterTensor(spec);
  ASSERT_FALSE(r.ok());
  // Without CUDA: kNotSupported; with CUDA but no GPU: kUnavailable.
  EXPECT_TRUE(r.status().code() == StatusCode::kNotSupported ||
              r.status().code() == StatusCode::kUnavailable)
      << r.status().ToString();
}

TEST_F(BadInputTest, HostileNamesAreStoredVerbatimOrRejectedWithAReason) {
  const std::vector<std::string> accepted = {"../../etc/passwd",
                                             "/abs/path",
                                             "quote\"s and 'single'",
                                             "new\nline\ttab",
                                             "%s%n%x",
                                             "名前/テンソル.weight",
                                             "(unbalanced[regex",
                                             std::string(1024, 'x'),
                                             "trailing space ",
                                             "\\backslash"};
  for (const std::string& name : accepted) {
    EXPECT_TRUE(Register(name).ok()) << name;
  }
  ExpectError(Register(""), StatusCode::kInvalidArgument, "tensor name is empty");
  ExpectError(Register(std::string(1025, 'x')), StatusCode::kInvalidArgument, "1025 bytes");
  ExpectError(Register(std::string("nul\0byte", 8)), StatusCode::kInvalidArgument, "NUL");
  ExpectError(Register("bad\xff utf8"), StatusCode::kInvalidArgument, "not valid UTF-8");
  ExpectError(Register("\xed\xa0\x80surrogate"), StatusCode::kInvalidArgument, "not valid UTF-8");
  ExpectError(Register("\xc0\xafoverlong"), StatusCode::kInvalidArgument, "not valid UTF-8");
  ExpectError(session_->SaveScalar("bad\xfe", 1.0), StatusCode::kInvalidArgument, "UTF-8");
  ASSERT_TRUE(session_->EndStep().ok());
  ASSERT_TRUE(session_->Close().ok());
  std::vector<std::string> stored;
  for (const TensorInfo& t : sink_->tensors()) stored.push_back(t.name);
  EXPECT_EQ(stored, accepted);
}

TEST_F(BadInputTest, EverythingFailsCleanlyAfterClose) {
  ASSERT_TRUE(Register("w").ok());
  ASSERT_TRUE(session_->Close().ok());
  EXPECT_TRUE(session_->Close().ok());  // idempotent
  EXPECT_EQ(Register("v").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session_->EndStep().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session_->BeginStep().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session_->SaveScalar("x", 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session_->SetMode(Mode::kEval).code(), StatusCode::kFailedPrecondition);
  // The tensor registered without a step is still declared.
  ASSERT_EQ(sink_->tensors().size(), 1u);
  EXPECT_TRUE(sink_->batches().empty());
}

TEST_F(BadInputTest, CloseWithAnOpenStepKeepsItsAdhocSaves) {
  ASSERT_TRUE(Register("w.weight").ok());
  ASSERT_TRUE(session_->BeginStep().ok());
  ASSERT_TRUE(session_->SaveScalar("loss", 0.25).ok());
  ASSERT_TRUE(session_->SaveScalar("loss", 0.5).ok());  // the last value wins
  ASSERT_TRUE(session_->Close().ok());
  const auto batches = sink_->batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].stats.empty());  // registered tensors are not read at Close
  ASSERT_EQ(batches[0].scalars.size(), 1u);
  EXPECT_EQ(batches[0].scalars[0].value, 0.5);
}

}  // namespace
}  // namespace tstat
