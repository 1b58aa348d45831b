// The config schema: JSON parsing (protobuf JSON mapping plus the strict
// schema check), errors that name the field, round trips, file loading and
// semantic validation.
#include "tstat/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/host/host_test_util.h"
#include "tests/io/io_test_util.h"

namespace tstat {
namespace {

// Expects `json` to be rejected with a message containing `needle`.
void ExpectRejected(const std::string& json, const std::string& needle) {
  Result<SessionConfig> c = ParseConfigJson(json);
  ASSERT_FALSE(c.ok()) << "accepted: " << json;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(needle), std::string::npos)
      << "message: " << c.status().message() << "\nwanted: " << needle;
}

constexpr const char* kFull = R"({
  "out_dir": "/runs/exp1",
  "rank": 1, "world_size": 4,
  "include_collections": ["weights", "gradients", "encoder"],
  "save_config": {"save_interval": 50, "train": {"save_interval": 10},
                  "eval": {"save_steps": [0, 5, 7], "end_step": 100}},
  "raw_save_config": {"save_interval": 1000},
  "stats": {"histogram_bins": 64, "band_lo": -0.9},
  "collections": [
    {"name": "encoder", "include_regex": ["^encoder\\."], "exclude_regex": ["bias$"],
     "tensor_names": ["shared.embedding"],
     "save_config": {"start_step": 150, "save_interval": 100},
     "stats": {"per_channel_axis": 0, "histogram_lo": -1, "histogram_hi": 1}},
    {"name": "labels", "stats": {"label_classes": 10}}
  ],
  "pipeline": {"queue_capacity": 8, "raw_memory_cap_bytes": "1048576",
               "flush_interval_seconds": 0.5, "flush_interval_steps": 20,
               "drop_stats_when_full": true, "stop_check_interval_ms": 100,
               "cpu_threads": 2, "cuda_device": 0, "cuda_inflight": 3,
               "compression_level": 6, "raw_compression_level": 7,
               "early_capture_thread": false, "early_capture_evict": false}
})";

TEST(ConfigTest, ParsesEveryField) {
  Result<SessionConfig> r = ParseConfigJson(kFull);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SessionConfig& c = r.value();
  EXPECT_EQ(c.out_dir, "/runs/exp1");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.include_collections, (std::vector<std::string>{"weights", "gradients", "encoder"}));
  EXPECT_EQ(c.save_config.base.save_interval, 50);
  EXPECT_EQ(c.save_config.train.save_interval, 10);
  EXPECT_FALSE(c.save_config.train.start_step.has_value());
  EXPECT_EQ(c.save_config.eval.save_steps, (std::vector<std::int64_t>{0, 5, 7}));
  EXPECT_EQ(c.save_config.eval.end_step, 100);
  EXPECT_EQ(c.raw_save_config.base.save_interval, 1000);
  EXPECT_EQ(c.stats.histogram_bins, 64);
  EXPECT_EQ(c.stats.band_lo, -0.9);
  EXPECT_FALSE(c.stats.band_hi.has_value());
  ASSERT_EQ(c.collections.size(), 2u);
  const CollectionConfig& enc = c.collections[0];
  EXPECT_EQ(enc.name, "encoder");
  EXPECT_EQ(enc.include_regex, (std::vector<std::string>{"^encoder\\."}));
  EXPECT_EQ(enc.exclude_regex, (std::vector<std::string>{"bias$"}));
  EXPECT_EQ(enc.tensor_names, (std::vector<std::string>{"shared.embedding"}));
  EXPECT_EQ(enc.save_config.base.start_step, 150);
  EXPECT_EQ(enc.stats.per_channel_axis, 0);
  EXPECT_EQ(enc.stats.histogram_lo, -1.0);
  EXPECT_EQ(enc.stats.histogram_hi, 1.0);
  EXPECT_EQ(c.collections[1].stats.label_classes, 10);
  EXPECT_EQ(c.pipeline.queue_capacity, 8);
  EXPECT_EQ(c.pipeline.raw_memory_cap_bytes, 1048576);
  EXPECT_EQ(c.pipeline.flush_interval_seconds, 0.5);
  EXPECT_EQ(c.pipeline.flush_interval_steps, 20);
  EXPECT_TRUE(c.pipeline.drop_stats_when_full);
  EXPECT_EQ(c.pipeline.stop_check_interval_ms, 100);
  EXPECT_EQ(c.pipeline.cpu_threads, 2);
  EXPECT_EQ(c.pipeline.cuda_inflight, 3);
  EXPECT_EQ(c.pipeline.compression_level, 6);
  EXPECT_EQ(c.pipeline.raw_compression_level, 7);
  EXPECT_FALSE(c.pipeline.early_capture_thread);
  EXPECT_FALSE(c.pipeline.early_capture_evict);
}

TEST(ConfigTest, EmptyObjectGivesDefaults) {
  Result<SessionConfig> r = ParseConfigJson("{}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PipelineConfig defaults;
  EXPECT_EQ(r->pipeline.queue_capacity, defaults.queue_capacity);
  EXPECT_EQ(r->pipeline.raw_memory_cap_bytes, 256ll << 20);
  EXPECT_EQ(r->pipeline.flush_interval_seconds, 1.0);
  EXPECT_FALSE(r->pipeline.drop_stats_when_full);
  EXPECT_TRUE(r->pipeline.early_capture_thread);
  EXPECT_TRUE(r->pipeline.early_capture_evict);
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->world_size, 1);
  EXPECT_FALSE(r->save_config.base.save_interval.has_value());
  // Tables at level 1 (tstat's own deflate), raw snapshots stored uncompressed.
  EXPECT_EQ(r->pipeline.compression_level, 1);
  EXPECT_EQ(r->pipeline.raw_compression_level, 0);
}

TEST(ConfigTest, AcceptsCamelCaseNames) {
  Result<SessionConfig> r =
      ParseConfigJson(R"({"saveConfig": {"saveInterval": "7"}, "dryRun": true})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->save_config.base.save_interval, 7);
  EXPECT_TRUE(r->dry_run);
}

TEST(ConfigTest, RoundTripsThroughJson) {
  Result<SessionConfig> a = ParseConfigJson(kFull);
  ASSERT_TRUE(a.ok());
  const std::string json = ConfigToJson(a.value());
  Result<SessionConfig> b = ParseConfigJson(json);
  ASSERT_TRUE(b.ok()) << b.status().ToString() << "\n" << json;
  EXPECT_EQ(ConfigToJson(b.value()), json);
  EXPECT_EQ(b->collections[0].save_config.base.start_step, 150);
  EXPECT_EQ(b->save_config.eval.save_steps, a->save_config.eval.save_steps);
  EXPECT_EQ(b->pipeline.cuda_inflight, 3);
  EXPECT_EQ(b->pipeline.raw_compression_level, 7);
  EXPECT_NE(json.find("\"raw_compression_level\": 7"), std::string::npos) << json;
  // snake_case names in the stored form.
  EXPECT_NE(json.find("\"save_interval\""), std::string::npos);
}

TEST(ConfigTest, UnknownFieldIsNamedWithItsPathAndASuggestion) {
  ExpectRejected(
      R"({"collections": [{"name": "a"}, {"name": "b", "save_config": {"save_intervall": 3}}]})",
      "collections[1].save_config.save_intervall: unknown field (did you mean "
      "\"save_interval\"?)");
  ExpectRejected(R"({"bogus": 1})", "bogus: unknown field");
}

TEST(ConfigTest, MistypedFieldsAreNamed) {
  ExpectRejected(R"({"dry_run": "yes"})", "dry_run: expected true or false, got a string \"yes\"");
  ExpectRejected(R"({"save_config": {"save_interval": 1.5}})",
                 "save_config.save_interval: expected an integer, got a number 1.5");
  ExpectRejected(R"({"save_config": {"save_interval": "often"}})",
                 "save_config.save_interval: expected an integer");
  ExpectRejected(R"({"out_dir": 5})", "out_dir: expected a string, got a number");
  ExpectRejected(R"({"save_config": {"save_steps": [1, "x"]}})", "save_config.save_steps[1]");
  ExpectRejected(R"({"save_config": {"save_steps": 3}})",
                 "save_config.save_steps: expected an array");
  ExpectRejected(R"({"collections": {"name": "a"}})", "collections: expected an array");
  ExpectRejected(R"({"pipeline": {"cpu_threads": 3000000000}})",
                 "pipeline.cpu_threads: 3000000000 is out of the range of a 32-bit integer");
  ExpectRejected(R"({"stats": {"band_lo": true}})", "stats.band_lo: expected a number");
}

TEST(ConfigTest, SyntaxErrorsAndNonObjects) {
  ExpectRejected(R"({"out_dir": )", "not valid JSON: line 1, column 13: unexpected end of input");
  ExpectRejected("{\n  \"out_dir\": \"x\",\n}", "line 3, column 1: expected a quoted field name");
  ExpectRejected(R"({"rank": 1, "rank": 2})", "field \"rank\" appears twice");
  ExpectRejected(R"([1, 2])", "must be a JSON object");
  ExpectRejected(std::string(100, '[') + std::string(100, ']'), "nesting deeper than 64");
  ExpectRejected(R"({"out_dir": "a\qb"})", "invalid escape");
  ExpectRejected(R"({"out_dir": 01})", "expected ',' or '}'");
}

TEST(ConfigTest, StringEscapesAreDecoded) {
  Result<SessionConfig> r =
      ParseConfigJson(R"({"out_dir": "/runs/\u00e9t\u00e9 \ud83d\ude00 \"q\"\/"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out_dir, "/runs/\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80 \"q\"/");
}

TEST(ConfigTest, SemanticErrorsNameTheField) {
  ExpectRejected(R"({"save_config": {"save_interval": -1}})",
                 "save_config.save_interval: must be >= 0");
  ExpectRejected(
      R"({"collections": [{"name": "c", "save_config": {"eval": {"start_step": 10, "end_step": 5}}}]})",
      "collections[0].save_config.eval.end_step: 5 is before start_step 10");
  ExpectRejected(R"({"rank": 4, "world_size": 4})", "rank: must be in [0, world_size)");
  ExpectRejected(R"({"stats": {"histogram_lo": 0}})",
                 "stats.histogram_hi: histogram_lo and histogram_hi must be set together");
  ExpectRejected(R"({"stats": {"histogram_bins": 70000}})", "stats.histogram_bins");
  ExpectRejected(R"({"pipeline": {"queue_capacity": 0}})", "pipeline.queue_capacity");
  ExpectRejected(R"({"pipeline": {"flush_interval_seconds": 0}})",
                 "pipeline.flush_interval_seconds");
  ExpectRejected(R"({"pipeline": {"raw_compression_level": 10}})",
                 "pipeline.raw_compression_level: must be in [0, 9], got 10");
  ExpectRejected(R"({"pipeline": {"raw_compression_level": -1}})",
                 "pipeline.raw_compression_level: must be in [0, 9], got -1");
  ExpectRejected(R"({"pipeline": {"raw_compression_level": "fast"}})",
                 "pipeline.raw_compression_level: expected a 32-bit integer");
  // The tables' level is checked on its own.
  ExpectRejected(R"({"pipeline": {"compression_level": 10, "raw_compression_level": 0}})",
                 "pipeline.compression_level: must be in [0, 9], got 10");
  ExpectRejected(R"({"collections": [{"name": "a b"}]})",
                 "collections[0].name: invalid collection name");
  ExpectRejected(R"({"collections": [{"name": "x"}, {"name": "x"}]})",
                 "collections[1].name: collection \"x\" is configured twice");
}

TEST(ConfigTest, InvalidRegexIsNamed) {
  ExpectRejected(R"({"collections": [{"name": "c", "include_regex": ["ok", "(unclosed"]}]})",
                 "collections[0].include_regex[1]: invalid regex \"(unclosed\"");
  // RE2 has no lookahead: smdebug's "^(?!gradient).*weight" is rejected with a reason.
  ExpectRejected(R"j({"collections": [{"name": "c", "exclude_regex": ["^(?!gradient)"]}]})j",
                 "collections[0].exclude_regex[0]: invalid regex");
}

TEST(ConfigTest, UnknownCollectionInIncludeCollections) {
  ExpectRejected(R"({"include_collections": ["weights", "nope"]})",
                 "include_collections[1]: unknown collection \"nope\"");
  EXPECT_TRUE(
      ParseConfigJson(R"({"include_collections": ["mine"], "collections": [{"name": "mine"}]})")
          .ok());
}

TEST(ConfigTest, ValidateConfigChecksConfigsBuiltInCode) {
  SessionConfig c;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.collections.push_back({});
  c.collections[0].name = "w";
  c.collections[0].include_regex = {"["};
  const Status s = ValidateConfig(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("collections[0].include_regex[0]"), std::string::npos) << s.message();
}

TEST(ConfigTest, LoadsFilesAndTheEnvironmentVariable) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/config.json";
  std::ofstream(path) << R"({"out_dir": "/r", "save_config": {"save_interval": 3}})";
  Result<SessionConfig> c = LoadConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->save_config.base.save_interval, 3);

  ::setenv("TSTAT_CONFIG", path.c_str(), 1);
  Result<SessionConfig> e = LoadConfigFile();
  ::unsetenv("TSTAT_CONFIG");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->out_dir, "/r");

  EXPECT_EQ(LoadConfigFile().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadConfigFile(dir.path() + "/missing.json").status().code(), StatusCode::kIoError);

  std::ofstream(path) << R"({"save_config": {"save_intervall": 3}})";
  Result<SessionConfig> bad = LoadConfigFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config file " + path), std::string::npos);
  EXPECT_NE(bad.status().message().find("save_config.save_intervall"), std::string::npos);
}

// A config path that is a FIFO, a link to /dev/zero, a directory, a symlink
// loop, a huge or an empty file: an error naming the file and the cause, at
// once (nothing blocks or is read whole).
TEST(ConfigTest, HostileConfigFilesAreErrorsNotHangs) {
  testing::TempDir dir;
  for (const std::string& kind : io::testing::HostileFileKinds()) {
    SCOPED_TRACE(kind);
    const std::string path = dir.path() + "/" + kind + ".json";
    ASSERT_TRUE(io::testing::MakeHostileFile(path, kind));
    const auto t0 = std::chrono::steady_clock::now();
    Result<SessionConfig> c = LoadConfigFile(path);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("config file " + path), std::string::npos)
        << c.status().message();
    EXPECT_LT(c.status().message().size(), 1000u);
  }
}

// Steps of small tensors leave a core to the writer thread; larger tensors,
// a configured count, or one core use every thread.
TEST(ConfigTest, SessionCpuThreadsLeaveACoreForSmallTensors) {
  const char* saved_env = std::getenv("OMP_NUM_THREADS");
  const std::string saved = saved_env ? saved_env : "";
  ::setenv("OMP_NUM_THREADS", "4", 1);
  PipelineConfig p;
  EXPECT_EQ(SessionCpuThreads(p, 1000, 1000 * 1000), 3);
  EXPECT_EQ(SessionCpuThreads(p, 1000, 1000 * kSmallTensorElements - 1), 3);
  EXPECT_EQ(SessionCpuThreads(p, 1000, 1000 * kSmallTensorElements), 4);
  EXPECT_EQ(SessionCpuThreads(p, 100, 100 * 100000), 4);
  EXPECT_EQ(SessionCpuThreads(p, 0, 0), 4);  // nothing to reduce
  p.cpu_threads = 5;
  EXPECT_EQ(SessionCpuThreads(p, 1000, 1000), 5);
  p.cpu_threads = 0;
  ::setenv("OMP_NUM_THREADS", "1", 1);
  EXPECT_EQ(SessionCpuThreads(p, 1000, 1000), 1);
  if (saved_env) {
    ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    ::unsetenv("OMP_NUM_THREADS");
  }
}

}  // namespace
}  // namespace tstat
