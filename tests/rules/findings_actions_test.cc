// The findings log (writer, reader, truncated and corrupt lines), the
// run-directory action sink (STOP, capture requests), the ActionRunner, and a
// Session noticing a STOP file written by the sink.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "tests/io/io_test_util.h"
#include "tests/rules/run_rules_test_util.h"
#include "tstat/session.h"

namespace tstat::rules::runtest {
namespace {

using io::testing::TempDir;

Finding Sample(std::int64_t step, const std::string& tensor = "gradient/fc1.weight") {
  Finding f;
  f.rule = "grad_blowup";
  f.type = "expression";
  f.step = Key(step, Mode::kTrain, step - 1);
  f.worker = 2;
  f.tensor = tensor;
  f.values = {{"l2", 1234.5}, {"nan", NAN}, {"inf", INFINITY}};
  f.message = "l2 > 1e3 held for 3 \"steps\"\n(multi-line)";
  f.wall_time = 1700000000.25;
  return f;
}

void ExpectSame(const Finding& a, const Finding& b) {
  EXPECT_EQ(a.rule, b.rule);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.step.global_step, b.step.global_step);
  EXPECT_EQ(a.step.mode, b.step.mode);
  EXPECT_EQ(a.step.mode_step, b.step.mode_step);
  EXPECT_EQ(a.worker, b.worker);
  EXPECT_EQ(a.tensor, b.tensor);
  EXPECT_EQ(a.message, b.message);
  EXPECT_DOUBLE_EQ(a.wall_time, b.wall_time);
  std::map<std::string, double> va(a.values.begin(), a.values.end());
  std::map<std::string, double> vb(b.values.begin(), b.values.end());
  ASSERT_EQ(va.size(), vb.size());
  for (const auto& [k, v] : va) {
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(vb[k])) << k;
    } else {
      EXPECT_EQ(v, vb[k]) << k;
    }
  }
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FindingsLogTest, OneJsonLinePerFindingRoundTrips) {
  const std::string line = FindingToJson(Sample(12));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  for (const char* field : {"\"rule\":", "\"type\":", "\"step\":", "\"mode\":\"TRAIN\"",
                            "\"mode_step\":", "\"worker\":2",
                            "\"tensor\":", "\"values\":", "\"message\":", "\"time\":"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
  }
  Result<Finding> back = FindingFromJson(line);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(Sample(12), back.value());
  // Run-level findings (no tensor, step -1) too.
  Finding run_level = Sample(-1, "");
  run_level.step = Key(-1);
  ExpectSame(run_level, FindingFromJson(FindingToJson(run_level)).value());
}

TEST(FindingsLogTest, AppendsAreReadableBeforeCloseAndAfterReopen) {
  TempDir dir;
  const std::string path = dir.Sub(kFindingsFileName);
  EXPECT_EQ(ReadFindingsLog(path).status().code(), StatusCode::kNotFound);
  auto w = FindingsLogWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  TSTAT_RR_ASSERT_OK(w.value()->Append(Sample(1)));
  auto early = ReadFindingsLog(path);  // while the writer is open
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(early->findings.size(), 1u);
  TSTAT_RR_ASSERT_OK(w.value()->Append(Sample(2)));
  TSTAT_RR_ASSERT_OK(w.value()->Close());
  EXPECT_EQ(w.value()->Append(Sample(3)).code(), StatusCode::kFailedPrecondition);
  auto again = FindingsLogWriter::Open(path);  // a second writer appends
  ASSERT_TRUE(again.ok());
  TSTAT_RR_ASSERT_OK(again.value()->Append(Sample(3)));
  TSTAT_RR_ASSERT_OK(again.value()->Close());
  auto all = ReadFindingsLog(path);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->findings.size(), 3u);
  EXPECT_FALSE(all->truncated_tail);
  for (int i = 0; i < 3; ++i) ExpectSame(Sample(i + 1), all->findings[i]);
  EXPECT_EQ(FindingsLogWriter::Open(dir.Sub("no/such/dir.jsonl")).status().code(),
            StatusCode::kIoError);
}

TEST(FindingsLogTest, TruncatedLastLineIsToleratedCorruptLineIsNamed) {
  TempDir dir;
  const std::string path = dir.Sub(kFindingsFileName);
  const std::string a = FindingToJson(Sample(1)), b = FindingToJson(Sample(2));
  std::ofstream(path) << a << "\n" << b << "\n" << b.substr(0, b.size() / 2);
  auto r = ReadFindingsLog(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->findings.size(), 2u);
  EXPECT_TRUE(r->truncated_tail);
  // A complete last line without its newline is still a finding.
  std::ofstream(path) << a << "\n" << b;
  r = ReadFindingsLog(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->findings.size(), 2u);
  EXPECT_FALSE(r->truncated_tail);
  // Damage in a complete line is corruption, with its line number.
  std::ofstream(path) << a << "\n\n" << b.substr(0, 20) << "\n" << b << "\n";
  const Status s = ReadFindingsLog(path).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("line 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  std::ofstream(path) << R"({"rule":"r","mode":"TRAINING"})"
                      << "\n";
  EXPECT_EQ(ReadFindingsLog(path).status().code(), StatusCode::kCorruption);
}

TEST(RunDirActionSinkTest, StopFileIsAtomicOneLineAndKeepsTheFirstReason) {
  TempDir dir;
  RunDirActionSink sink(dir.path());
  TSTAT_RR_ASSERT_OK(sink.RequestStop({"grad_blowup", Key(12, Mode::kTrain, 12), 0, "l2 > 1e3"}));
  TSTAT_RR_ASSERT_OK(sink.RequestStop({"other", Key(13), 0, "later"}));
  const std::string text = ReadAll(dir.Sub(kStopFileName));
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;  // exactly one line
  Result<StopRequest> r = ParseStopRequest(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rule, "grad_blowup");
  EXPECT_EQ(r->step.global_step, 12);
  EXPECT_EQ(r->step.mode, Mode::kTrain);
  EXPECT_EQ(r->reason, "l2 > 1e3");
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"STOP"});  // no .tmp left
  EXPECT_EQ(ParseStopRequest("not json").status().code(), StatusCode::kCorruption);
}

TEST(RunDirActionSinkTest, CaptureRequestsAreFilesInRequestOrder) {
  TempDir dir;
  RunDirActionSink sink(dir.path());
  EXPECT_TRUE(ListCaptureRequests(dir.path()).value().empty());
  TSTAT_RR_ASSERT_OK(sink.RequestRawCapture({"r1", Key(5), {"a", "b/c"}, 3}));
  TSTAT_RR_ASSERT_OK(sink.RequestRawCapture({"r2", Key(6), {"d"}, 1}));
  auto list = ListCaptureRequests(dir.path());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].second.rule, "r1");
  EXPECT_EQ((*list)[0].second.tensors, (std::vector<std::string>{"a", "b/c"}));
  EXPECT_EQ((*list)[0].second.steps, 3);
  EXPECT_EQ((*list)[1].second.step.global_step, 6);
  // The training side deletes what it applied.
  ASSERT_EQ(std::remove((*list)[0].first.c_str()), 0);
  EXPECT_EQ(ListCaptureRequests(dir.path())->size(), 1u);
  std::ofstream(dir.Sub("capture/zz.json")) << "{broken";
  EXPECT_EQ(ListCaptureRequests(dir.path()).status().code(), StatusCode::kCorruption);
}

class RecordingSink : public ActionSink {
 public:
  Status RequestStop(const StopRequest& r) override {
    stops.push_back(r);
    return Status::OK();
  }
  Status RequestRawCapture(const RawCaptureRequest& r) override {
    captures.push_back(r);
    return Status::OK();
  }
  std::vector<StopRequest> stops;
  std::vector<RawCaptureRequest> captures;
};

// An episode of Sample(first)'s rule and tensor, from `first` to `last`.
Episode SampleEpisode(std::uint64_t id, std::int64_t first, std::int64_t last,
                      Severity severity = Severity::kError,
                      const std::string& tensor = "gradient/fc1.weight") {
  Episode e;
  e.id = id;
  e.opening = Sample(first, tensor);
  e.opening.severity = severity;
  e.rule = e.opening.rule;
  e.type = e.opening.type;
  e.worker = e.opening.worker;
  e.tensor = tensor;
  e.severity = severity;
  e.first = e.reported = e.opening.step;
  e.last = Key(last, Mode::kTrain, last - 1);
  e.steps = static_cast<std::uint64_t>(last - first + 1);
  e.worst = Sample(last, tensor);
  e.worst.values = {{"l2", 9999.0}};
  e.open = true;
  return e;
}

EpisodeEvent Event(EpisodeEvent::Kind kind, Episode e) {
  if (kind == EpisodeEvent::Kind::kClose) e.open = false;
  return EpisodeEvent{kind, std::move(e)};
}

TEST(FindingsLogTest, EpisodeEventsRoundTripIntoEpisodes) {
  TempDir dir;
  const std::string path = dir.Sub(kFindingsFileName);
  auto w = FindingsLogWriter::Open(path);
  ASSERT_TRUE(w.ok());
  TSTAT_RR_ASSERT_OK(w.value()->Append(Event(EpisodeEvent::Kind::kOpen, SampleEpisode(1, 10, 10))));
  TSTAT_RR_ASSERT_OK(w.value()->Append(
      Event(EpisodeEvent::Kind::kOpen, SampleEpisode(2, 11, 11, Severity::kWarning, "b"))));
  TSTAT_RR_ASSERT_OK(w.value()->Append(
      Event(EpisodeEvent::Kind::kEscalate, SampleEpisode(1, 10, 14, Severity::kCritical))));
  TSTAT_RR_ASSERT_OK(w.value()->Append(
      Event(EpisodeEvent::Kind::kClose, SampleEpisode(1, 10, 17, Severity::kCritical))));
  TSTAT_RR_ASSERT_OK(w.value()->Close());
  auto log = ReadFindingsLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->episodes.size(), 2u);
  ASSERT_EQ(log->findings.size(), 2u);  // what opened each
  const Episode& a = log->episodes[0];
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(a.rule, "grad_blowup");
  EXPECT_EQ(a.tensor, "gradient/fc1.weight");
  EXPECT_EQ(a.first.global_step, 10);
  EXPECT_EQ(a.first.mode_step, 9);
  EXPECT_EQ(a.last.global_step, 17);
  EXPECT_EQ(a.last.mode, Mode::kTrain);
  EXPECT_EQ(a.steps, 8u);
  EXPECT_EQ(a.severity, Severity::kCritical);
  EXPECT_FALSE(a.open);
  ASSERT_EQ(a.worst.values.size(), 1u);
  EXPECT_EQ(a.worst.values[0].second, 9999.0);
  EXPECT_EQ(a.worst.step.global_step, 17);
  ExpectSame(Sample(10), a.opening);
  const Episode& b = log->episodes[1];
  EXPECT_EQ(b.tensor, "b");
  EXPECT_EQ(b.severity, Severity::kWarning);
  EXPECT_TRUE(b.open);  // never closed: the run is going on, or its writer died
  // Each line is one event, with its kind and episode.
  const std::string text = ReadAll(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  EXPECT_NE(text.find("\"event\":\"escalate\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"episode\":\"2\""), std::string::npos) << text;
}

TEST(FindingsLogTest, OlderLogsOfOneLinePerFindingReadAsOneStepEpisodes) {
  TempDir dir;
  const std::string path = dir.Sub(kFindingsFileName);
  // What tstat wrote before episodes: no event, severity or episode fields.
  std::ofstream(path)
      << R"({"rule":"vg","type":"vanishing_gradient","step":"3","mode":"TRAIN","mode_step":"3",)"
      << R"("worker":0,"tensor":"gradient/w","values":{"mean_abs":1e-09},"message":"m","time":1})"
      << "\n"
      << R"({"rule":"vg","type":"vanishing_gradient","step":"4","mode":"TRAIN","mode_step":"4",)"
      << R"("worker":0,"tensor":"gradient/w","values":{"mean_abs":1e-09},"message":"m","time":2})"
      << "\n";
  auto log = ReadFindingsLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->episodes.size(), 2u);
  EXPECT_EQ(log->episodes[1].first.global_step, 4);
  EXPECT_EQ(log->episodes[1].steps, 1u);
  EXPECT_FALSE(log->episodes[1].open);
  EXPECT_EQ(log->findings.size(), 2u);
  // An unknown event is damage.
  std::ofstream(path) << R"({"rule":"r","mode":"TRAIN","event":"reopen","episode":"1"})"
                      << "\n";
  EXPECT_EQ(ReadFindingsLog(path).status().code(), StatusCode::kCorruption);
}

TEST(ActionRunnerTest, AppliesEachRulesActionsOncePerEpisode) {
  TempDir dir;
  auto log = FindingsLogWriter::Open(dir.Sub(kFindingsFileName));
  ASSERT_TRUE(log.ok());
  RecordingSink sink;
  std::ostringstream printed;
  ActionRunner::Options o;
  o.actions["grad_blowup"] = RuleActions{true, true, true, 5};
  o.actions["quiet"] = RuleActions{false, false, false, 0};
  o.log = log->get();
  o.sink = &sink;
  o.print = &printed;
  ActionRunner runner(o);
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kOpen, SampleEpisode(1, 10, 10))));
  // The episode going on: recorded, not printed or acted on again.
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kClose, SampleEpisode(1, 10, 12))));
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kOpen, SampleEpisode(2, 13, 13))));
  // A capture still covers 10..15; the later episode's at 16 asks again.
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kOpen, SampleEpisode(3, 16, 16))));
  Episode quiet = SampleEpisode(4, 11, 11);
  quiet.rule = "quiet";
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kOpen, quiet)));
  Episode other = SampleEpisode(5, 11, 11);
  other.rule = "unconfigured";  // defaults: record + print; stop by severity
  TSTAT_RR_ASSERT_OK(runner.Handle(Event(EpisodeEvent::Kind::kOpen, other)));
  ASSERT_EQ(sink.stops.size(), 1u);  // once per run
  EXPECT_EQ(sink.stops[0].step.global_step, 10);
  EXPECT_NE(sink.stops[0].Describe().find("grad_blowup"), std::string::npos);
  ASSERT_EQ(sink.captures.size(), 2u);
  EXPECT_EQ(sink.captures[0].tensors, std::vector<std::string>{"gradient/fc1.weight"});
  EXPECT_EQ(sink.captures[0].steps, 5);
  EXPECT_EQ(sink.captures[1].step.global_step, 16);
  EXPECT_TRUE(runner.stop_requested());
  EXPECT_EQ(runner.recorded(), 5u);
  TSTAT_RR_ASSERT_OK(log.value()->Close());
  EXPECT_EQ(ReadFindingsLog(dir.Sub(kFindingsFileName))->episodes.size(), 4u);
  const std::string out = printed.str();
  // One line per opened episode, even multi-line messages; steps in the user's terms.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4);
  EXPECT_NE(out.find("TRAIN step 9 (global 10) worker 2: grad_blowup (expression) [error] "
                     "gradient/fc1.weight"),
            std::string::npos)
      << out;
  // Without a sink, stop and capture cannot happen: an error, not silence.
  ActionRunner::Options none;
  none.actions["grad_blowup"] = RuleActions{false, false, true, 0};
  EXPECT_EQ(
      ActionRunner(none).Handle(Event(EpisodeEvent::Kind::kOpen, SampleEpisode(1, 1, 1))).code(),
      StatusCode::kFailedPrecondition);
}

TEST(ActionRunnerTest, TrainingStopsAtTheStopLevelUnlessTheRuleSaysOtherwise) {
  RecordingSink sink;
  ActionRunner::Options o;
  o.sink = &sink;
  o.actions["never"] = RuleActions{true, true, false, 0};
  o.actions["always"] = RuleActions{true, true, true, 0};
  ActionRunner critical(o);  // the default level
  EXPECT_FALSE(critical.Stops("any", Severity::kError));
  EXPECT_TRUE(critical.Stops("any", Severity::kCritical));
  EXPECT_FALSE(critical.Stops("never", Severity::kCritical));
  EXPECT_TRUE(critical.Stops("always", Severity::kInfo));
  // An error episode does not stop; escalated to critical, it does.
  Episode e = SampleEpisode(1, 3, 3, Severity::kError);
  e.rule = "any";
  TSTAT_RR_ASSERT_OK(critical.Handle(Event(EpisodeEvent::Kind::kOpen, e)));
  EXPECT_TRUE(sink.stops.empty());
  e.severity = Severity::kCritical;
  e.last = Key(5);
  TSTAT_RR_ASSERT_OK(critical.Handle(Event(EpisodeEvent::Kind::kEscalate, e)));
  ASSERT_EQ(sink.stops.size(), 1u);
  EXPECT_EQ(sink.stops[0].step.global_step, 5);
  StopPolicy p;
  ASSERT_TRUE(StopPolicy::Parse("error", &p));
  o.stop = p;
  EXPECT_TRUE(ActionRunner(o).Stops("any", Severity::kError));
  EXPECT_FALSE(ActionRunner(o).Stops("any", Severity::kWarning));
  ASSERT_TRUE(StopPolicy::Parse("never", &p));
  o.stop = p;
  EXPECT_FALSE(ActionRunner(o).Stops("any", Severity::kCritical));
  EXPECT_TRUE(ActionRunner(o).Stops("always", Severity::kInfo));
  EXPECT_FALSE(StopPolicy::Parse("fatal", &p));
  EXPECT_EQ(p.ToString(), "never");
}

TEST(ActionRunnerTest, EpisodeLinesSayFirstLastCountAndWorst) {
  Episode e = SampleEpisode(1, 10, 17);
  e.open = false;
  const std::string line = FormatEpisode(e);
  EXPECT_NE(line.find("TRAIN steps 9-16 (global 10-17, 8 steps) worker 2: grad_blowup "
                      "(expression) [error] gradient/fc1.weight:"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("worst l2 9999 at TRAIN step 16 (global 17)"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("still open"), std::string::npos);
  e.open = true;
  EXPECT_NE(FormatEpisode(e).find("(still open)"), std::string::npos);
  Finding global = Sample(4);
  global.step = Key(4);
  EXPECT_EQ(FormatFinding(global).rfind("step 4 worker 2: grad_blowup", 0), 0u)
      << FormatFinding(global);
}

TEST(StopFileTest, ASessionStopsWithinAStepOfTheStopFile) {
  TempDir dir;
  SessionConfig config;
  config.out_dir = dir.path();
  config.pipeline.stop_check_interval_ms = 5;
  auto session = Session::Create(config);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Session& s = *session.value();
  TSTAT_RR_ASSERT_OK(s.SaveScalar("loss", 1.0));
  TSTAT_RR_ASSERT_OK(s.EndStep());
  EXPECT_FALSE(s.ShouldStop());
  RunDirActionSink sink(dir.path());
  TSTAT_RR_ASSERT_OK(sink.RequestStop({"grad_blowup", Key(1), 0, "l2 > 1e3"}));
  int steps = 0;
  for (; steps < 20 && !s.ShouldStop(); ++steps) {  // a training step of 20 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    TSTAT_RR_ASSERT_OK(s.EndStep());
  }
  EXPECT_TRUE(s.ShouldStop());
  EXPECT_LE(steps, 2);
  EXPECT_NE(s.stop_reason().find("grad_blowup"), std::string::npos) << s.stop_reason();
  TSTAT_RR_ASSERT_OK(s.Close());
}

}  // namespace
}  // namespace tstat::rules::runtest
