// The LibTorch adapter end to end: a small torch::nn module trained with a
// session, the run read back with tstat::Trial, every figure compared with
// torch's own (w.min(), w.norm(), grad values): an independent reference.
#include "tstat_torch/adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tstat/trial.h"

namespace tstat::torch_adapter {
namespace {

TEST(TorchAdapterTest, DTypesAndViews) {
  const std::pair<c10::ScalarType, DType> cases[] = {
      {torch::kFloat32, DType::kFloat32},   {torch::kFloat16, DType::kFloat16},
      {torch::kBFloat16, DType::kBFloat16}, {torch::kFloat64, DType::kFloat64},
      {torch::kInt32, DType::kInt32},       {torch::kInt64, DType::kInt64},
      {torch::kUInt8, DType::kUInt8}};
  for (const auto& [torch_type, dtype] : cases) {
    torch::Tensor t = torch::zeros({2, 3}, torch::TensorOptions().dtype(torch_type));
    Result<TensorView> v = ViewOf(t);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->dtype, dtype);
    EXPECT_EQ(v->numel, 6);
    EXPECT_EQ(v->shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(v->data, t.data_ptr());
    EXPECT_EQ(v->space, MemorySpace::kHost);
  }
  Result<TensorView> b = ViewOf(torch::zeros({2}, torch::kBool));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(b.status().message().find("Bool"), std::string::npos) << b.status().message();

  Result<TensorView> nc = ViewOf(torch::zeros({3, 4}).t());
  ASSERT_FALSE(nc.ok());
  EXPECT_EQ(nc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nc.status().message().find("not contiguous"), std::string::npos);
  EXPECT_FALSE(ViewOf(torch::Tensor()).ok());
  EXPECT_EQ(CurrentCudaStream(torch::kCPU), nullptr);
}

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2(register_module("fc2", torch::nn::Linear(8, 3))) {}
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// Values torch computes itself, kept per step for the comparison.
struct Expected {
  std::map<std::string, torch::Tensor> tensors;  // name -> clone at EndStep
  double loss = 0.0;
  torch::Tensor predicted;  // argmax of the logits captured
};

void ExpectStatsMatch(const TensorStats& s, const torch::Tensor& t, const std::string& what) {
  const torch::Tensor d = t.to(torch::kFloat64);
  EXPECT_EQ(s.count, static_cast<std::uint64_t>(t.numel())) << what;
  EXPECT_DOUBLE_EQ(s.min, d.min().item<double>()) << what;  // exact: a value of the tensor
  EXPECT_DOUBLE_EQ(s.max, d.max().item<double>()) << what;
  // Sums: tstat accumulates float32 tiles before combining them in double,
  // torch in its own order: agree to float32 rounding of the sum's terms.
  const double l1 = d.abs().sum().item<double>();
  EXPECT_NEAR(s.l1, l1, 1e-6 * l1) << what;
  EXPECT_NEAR(s.l2, d.norm().item<double>(), 1e-6 * s.l2) << what;
  EXPECT_NEAR(s.mean, d.mean().item<double>(), 1e-6 * l1 / t.numel()) << what;
}

TEST(TorchAdapterTest, TrainsAndReadsBackAgainstTorch) {
  testing::TempDir dir;
  torch::manual_seed(7);
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));

  SessionConfig config;
  config.out_dir = dir.path() + "/run";
  config.save_config = SaveConfig::Every(1);
  config.raw_save_config = SaveConfig::Every(1);
  config.collections.push_back(LabelsCollection(3));
  auto created = Session::Create(config);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<Session> session = std::move(created).value();

  Result<std::vector<std::uint32_t>> ids = RegisterParameters(*session, *net);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->size(), 8u);  // 4 parameters and their gradients
  ModuleCapture fc1_capture(session.get(), "fc1");
  ClassificationCapture classes(session.get());

  const torch::Tensor x = torch::randn({16, 4});
  const torch::Tensor y = torch::randint(0, 3, {16}, torch::kLong);
  std::vector<Expected> expected;
  const int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(session->BeginStep().ok());
    // Gradients move: step 2 drops them, so backward allocates new tensors.
    if (step == 2) {
      for (torch::Tensor& p : net->parameters()) p.mutable_grad() = torch::Tensor();
    } else {
      sgd.zero_grad();
    }
    const torch::Tensor fc1_out = fc1_capture.Forward(net->fc1, x);
    torch::Tensor h = torch::relu(fc1_out);
    torch::Tensor logits = net->fc2->forward(h);
    ASSERT_TRUE(classes.Capture(y, logits).ok());
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
    Expected e;
    // Step 0 ends before any backward: gradients do not exist yet.
    if (step > 0) {
      loss.backward();
      sgd.step();
      for (const auto& p : net->named_parameters()) {
        e.tensors["gradient/" + p.key()] = p.value().grad().clone();
      }
    }
    for (const auto& p : net->named_parameters()) e.tensors[p.key()] = p.value().detach().clone();
    e.tensors["fc1_input"] = x.clone();
    e.tensors["fc1_output"] = fc1_out.detach().clone();
    e.loss = loss.item<double>();
    e.predicted = logits.argmax(1);
    ASSERT_TRUE(SaveLoss(*session, "loss", loss).ok());
    ASSERT_TRUE(EndStep(*session).ok());
    expected.push_back(std::move(e));
  }
  EXPECT_EQ(SaveLoss(*session, "loss2", torch::zeros({2})).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Close().ok());
  EXPECT_TRUE(fc1_capture.status().ok());

  auto opened = Trial::Open(config.out_dir);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Trial> trial = std::move(opened).value();
  EXPECT_TRUE(trial->drops().empty()) << trial->drops()[0].reason;

  const std::vector<std::string> grads = trial->tensor_names({"", "gradients"});
  EXPECT_EQ(grads, (std::vector<std::string>{"gradient/fc1.bias", "gradient/fc1.weight",
                                             "gradient/fc2.bias", "gradient/fc2.weight"}));
  EXPECT_EQ(trial->tensor_names({"", "biases"}),
            (std::vector<std::string>{"fc1.bias", "fc2.bias"}));
  EXPECT_EQ(trial->tensor_names({"", "activations"}), (std::vector<std::string>{"fc1_output"}));
  EXPECT_EQ(trial->tensor_names({"", "inputs"}), (std::vector<std::string>{"fc1_input"}));

  for (int step = 0; step < kSteps; ++step) {
    const Expected& e = expected[step];
    for (const auto& [name, t] : e.tensors) {
      const std::string what = name + " at step " + std::to_string(step);
      Result<TensorStats> s = trial->stats(name, step);
      ASSERT_TRUE(s.ok()) << what << ": " << s.status().ToString();
      ExpectStatsMatch(s.value(), t, what);
      // Raw bytes are the tensor's exact values.
      Result<RawTensor> raw = trial->raw(name, step);
      ASSERT_TRUE(raw.ok()) << what << ": " << raw.status().ToString();
      ASSERT_EQ(raw->bytes.size(), static_cast<std::size_t>(t.numel()) * 4) << what;
      EXPECT_EQ(std::memcmp(raw->bytes.data(), t.contiguous().data_ptr(), raw->bytes.size()), 0)
          << what;
    }
    if (step == 0) {
      EXPECT_EQ(trial->stats("gradient/fc1.weight", 0).status().code(),
                StatusCode::kStepUnavailable)
          << "no gradient exists at step 0";
    }
  }
  Result<std::vector<SeriesPoint>> losses = trial->scalar_series("loss");
  ASSERT_TRUE(losses.ok());
  ASSERT_EQ(losses->size(), static_cast<std::size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_DOUBLE_EQ((*losses)[step].value, expected[step].loss);
  }

  // Labels: counts per class, and the confusion matrix against argmax(logits).
  Result<TensorStatsRecord> labels = trial->record("labels", kSteps - 1);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  ASSERT_TRUE(labels->label_counts.has_value());
  ASSERT_TRUE(labels->confusion.has_value());
  const torch::Tensor counts = torch::bincount(y, {}, 3);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(labels->label_counts->counts[c],
              static_cast<std::uint64_t>(counts[c].item<int64_t>()));
  }
  ASSERT_EQ(labels->confusion->classes, 3);
  std::vector<std::uint64_t> confusion(9, 0);
  const torch::Tensor& predicted = expected[kSteps - 1].predicted;
  for (int i = 0; i < 16; ++i) {
    ++confusion[y[i].item<int64_t>() * 3 + predicted[i].item<int64_t>()];
  }
  EXPECT_EQ(labels->confusion->counts, confusion);
  EXPECT_EQ(labels->confusion->invalid, 0u);
}

// A run in `dir` saving stats at every step.
SessionConfig EveryStep(const testing::TempDir& dir) {
  SessionConfig config;
  config.out_dir = dir.path() + "/run";
  config.save_config = SaveConfig::Every(1);
  return config;
}

// The session of `config`, or null (the failure reported).
std::unique_ptr<Session> MustCreate(const SessionConfig& config) {
  auto created = Session::Create(config);
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? std::move(created).value() : nullptr;
}

// A frozen parameter (requires_grad false: fine-tuning a pretrained layer)
// is not captured while frozen - nothing trains it, and weight_update_ratio
// would read its update of 0 as a fault - and is again once unfrozen.
TEST(TorchAdapterTest, FrozenParametersAreSkippedWhileFrozen) {
  testing::TempDir dir;
  torch::manual_seed(3);
  Net net;
  SessionConfig config = EveryStep(dir);
  std::unique_ptr<Session> session = MustCreate(config);
  ASSERT_TRUE(session);
  ASSERT_TRUE(RegisterParameters(*session, *net).ok());
  for (int step = 0; step < 4; ++step) {
    net->fc1->weight.set_requires_grad(step == 0 || step == 3);
    ASSERT_TRUE(session->BeginStep().ok());
    ASSERT_TRUE(EndStep(*session).ok());
  }
  ASSERT_TRUE(session->Close().ok());
  auto trial = Trial::Open(config.out_dir);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ((*trial)->stats("fc1.weight", step).ok(), step == 0 || step == 3) << step;
    EXPECT_TRUE((*trial)->stats("fc2.weight", step).ok()) << step;
  }
  Result<TensorStats> s = (*trial)->stats("fc1.weight", 3);
  ASSERT_TRUE(s.ok());
  ExpectStatsMatch(s.value(), net->fc1->weight.detach(), "fc1.weight at step 3");
}

TEST(TorchAdapterTest, ATensorChangedInPlaceIsADropOnceThenReadWhenCaptured) {
  testing::TempDir dir;
  SessionConfig config = EveryStep(dir);
  std::unique_ptr<Session> session = MustCreate(config);
  ASSERT_TRUE(session);
  ModuleCapture block(session.get(), "block", ModuleCapture::kOutputs);
  // An activation with inplace=True overwrites the input captured before it.
  ModuleCapture relu(session.get(), "relu", ModuleCapture::kInputs);
  torch::nn::ReLU inplace_relu(torch::nn::ReLUOptions().inplace(true));
  std::vector<torch::Tensor> outputs, inputs;
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(session->BeginStep().ok());
    torch::Tensor h = torch::randn({8, 4}) - 3.0;
    ASSERT_TRUE(block.Capture(torch::Tensor(), h).ok());
    outputs.push_back(h.clone());
    h.add_(10.0);  // a residual add on the captured output, at every step
    torch::Tensor x = torch::randn({6, 5});
    inputs.push_back(x.clone());
    (void)relu.Forward(inplace_relu, x);
    EXPECT_GE(x.min().item<float>(), 0.0f);  // it did run in place
    const Status s = EndStep(*session);
    if (step == 0) {
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
      EXPECT_NE(s.message().find("block_output"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("changed in place"), std::string::npos) << s.message();
    } else {
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
  EXPECT_TRUE(block.status().ok()) << block.status().ToString();
  EXPECT_TRUE(relu.status().ok()) << relu.status().ToString();
  ASSERT_TRUE(session->Close().ok());
  auto trial = Trial::Open(config.out_dir);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  // Step 0: not the changed values; two drops (step 0 only), saying why.
  EXPECT_FALSE((*trial)->stats("block_output", 0).ok());
  EXPECT_FALSE((*trial)->stats("relu_input", 0).ok());
  ASSERT_EQ((*trial)->drops().size(), 2u);
  for (const auto& drop : (*trial)->drops()) {
    EXPECT_NE(drop.reason.find("changed in place"), std::string::npos) << drop.reason;
  }
  // Then read when captured: the values the layer produced.
  for (int step = 1; step < kSteps; ++step) {
    Result<TensorStats> out = (*trial)->stats("block_output", step);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectStatsMatch(out.value(), outputs[step], "block_output at step " + std::to_string(step));
    Result<TensorStats> in = (*trial)->stats("relu_input", step);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    ExpectStatsMatch(in.value(), inputs[step], "relu_input at step " + std::to_string(step));
    EXPECT_LT(in->min, 0.0);
  }
}

TEST(TorchAdapterTest, ClassificationCaptureRejectsBadLabels) {
  ClassificationCapture c(nullptr);
  Status s = c.Capture(torch::zeros({4}), torch::zeros({4, 3}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.message();
  s = c.Capture(torch::zeros({4}, torch::kLong), torch::zeros({5, 3}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  TensorSlot slot(nullptr, "x");
  EXPECT_EQ(slot.Set(torch::zeros({2})).code(), StatusCode::kFailedPrecondition);
}

// The rules' per-unit stats of a Conv1d's [batch, channels, length] output
// are along its channels when the capture says so; by rank, a rank-3 tensor's
// units are its last axis ([batch, tokens, features]).
TEST(TorchAdapterTest, ModuleCaptureTellsTheUnitsAxis) {
  testing::TempDir dir;
  torch::manual_seed(4);
  SessionConfig config = EveryStep(dir);
  config.rules.enabled = true;
  std::unique_ptr<Session> session = MustCreate(config);
  ASSERT_TRUE(session);
  torch::nn::Conv1d conv(torch::nn::Conv1dOptions(2, 5, 3).padding(1));
  ModuleCapture channels(session.get(), "conv.relu", ModuleCapture::kOutputs, /*unit_axis=*/1);
  ModuleCapture tokens(session.get(), "tok.relu", ModuleCapture::kOutputs);
  const torch::Tensor x = torch::randn({4, 2, 7});
  ASSERT_TRUE(session->BeginStep().ok());
  const torch::Tensor y = torch::relu(conv->forward(x));
  ASSERT_TRUE(channels.Capture(x, y).ok());
  ASSERT_TRUE(tokens.Capture(x, y).ok());
  ASSERT_TRUE(EndStep(*session).ok());
  ASSERT_TRUE(session->Close().ok());
  auto trial = Trial::Open(config.out_dir);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  auto conv_rec = (*trial)->record("conv.relu_output", 0);
  ASSERT_TRUE(conv_rec.ok() && conv_rec->per_channel.has_value());
  EXPECT_EQ(conv_rec->per_channel->axis, 1);
  ASSERT_EQ(conv_rec->per_channel->channels.size(), 5u);
  const torch::Tensor zeros =
      (y == 0).sum(std::vector<std::int64_t>{0, 2});  // torch's count per channel
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(conv_rec->per_channel->channels[c].zero_count,
              static_cast<std::uint64_t>(zeros[c].item<std::int64_t>()))
        << c;
  }
  auto tok_rec = (*trial)->record("tok.relu_output", 0);
  ASSERT_TRUE(tok_rec.ok() && tok_rec->per_channel.has_value());
  EXPECT_EQ(tok_rec->per_channel->axis, 2);
  EXPECT_EQ(tok_rec->per_channel->channels.size(), 7u);
}

}  // namespace
}  // namespace tstat::torch_adapter
