// One case of the detection matrix (run_case.h).
//
// The training step, as most training loops order it: forward, loss,
// backward, optimizer step, then EndStep (tstat captures the step's
// activations and gradients, and the weights after the update). An EVAL pass
// over the whole validation split follows every `eval_every` TRAIN steps.
// The oracles read the same tensors in double precision as the step runs.
#include "tools/detection/run_case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "tstat/session.h"
#include "tstat_torch/adapter.h"

namespace tstat::detection {
namespace {

namespace ta = torch_adapter;

constexpr std::int64_t kValidationRows = 360;
constexpr std::int64_t kWarmupSteps = 30;

struct Split {
  torch::Tensor train_x, train_y, val_x, val_y;
};

std::uint64_t NextRandom(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A shuffle of the rows by the case's seed; the last kValidationRows rows
// validate. Then the fault's changes to the training rows.
Split MakeSplit(const demo::Dataset& data, const Case& c) {
  const std::int64_t n = data.rows();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = 0x5eed0000u + c.seed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(order[static_cast<std::size_t>(i)],
              order[NextRandom(&state) % static_cast<std::uint64_t>(i + 1)]);
  }
  const std::int64_t val_rows = std::min(kValidationRows, n / 5);
  std::vector<std::int64_t> train(order.begin(), order.end() - val_rows);
  const std::vector<std::int64_t> val(order.end() - val_rows, order.end());
  std::vector<std::int64_t> train_labels;
  for (std::int64_t r : train) train_labels.push_back(data.labels[static_cast<std::size_t>(r)]);
  if (c.fault == Fault::kClassImbalance) {
    std::vector<std::int64_t> kept, kept_labels;
    std::map<std::int64_t, int> seen;
    for (std::size_t i = 0; i < train.size(); ++i) {
      if (train_labels[i] <= 1 || seen[train_labels[i]]++ % 20 == 0) {
        kept.push_back(train[i]);
        kept_labels.push_back(train_labels[i]);
      }
    }
    train = std::move(kept);
    train_labels = std::move(kept_labels);
  }
  if (c.train_rows > 0 && c.train_rows < static_cast<std::int64_t>(train.size())) {
    train.resize(static_cast<std::size_t>(c.train_rows));
    train_labels.resize(static_cast<std::size_t>(c.train_rows));
  }
  auto gather = [&data](const std::vector<std::int64_t>& rows,
                        const std::vector<std::int64_t>* labels, torch::Tensor* x,
                        torch::Tensor* y) {
    const auto m = static_cast<std::int64_t>(rows.size());
    *x = torch::empty({m, demo::kDigitPixels}, torch::kFloat32);
    *y = torch::empty({m}, torch::kInt64);
    float* px = x->data_ptr<float>();
    std::int64_t* py = y->data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < m; ++i) {
      const auto r = static_cast<std::size_t>(rows[static_cast<std::size_t>(i)]);
      std::copy_n(data.pixels.begin() + static_cast<std::ptrdiff_t>(r) * demo::kDigitPixels,
                  demo::kDigitPixels, px + i * demo::kDigitPixels);
      py[i] = labels ? (*labels)[static_cast<std::size_t>(i)] : data.labels[r];
    }
  };
  Split s;
  gather(train, &train_labels, &s.train_x, &s.train_y);
  gather(val, nullptr, &s.val_x, &s.val_y);
  return s;
}

// The schedule's learning rate at `step` of the whole training (the steps
// before tstat was attached included).
double LearningRate(const Case& c, std::int64_t step) {
  const double pi = 3.14159265358979323846;
  const std::int64_t planned = c.pretrain_steps + c.steps;
  const double t =
      static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, planned));
  double lr = c.lr;
  switch (c.schedule) {
    case Schedule::kConstant:
      break;
    case Schedule::kStepDecay:
      if (t >= 0.6) lr *= 0.1;
      break;
    case Schedule::kCosine:
      lr *= 0.5 * (1.0 + std::cos(pi * t));
      break;
    case Schedule::kWarmup:
      if (step < kWarmupSteps) {
        lr *= static_cast<double>(step + 1) / static_cast<double>(kWarmupSteps);
      } else {
        const double u = static_cast<double>(step - kWarmupSteps) /
                         static_cast<double>(std::max<std::int64_t>(1, planned - kWarmupSteps));
        lr *= 0.5 * (1.0 + std::cos(pi * u));
      }
      break;
  }
  if (step >= c.fault_step && c.fault == Fault::kExplodingGradient) lr *= 100.0;
  if (step >= c.fault_step && c.fault == Fault::kTinyUpdate) lr = 1e-9;
  return lr;
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const Case& c, Net& net) {
  std::vector<torch::Tensor> params = net.module().parameters();
  switch (c.optimizer) {
    case Optimizer::kSgd:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(c.lr));
    case Optimizer::kMomentum:
      // The usual recipe: momentum 0.9 with weight decay 5e-4.
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(c.lr).momentum(0.9).weight_decay(5e-4));
    case Optimizer::kAdam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
  }
  return nullptr;
}

// The fault of the case at the start of `step` (before its forward pass).
void Inject(const Case& c, std::int64_t step, Net& net) {
  if (step != c.fault_step || c.fault_step == 0) return;
  torch::NoGradGuard no_grad;
  if (c.fault == Fault::kDeadRelu) {
    for (torch::Tensor b : net.hidden_biases()) b.fill_(-5.0);
  }
}

// The images as the net sees them at `step`: in the saturation fault the
// pixels are not scaled to [0, 1] (0..255 instead).
torch::Tensor Pixels(const Case& c, std::int64_t step, const torch::Tensor& x) {
  return c.fault == Fault::kSaturatedActivation && step >= c.fault_step ? x * 255.0 : x;
}

// The loss of `logits`: cross-entropy, or from the NaN fault's step on the
// textbook formula on sharpened logits (softmax rounds to 0, log 0 = -inf,
// and 0 * -inf = NaN).
torch::Tensor Loss(const Case& c, std::int64_t step, const torch::Tensor& logits,
                   const torch::Tensor& labels, torch::Tensor* log_probs) {
  if (c.fault == Fault::kNanFromOp && step >= c.fault_step) {
    *log_probs = torch::log(torch::softmax(logits * 50.0, 1));
    const torch::Tensor onehot = torch::one_hot(labels, logits.size(1)).to(torch::kFloat32);
    return -(onehot * *log_probs).sum(1).mean();
  }
  *log_probs = torch::log_softmax(logits, 1);
  return torch::nll_loss(*log_probs, labels);
}

double FullLoss(const Case& c, std::int64_t step, Net& net, const torch::Tensor& x,
                const torch::Tensor& y) {
  torch::NoGradGuard no_grad;
  torch::Tensor log_probs;
  return Loss(c, step, net.Forward(Pixels(c, step, x)), y, &log_probs)
      .to(torch::kFloat64)
      .item<double>();
}

// What one step hands to tstat: the taps, labels and logits, log-probabilities.
struct Slots {
  std::vector<std::unique_ptr<ta::TensorSlot>> inputs, outputs;
  std::unique_ptr<ta::ClassificationCapture> classes;
  std::unique_ptr<ta::TensorSlot> log_probs;

  Slots(Session* s, Net& net) {
    for (const Tap& t : net.taps()) {
      inputs.push_back(std::make_unique<ta::TensorSlot>(s, t.name + "_input"));
      outputs.push_back(std::make_unique<ta::TensorSlot>(s, t.name + "_output"));
    }
    classes = std::make_unique<ta::ClassificationCapture>(s);
    log_probs = std::make_unique<ta::TensorSlot>(s, "logprobs_output");
  }
  Status Set(Net& net, const torch::Tensor& labels, const torch::Tensor& logits,
             const torch::Tensor& lp) {
    for (std::size_t i = 0; i < net.taps().size(); ++i) {
      TSTAT_RETURN_IF_ERROR(inputs[i]->Set(net.taps()[i].input));
      TSTAT_RETURN_IF_ERROR(outputs[i]->Set(net.taps()[i].output));
    }
    TSTAT_RETURN_IF_ERROR(classes->Capture(labels, logits.detach()));
    return log_probs->Set(lp);
  }
};

// The episodes of the run, located in TRAIN steps (the TRAIN steps done
// when each was reported).
std::vector<Detection> Detections(const std::vector<Episode>& episodes,
                                  const std::map<std::int64_t, std::int64_t>& train_steps) {
  std::vector<Detection> out;
  for (const Episode& e : episodes) {
    Detection d;
    d.rule = e.rule;
    d.severity = SeverityName(e.severity);
    d.tensor = e.tensor;
    d.mode = ModeName(e.first.mode);
    auto t = train_steps.upper_bound(e.reported.global_step);
    d.train_step = t == train_steps.begin() ? 0 : std::prev(t)->second;
    d.steps = static_cast<std::int64_t>(e.steps);
    d.message = e.opening.message;
    out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(), [](const Detection& a, const Detection& b) {
    return a.train_step < b.train_step;
  });
  return out;
}

void Judge(CaseResult* r) {
  const Case& c = r->spec;
  if (c.fault == Fault::kNone) {
    r->passed = r->detections.empty() && r->oracle_flags.empty() && !r->stopped;
    if (!r->detections.empty()) {
      r->verdict = std::to_string(r->detections.size()) + " finding(s) on a healthy run, first " +
                   r->detections.front().rule + " at step " +
                   std::to_string(r->detections.front().train_step);
    } else if (!r->oracle_flags.empty()) {
      r->verdict = "not healthy by the oracles: " + r->oracle_flags.front();
    } else {
      r->verdict = "clean";
    }
    return;
  }
  for (const Detection& d : r->detections) {
    if (d.train_step < c.fault_step) {
      r->verdict =
          "false alarm before the fault: " + d.rule + " at step " + std::to_string(d.train_step);
      return;
    }
  }
  if (r->manifest.step < 0) {
    r->verdict = "the fault never manifested";
    return;
  }
  if (r->intended_step < 0) {
    r->verdict = std::string(IntendedRule(c.fault)) + " never fired";
    return;
  }
  const std::int64_t delay = r->intended_step - r->manifest.step;
  r->passed = delay <= kMaxDelaySteps;
  r->verdict = std::string(IntendedRule(c.fault)) + " " + std::to_string(delay) +
               " step(s) after the fault manifested";
}

// Dynamic loss scaling as torch.cuda.amp.GradScaler does it, on fp32
// tensors with fp16's range emulated: the loss times `scale`; a scaled
// gradient past fp16's largest value is Inf, as an fp16 backward makes it; an
// update whose gradients hold one is skipped and the scale halved; after 100
// good updates the scale doubles.
struct LossScaler {
  double scale = 0.0;  // 0: off
  std::int64_t good = 0;

  bool on() const { return scale > 0; }
  void OverflowAsFp16(Net& net) const {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : net.module().parameters()) {
      torch::Tensor g = p.grad();
      if (g.defined()) g.copy_(torch::where(g.abs() > 65504.0, g.sign() * INFINITY, g));
    }
  }
  bool Finite(Net& net) const {
    for (const torch::Tensor& p : net.module().parameters()) {
      const torch::Tensor g = p.grad();
      if (g.defined() && !torch::isfinite(g).all().item<bool>()) return false;
    }
    return true;
  }
  void Unscale(Net& net) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : net.module().parameters()) {
      torch::Tensor g = p.grad();
      if (g.defined()) g.div_(scale);
    }
    if (++good % 100 == 0) scale *= 2;
  }
  void Skipped() {
    scale /= 2;
    good = 0;
  }
};

}  // namespace

Result<CaseResult> RunCase(const Case& c, const demo::Dataset& data, const std::string& run_dir) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult result;
  result.spec = c;
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));
  const Split split = MakeSplit(data, c);
  std::unique_ptr<Net> net = MakeNet(c.arch, c.init);
  std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(c, *net);
  const std::int64_t rows = split.train_x.size(0);
  torch::Tensor order;
  std::int64_t cursor = rows;
  // A minibatch of the training split (a new permutation per epoch).
  auto next_batch = [&](torch::Tensor* x, torch::Tensor* y) {
    if (cursor + c.batch > rows) {
      order = torch::randperm(rows);
      cursor = 0;
    }
    const torch::Tensor idx =
        order.slice(0, cursor, cursor + std::min<std::int64_t>(c.batch, rows));
    cursor += c.batch;
    *x = split.train_x.index_select(0, idx);
    *y = split.train_y.index_select(0, idx);
  };
  // A resumed case: the steps before tstat is attached.
  for (std::int64_t step = 0; step < c.pretrain_steps; ++step) {
    torch::Tensor x, y, log_probs;
    next_batch(&x, &y);
    optimizer->param_groups()[0].options().set_lr(LearningRate(c, step));
    optimizer->zero_grad();
    Loss(c, step, net->Forward(Pixels(c, step, x)), y, &log_probs).backward();
    optimizer->step();
  }

  // The default configuration: a run directory and rules turned on.
  SessionConfig config;
  config.out_dir = run_dir;
  config.rules.enabled = true;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(config));
  TSTAT_RETURN_IF_ERROR(ta::RegisterParameters(*session, net->module()).status());
  Slots slots(session.get(), *net);

  Oracle oracle;
  LossScaler scaler{c.loss_scale};
  std::map<std::int64_t, std::int64_t> train_steps;  // global step -> TRAIN steps done
  std::int64_t step = 0;
  for (; step < c.steps; ++step) {
    Inject(c, step, *net);
    torch::Tensor x, y;
    next_batch(&x, &y);

    TSTAT_RETURN_IF_ERROR(session->SetMode(Mode::kTrain));
    TSTAT_RETURN_IF_ERROR(session->BeginStep());
    train_steps[session->current_step().global_step] = step;
    optimizer->param_groups()[0].options().set_lr(LearningRate(c, c.pretrain_steps + step));
    if (step % c.accumulate == 0) optimizer->zero_grad();
    const torch::Tensor logits = net->Forward(Pixels(c, step, x));
    torch::Tensor log_probs;
    const torch::Tensor loss = Loss(c, step, logits, y, &log_probs);
    TSTAT_RETURN_IF_ERROR(slots.Set(*net, y, logits, log_probs));
    torch::Tensor backward = loss / static_cast<double>(c.accumulate);
    if (scaler.on()) backward = backward * scaler.scale;
    backward.backward();
    if (scaler.on()) scaler.OverflowAsFp16(*net);
    const bool update = (step + 1) % c.accumulate == 0;
    const bool skip = update && scaler.on() && !scaler.Finite(*net);
    oracle.ObserveTrainStep(step, *net, logits, log_probs, y,
                            {scaler.on() ? scaler.scale : 1.0, skip});
    std::vector<torch::Tensor> before;
    for (const torch::Tensor& w : net->hidden_weights()) before.push_back(w.detach().clone());
    if (skip) {
      scaler.Skipped();
      ++result.updates_skipped;
    } else if (update) {
      if (scaler.on()) scaler.Unscale(*net);
      optimizer->step();
      oracle.ObserveUpdate(step, before, *net);
    }
    const double loss_value = loss.item<double>();
    if (step == 0) result.first_loss = loss_value;
    result.last_loss = loss_value;
    TSTAT_RETURN_IF_ERROR(session->SaveScalar("loss", loss_value));
    TSTAT_RETURN_IF_ERROR(session->EndStep());
    if (oracle.WantsFullTrainLoss(step)) {
      oracle.ObserveFullTrainLoss(step, FullLoss(c, step, *net, split.train_x, split.train_y));
    }
    if (session->ShouldStop()) {
      ++step;
      break;
    }

    if (c.eval_every > 0 && (step + 1) % c.eval_every == 0) {
      TSTAT_RETURN_IF_ERROR(session->SetMode(Mode::kEval));
      TSTAT_RETURN_IF_ERROR(session->BeginStep());
      train_steps[session->current_step().global_step] = step;
      torch::NoGradGuard no_grad;
      const torch::Tensor val_logits = net->Forward(Pixels(c, step, split.val_x));
      torch::Tensor val_log_probs;
      const torch::Tensor val_loss = Loss(c, step, val_logits, split.val_y, &val_log_probs);
      TSTAT_RETURN_IF_ERROR(slots.Set(*net, split.val_y, val_logits, val_log_probs));
      const double v = val_loss.to(torch::kFloat64).item<double>();
      TSTAT_RETURN_IF_ERROR(session->SaveScalar("loss", v));
      TSTAT_RETURN_IF_ERROR(session->EndStep());
      oracle.ObserveEval(step, v, FullLoss(c, step, *net, split.train_x, split.train_y));
      if (session->ShouldStop()) {
        ++step;
        break;
      }
    }
  }
  result.steps_run = step;
  result.stop_reason = session->stop_reason();
  result.stopped = !result.stop_reason.empty();
  TSTAT_RETURN_IF_ERROR(session->Close());

  result.manifest = oracle.Of(c.fault);
  for (const auto& [fault, m] : oracle.manifestations()) {
    if (c.fault == Fault::kNone && m.step >= 0) {
      result.oracle_flags.push_back(std::string(FaultName(fault)) + " at step " +
                                    std::to_string(m.step) + " (" + m.detail + ")");
    }
  }
  result.detections = Detections(session->episodes(), train_steps);
  for (const Detection& d : result.detections) {
    if (d.rule == IntendedRule(c.fault)) {
      result.intended_step = d.train_step;
      break;
    }
  }
  Judge(&result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tstat::detection
