// LibTorch adapter: captures a torch::nn::Module's training with a tstat::Session.
//
//   auto session = tstat::Session::Create(config).value();
//   namespace ta = tstat::torch_adapter;
//   ta::RegisterParameters(*session, *model);          // weights, biases, gradients
//   ta::ModuleCapture block1(session.get(), "block1"); // block1_input / block1_output
//   ta::ClassificationCapture cls(session.get());      // labels + logits (confusion)
//   for (...) {
//     session->BeginStep();
//     auto h = block1.Forward(model->block1, x);      // or block1.Capture(x, y)
//     auto logits = model->head(h);
//     cls.Capture(labels, logits);
//     auto loss = torch::nn::functional::cross_entropy(logits, labels);
//     loss.backward(); optimizer.step();
//     ta::SaveLoss(*session, "loss", loss);
//     ta::EndStep(*session, device);                   // CUDA: on the current stream
//   }
//
// Capture follows the collections' save schedules: everything is registered
// ONCE with a view callback (TensorSpec::view_fn) that returns the tensor's
// current storage, so a step that saves nothing costs no copy. Gradients are
// allocated lazily and reallocated by torch: their callback returns the
// current .grad(), or data == nullptr (skipped) while it is undefined.
// Activation/input/label slots keep the latest tensor (detached: the autograd
// graph is not kept alive) until the next Capture; what is saved is that
// tensor's content at EndStep. A tensor changed in place after Capture (its
// version counter moved) is not read: EndStep records a drop naming it and
// returns kFailedPrecondition, and from then on that slot reads its tensor
// when it is captured (TensorSlot).
// Non-contiguous tensors are copied to a contiguous one at capture time only.
//
// CUDA: tensors on a GPU are viewed as MemorySpace::kCuda and EndStep(session,
// device) passes torch's current CUDA stream, so tstat's reduction is ordered
// after the step's kernels. That part is compiled only when the LibTorch build
// has CUDA (TSTAT_TORCH_HAVE_CUDA); Debian's libtorch-dev is CPU-only, where
// CurrentCudaStream returns nullptr and CUDA tensors cannot exist.
//
// Thread safety: call Capture/Forward and Session::EndStep from the training
// thread (the view callbacks read the slots inside EndStep without copying).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/config.h"
#include "tstat/session.h"
#include "tstat/status.h"
#include "tstat/tensor_view.h"

namespace tstat::torch_adapter {

// torch dtype -> tstat DType: float32 f32, float16 f16, bfloat16 bf16, float64
// f64, int32 i32, int64 i64, uint8 u8. kNotSupported (naming it) otherwise.
Result<DType> ToDType(c10::ScalarType type);

// A non-owning view of `t`'s storage: dtype, shape, device (CPU ->
// MemorySpace::kHost, CUDA -> kCuda with its ordinal). Errors: undefined
// tensor, a non-strided layout (sparse, mkldnn), a device other than CPU/CUDA,
// an unsupported dtype, and a non-contiguous tensor (kInvalidArgument "not
// contiguous: call .contiguous()"). `t` must outlive the view's use.
Result<TensorView> ViewOf(const torch::Tensor& t);

// torch's current CUDA stream on `device` (nullptr for a CPU device, and in
// builds whose LibTorch has no CUDA).
CUstream_st* CurrentCudaStream(const torch::Device& device);
// session.EndStep(CurrentCudaStream(device)).
Status EndStep(Session& session, const torch::Device& device = torch::kCPU);

// Saves a scalar loss (loss.item(): synchronizes a CUDA tensor) with
// Session::SaveScalar. kInvalidArgument unless `loss` has one element.
Status SaveLoss(Session& session, const std::string& name, const torch::Tensor& loss);

struct ParameterOptions {
  std::string prefix;     // prepended to every parameter name ("model.")
  bool gradients = true;  // also register "gradient/<name>" (collection gradients)
};

// Registers every parameter of `module` (named_parameters(), recursive) as
// "<prefix><name>" in collection `biases` when its last name component
// contains "bias", else `weights`; and its gradient as "gradient/<prefix><name>"
// in `gradients`. Parameters are read through view callbacks (set_data / to()
// are followed). Returns the ids (parameter, then gradient, per parameter);
// the first registration error stops it.
Result<std::vector<std::uint32_t>> RegisterParameters(Session& session,
                                                      const torch::nn::Module& module,
                                                      const ParameterOptions& options = {});

// One captured tensor: keeps the latest tensor given to Set and registers it
// with the session on the first Set (its dtype and device fix the
// registration), with a view callback reading the latest tensor. Errors do
// not throw: Set returns them and status() keeps the first one. A tensor
// changed in place after Set and before EndStep is not read at that step
// (EndStep's status and a drop record say so); from then on the slot reads
// each tensor when it is set (Session::CaptureEarly), or keeps a copy of
// it when EndStep must read it (a CUDA tensor, a raw snapshot due).
class TensorSlot {
 public:
  // `unit_axis`: TensorSpec::unit_axis (1 for Conv1d's [batch, channels,
  // length]; -1: by rank).
  TensorSlot(Session* session, std::string name, std::vector<std::string> collections = {},
             int unit_axis = -1);
  ~TensorSlot();
  TensorSlot(const TensorSlot&) = delete;
  TensorSlot& operator=(const TensorSlot&) = delete;

  Status Set(const torch::Tensor& t);
  const std::string& name() const { return name_; }
  bool registered() const { return registered_; }
  Status status() const { return first_error_; }

 private:
  struct State;
  // Set's tensor read at once (the slot's tensors are changed in place).
  Status ReadNow();

  Session* session_;
  std::string name_;
  std::vector<std::string> collections_;
  int unit_axis_;
  std::shared_ptr<State> state_;  // shared with the view callback
  bool registered_ = false;
  std::uint32_t id_ = 0;  // the session's, once registered
  Status first_error_;
};

// Inputs and outputs of one module you wrap: "<name>_input" (collection
// `inputs`) and "<name>_output" (collection `activations`), the names
// smdebug's built-in regexes expect. `unit_axis` as TensorSlot's, for both.
class ModuleCapture {
 public:
  enum Which { kOutputs = 1, kInputs = 2, kInputsAndOutputs = 3 };
  ModuleCapture(Session* session, const std::string& name, Which which = kInputsAndOutputs,
                int unit_axis = -1);

  Status Capture(const torch::Tensor& input, const torch::Tensor& output);
  // Runs module->forward(input) and captures both. Capture errors are kept in
  // status(), never thrown: training goes on. The input is captured before
  // the module runs, so a module that changes it in place makes it a drop at
  // the first EndStep, never stats of the changed values; from then on it is
  // read before the module runs (TensorSlot).
  template <typename ModuleHolder>
  torch::Tensor Forward(ModuleHolder& module, const torch::Tensor& input) {
    if (which_ & kInputs) (void)input_.Set(input);
    torch::Tensor output = module->forward(input);
    if (which_ & kOutputs) (void)output_.Set(output);
    return output;
  }
  Status status() const;

 private:
  Which which_;
  TensorSlot input_;
  TensorSlot output_;
};

// The `labels` collection with label counts and a confusion matrix against
// the registered tensor `predictions_name` (argmax over logits [n, classes]
// when `argmax`). Put it in SessionConfig::collections before Create.
CollectionConfig LabelsCollection(int num_classes,
                                  const std::string& predictions_name = "predictions",
                                  bool argmax = true);

// Labels (integer class ids, shape [n]) as "labels" and predictions (logits
// [n, classes], or class ids) as "predictions" (collection `default`).
class ClassificationCapture {
 public:
  explicit ClassificationCapture(Session* session, const std::string& labels_name = "labels",
                                 const std::string& predictions_name = "predictions");
  // kInvalidArgument unless labels are int32/int64/uint8 with as many rows as
  // predictions.
  Status Capture(const torch::Tensor& labels, const torch::Tensor& predictions);
  Status status() const;

 private:
  TensorSlot labels_;
  TensorSlot predictions_;
};

}  // namespace tstat::torch_adapter
