// What the default rules make an in-process session capture (tstat/rule.h
// CaptureNeeds, host/session/label_classes.h): per-unit stats of ReLU outputs,
// label counts with inferred classes, deltas of weights, at every training
// step although the user saves every 50th; read back from the run with
// tstat::Trial against values computed here, and the run's rules summary
// (RUN/rules-00000.json) that lists it. Then the outcomes of bad input:
// labels outside the inferred classes, a disabled rule, rank-1
// "activations", a config that turns the needs off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "rules/runtime/rules_summary.h"
#include "tests/io/io_test_util.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace tstat {
namespace {

using io::testing::TempDir;

SessionConfig Config(const std::string& run) {
  SessionConfig c;
  c.out_dir = run;
  c.save_config.base.save_interval = 50;  // the user's own capture: rare
  c.pipeline.cpu_threads = 1;
  c.rules.enabled = true;  // the default rule set, needs captured
  return c;
}

std::unique_ptr<Session> Create(const SessionConfig& c) {
  auto s = Session::Create(c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

bool Has(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

const rules::RulesSummary::Capture* CaptureOf(const rules::RulesSummary& s, const std::string& rule,
                                              const std::string& what) {
  for (const auto& c : s.captures) {
    if (c.rule == rule && c.what.find(what) != std::string::npos) return &c;
  }
  return nullptr;
}

// A small training step's tensors, registered as a user following README's
// naming would: [batch 4, units 3] ReLU output, a weight, labels and
// predictions.
struct Net {
  std::vector<float> relu = std::vector<float>(12, 0.0f);
  std::vector<float> weight = std::vector<float>(6, 1.0f);
  std::vector<std::int64_t> labels = std::vector<std::int64_t>(8, 0);
  std::vector<float> predictions = std::vector<float>(8 * 10, 0.1f);

  Status Register(Session& s, bool with_predictions) {
    TSTAT_RETURN_IF_ERROR(
        s.RegisterTensor({"relu1_output", TensorView::Host(relu.data(), DType::kFloat32, {4, 3})})
            .status());
    TSTAT_RETURN_IF_ERROR(
        s.RegisterTensor(
             {"fc1.weight", TensorView::Host(weight.data(), DType::kFloat32, {2, 3}), {"weights"}})
            .status());
    TSTAT_RETURN_IF_ERROR(
        s.RegisterTensor({"labels", TensorView::Host(labels.data(), DType::kInt64, 8), {"labels"}})
            .status());
    if (!with_predictions) return Status::OK();
    return s
        .RegisterTensor(
            {"predictions", TensorView::Host(predictions.data(), DType::kFloat32, {8, 10})})
        .status();
  }
  // Step k: unit 1 of the ReLU is dead (0), units 0 and 2 are k + i; the
  // weight moves by 0.5 per element; labels are `label_of(i)`.
  template <class LabelOf>
  void Fill(int k, LabelOf label_of) {
    for (int i = 0; i < 4; ++i) {
      relu[i * 3 + 0] = static_cast<float>(k + i);
      relu[i * 3 + 1] = 0.0f;
      relu[i * 3 + 2] = static_cast<float>(k + i + 1);
    }
    for (float& w : weight) w = 1.0f + 0.5f * static_cast<float>(k);
    for (int i = 0; i < 8; ++i) labels[i] = label_of(i);
  }
};

TEST(RulesNeedsTest, TheDefaultRulesCaptureWhatTheyNeedAtEveryTrainingStep) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto session = Create(Config(run));
  ASSERT_NE(session, nullptr);
  Net net;
  ASSERT_TRUE(net.Register(*session, /*with_predictions=*/true).ok());
  for (int k = 0; k < 3; ++k) {
    net.Fill(k, [](int i) { return static_cast<std::int64_t>(i % 4); });
    ASSERT_TRUE(session->EndStep().ok()) << session->status().ToString();
  }
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();

  auto trial = Trial::Open(run);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  // Step 2 is not one of the user's saves (every 50th): the rules' needs.
  auto relu = trial.value()->record("relu1_output", 2);
  ASSERT_TRUE(relu.ok()) << relu.status().ToString();
  ASSERT_TRUE(relu->per_channel.has_value());
  ASSERT_EQ(relu->per_channel->channels.size(), 3u);
  EXPECT_EQ(relu->per_channel->channels[1].zero_count, 4u);   // the dead unit
  EXPECT_DOUBLE_EQ(relu->per_channel->channels[0].max, 5.0);  // k + i = 2 + 3
  auto labels = trial.value()->record("labels", 2);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  ASSERT_TRUE(labels->label_counts.has_value());
  // Ten classes: the last dimension of the predictions.
  EXPECT_EQ(labels->label_counts->counts,
            (std::vector<std::uint64_t>{2, 2, 2, 2, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(labels->has_stats);  // and its stat set (inspect shows values)
  EXPECT_DOUBLE_EQ(labels->stats.max, 3.0);
  auto weight = trial.value()->record("fc1.weight", 2);
  ASSERT_TRUE(weight.ok()) << weight.status().ToString();
  ASSERT_TRUE(weight->delta.has_value());
  EXPECT_NEAR(weight->delta->l2, 0.5 * std::sqrt(6.0), 1e-6);  // 6 elements moved 0.5
  auto info = trial.value()->tensor_info("relu1_output");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(Has(info->collections, "rules.units")) << info->collections.size();

  std::vector<std::string> problems;
  const std::vector<rules::RulesSummary> summaries = rules::ReadRulesSummaries(run, &problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  ASSERT_EQ(summaries.size(), 1u);
  const rules::RulesSummary& s = summaries[0];
  EXPECT_EQ(s.stop_on, "critical");
  EXPECT_EQ(s.steps_judged, 3u);
  const auto* dead = CaptureOf(s, "dead_relu", "per-unit");
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ(dead->examples, std::vector<std::string>{"relu1_output"});
  ASSERT_NE(CaptureOf(s, "class_imbalance", "label counts"), nullptr);
  // loss_not_decreasing's chance level: the training labels' counts.
  ASSERT_NE(CaptureOf(s, "loss_not_decreasing", "label counts"), nullptr);
  ASSERT_NE(CaptureOf(s, "weight_update_ratio", "deltas"), nullptr);
  ASSERT_EQ(s.label_classes.size(), 1u);
  EXPECT_EQ(s.label_classes[0].tensor, "labels");
  EXPECT_EQ(s.label_classes[0].classes, 10);
  EXPECT_NE(s.label_classes[0].source.find("predictions"), std::string::npos)
      << s.label_classes[0].source;
  EXPECT_GT(s.rules_records, 0u);
  // No tanh/sigmoid input: said, not silent.
  bool said = false;
  for (const std::string& d : s.diagnostics)
    said = said || d.find("saturated_activation") == 0 || d.find("rule saturated_activation") == 0;
  EXPECT_TRUE(said);
}

// The user path: every tensor handed over with SaveTensor (the C
// API's tstat_save_tensor, ctypes) in TRAIN mode, nothing registered. The
// ad-hoc saves get the same needs: per-unit stats, label counts with
// classes from the predictions, deltas of weights across steps.
// The units' axis of the per-unit stats: the last of a rank-3 tensor
// ([batch, tokens, features]), axis 1 of others, or the one the tensor names
// (TensorSpec::unit_axis: Conv1d's [batch, channels, length]).
TEST(RulesNeedsTest, TheUnitsAxisFollowsTheRankUnlessTheTensorNamesIt) {
  TempDir dir;
  auto session = Create(Config(dir.Sub("run")));
  ASSERT_NE(session, nullptr);
  // [2, 3, 4]: feature 1 is 0 everywhere, the others i + 1.
  std::vector<float> tokens(24);
  for (int i = 0; i < 24; ++i) tokens[i] = i % 4 == 1 ? 0.0f : static_cast<float>(i + 1);
  std::vector<float> image(2 * 3 * 2 * 2, 1.0f);
  ASSERT_TRUE(session
                  ->RegisterTensor({"tok.relu_output",
                                    TensorView::Host(tokens.data(), DType::kFloat32, {2, 3, 4})})
                  .ok());
  TensorSpec conv{"conv.relu_output", TensorView::Host(tokens.data(), DType::kFloat32, {2, 4, 3})};
  conv.unit_axis = 1;
  ASSERT_TRUE(session->RegisterTensor(conv).ok());
  TensorSpec beyond{"far.relu_output", TensorView::Host(tokens.data(), DType::kFloat32, {2, 3, 4})};
  beyond.unit_axis = 3;  // not an axis of it: by rank
  ASSERT_TRUE(session->RegisterTensor(beyond).ok());
  ASSERT_TRUE(session
                  ->RegisterTensor({"img.relu_output",
                                    TensorView::Host(image.data(), DType::kFloat32, {2, 3, 2, 2})})
                  .ok());
  for (int bad : {-2, 0, 64}) {
    TensorSpec wrong{"bad.relu_output", TensorView::Host(tokens.data(), DType::kFloat32, 24)};
    wrong.unit_axis = bad;
    auto refused = session->RegisterTensor(wrong);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("unit_axis"), std::string::npos)
        << refused.status().message();
  }
  ASSERT_TRUE(session->EndStep().ok()) << session->status().ToString();
  ASSERT_TRUE(session->Close().ok());
  auto trial = Trial::Open(dir.Sub("run"));
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  const auto axis_and_units = [&](const std::string& name) {
    auto r = trial.value()->record(name, 0);
    EXPECT_TRUE(r.ok() && r->per_channel.has_value()) << name;
    if (!r.ok() || !r->per_channel) return std::pair<int, std::size_t>{-1, 0};
    return std::pair<int, std::size_t>{r->per_channel->axis, r->per_channel->channels.size()};
  };
  EXPECT_EQ(axis_and_units("tok.relu_output"), (std::pair<int, std::size_t>{2, 4}));
  EXPECT_EQ(axis_and_units("conv.relu_output"), (std::pair<int, std::size_t>{1, 4}));
  EXPECT_EQ(axis_and_units("far.relu_output"), (std::pair<int, std::size_t>{2, 4}));
  EXPECT_EQ(axis_and_units("img.relu_output"), (std::pair<int, std::size_t>{1, 3}));
  // Feature 1 of the tokens: 6 zeros (2 x 3) against a long-hand count.
  auto tok = trial.value()->record("tok.relu_output", 0);
  ASSERT_TRUE(tok.ok() && tok->per_channel.has_value());
  for (int f = 0; f < 4; ++f) {
    std::uint64_t zeros = 0;
    long double sum = 0;
    for (int i = f; i < 24; i += 4) {
      zeros += tokens[i] == 0.0f;
      sum += tokens[i];
    }
    EXPECT_EQ(tok->per_channel->channels[f].zero_count, zeros) << f;
    EXPECT_DOUBLE_EQ(tok->per_channel->channels[f].mean, static_cast<double>(sum / 6)) << f;
  }
}

TEST(RulesNeedsTest, AdHocSavesGetTheSameNeeds) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto session = Create(Config(run));
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->SetMode(Mode::kTrain).ok());
  Net net;
  for (int k = 0; k < 2; ++k) {
    net.Fill(k, [](int i) { return static_cast<std::int64_t>(i % 3); });
    ASSERT_TRUE(
        session
            ->SaveTensor("relu1_output", TensorView::Host(net.relu.data(), DType::kFloat32, {4, 3}))
            .ok());
    ASSERT_TRUE(session
                    ->SaveTensor("fc1.weight",
                                 TensorView::Host(net.weight.data(), DType::kFloat32, {2, 3}),
                                 {{"weights"}})
                    .ok());
    ASSERT_TRUE(session
                    ->SaveTensor("predictions",
                                 TensorView::Host(net.predictions.data(), DType::kFloat32, {8, 10}))
                    .ok());
    ASSERT_TRUE(
        session->SaveTensor("labels", TensorView::Host(net.labels.data(), DType::kInt64, 8)).ok());
    ASSERT_TRUE(session->SaveScalar("loss", 2.0 - k).ok());
    ASSERT_TRUE(session->EndStep().ok()) << session->status().ToString();
  }
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();
  auto trial = Trial::Open(run);
  ASSERT_TRUE(trial.ok());
  auto relu = trial.value()->record("relu1_output", 1, Mode::kTrain);
  ASSERT_TRUE(relu.ok()) << relu.status().ToString();
  ASSERT_TRUE(relu->per_channel.has_value());
  EXPECT_EQ(relu->per_channel->channels.size(), 3u);
  auto labels = trial.value()->record("labels", 1, Mode::kTrain);
  ASSERT_TRUE(labels.ok() && labels->label_counts.has_value());
  EXPECT_EQ(labels->label_counts->counts,
            (std::vector<std::uint64_t>{3, 3, 2, 0, 0, 0, 0, 0, 0, 0}));
  auto weight = trial.value()->record("fc1.weight", 1, Mode::kTrain);
  ASSERT_TRUE(weight.ok() && weight->delta.has_value());
  EXPECT_NEAR(weight->delta->l2, 0.5 * std::sqrt(6.0), 1e-6);
}

// Labels past the inferred classes grow them (host tensors are read before
// the reduction: no label is lost); negative ones (an ignore index) are
// counted out of range and said in the summary.
TEST(RulesNeedsTest, LabelsOutsideTheInferredClassesGrowThemOrAreCountedOutOfRange) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto session = Create(Config(run));
  ASSERT_NE(session, nullptr);
  Net net;
  ASSERT_TRUE(net.Register(*session, /*with_predictions=*/false).ok());
  net.Fill(0, [](int i) { return static_cast<std::int64_t>(i % 2); });  // 0, 1
  ASSERT_TRUE(session->EndStep().ok());
  net.Fill(1, [](int i) { return i == 0 ? std::int64_t{-100} : std::int64_t{i}; });  // -100, 1..7
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();

  auto trial = Trial::Open(run);
  ASSERT_TRUE(trial.ok());
  auto first = trial.value()->record("labels", 0);
  ASSERT_TRUE(first.ok() && first->label_counts.has_value());
  EXPECT_EQ(first->label_counts->counts, (std::vector<std::uint64_t>{4, 4}));
  auto second = trial.value()->record("labels", 1);
  ASSERT_TRUE(second.ok() && second->label_counts.has_value());
  EXPECT_EQ(second->label_counts->counts, (std::vector<std::uint64_t>{0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(second->label_counts->out_of_range, 1u);

  std::vector<std::string> problems;
  const auto summaries = rules::ReadRulesSummaries(run, &problems);
  ASSERT_EQ(summaries.size(), 1u);
  ASSERT_EQ(summaries[0].label_classes.size(), 1u);
  EXPECT_EQ(summaries[0].label_classes[0].classes, 8);
  EXPECT_NE(summaries[0].label_classes[0].source.find("grown"), std::string::npos);
  bool said = false;
  for (const std::string& d : summaries[0].diagnostics) {
    said = said || d.find("1 label(s) were outside") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// Rules disabled by name do not run or capture; a rank-1 "ReLU output" has
// no units (no per-unit stats are asked of it); capture_needs false
// captures only what the collections save.
TEST(RulesNeedsTest, DisabledRulesRankOneTensorsAndNeedsOff) {
  TempDir dir;
  SessionConfig c = Config(dir.Sub("run"));
  // Both rules that count labels.
  c.rules.disable = {"dead_relu", "class_imbalance", "loss_not_decreasing"};
  auto session = Create(c);
  ASSERT_NE(session, nullptr);
  Net net;
  ASSERT_TRUE(net.Register(*session, true).ok());
  std::vector<float> flat(5, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"relu2_output", TensorView::Host(flat.data(), DType::kFloat32, 5)})
          .ok());
  for (int k = 0; k < 2; ++k) {
    net.Fill(k, [](int i) { return static_cast<std::int64_t>(i % 4); });
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  std::vector<std::string> problems;
  auto summaries = rules::ReadRulesSummaries(dir.Sub("run"), &problems);
  ASSERT_EQ(summaries.size(), 1u);
  for (const auto& r : summaries[0].rules) {
    EXPECT_NE(r.type, "dead_relu");
    EXPECT_NE(r.type, "class_imbalance");
    EXPECT_NE(r.type, "loss_not_decreasing");
  }
  EXPECT_EQ(CaptureOf(summaries[0], "dead_relu", ""), nullptr);
  // A name that is not in the set is a config error naming it.
  SessionConfig bad = Config(dir.Sub("bad"));
  bad.rules.disable = {"dead_relu_typo"};
  auto refused = Session::Create(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rules.disable[0]"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("dead_relu_typo"), std::string::npos);
  EXPECT_EQ(CaptureOf(summaries[0], "class_imbalance", ""), nullptr);
  auto trial = Trial::Open(dir.Sub("run"));
  ASSERT_TRUE(trial.ok());
  auto labels = trial.value()->record("labels", 1);
  EXPECT_FALSE(labels.ok() && labels->label_counts.has_value());

  // Rank-1 tensor with dead_relu on: no per-unit stats for it.
  TempDir dir2;
  session = Create(Config(dir2.Sub("run")));
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(
      session->RegisterTensor({"relu2_output", TensorView::Host(flat.data(), DType::kFloat32, 5)})
          .ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  trial = Trial::Open(dir2.Sub("run"));
  ASSERT_TRUE(trial.ok());
  auto rec = trial.value()->record("relu2_output", 0);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();  // the stat set, for the NaN rules
  EXPECT_FALSE(rec->per_channel.has_value());

  // capture_needs false: step 1 (not a save of every 50th) has nothing.
  TempDir dir3;
  c = Config(dir3.Sub("run"));
  c.rules.capture_needs = false;
  session = Create(c);
  ASSERT_NE(session, nullptr);
  Net net3;
  ASSERT_TRUE(net3.Register(*session, true).ok());
  for (int k = 0; k < 2; ++k) {
    net3.Fill(k, [](int i) { return static_cast<std::int64_t>(i % 4); });
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  trial = Trial::Open(dir3.Sub("run"));
  ASSERT_TRUE(trial.ok());
  EXPECT_FALSE(trial.value()->record("relu1_output", 1).ok());
  summaries = rules::ReadRulesSummaries(dir3.Sub("run"), &problems);
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_TRUE(summaries[0].captures.empty());
}

}  // namespace
}  // namespace tstat
