// TensorSlot, ModuleCapture, ClassificationCapture: tensors produced by the
// forward pass, registered once and read at the steps their collections save.
#include <mutex>
#include <string>
#include <utility>

#include "host/torch/src/capture_view.h"
#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter {

struct TensorSlot::State {
  std::mutex mu;
  torch::Tensor latest;       // detached; undefined until Set (or after the slot died)
  torch::Tensor keep;         // contiguous copy of a non-contiguous `latest`
  std::int64_t version = -1;  // latest's version counter at Set (-1: none)
  // `latest` was once changed in place before EndStep read it: from then on
  // each tensor is read when it is set (or copied, when it must wait).
  bool read_at_set = false;
};

namespace {

// torch's version counter of `t` (bumped by every in-place change; a
// detached tensor shares it), or -1 for one without (inference tensors).
std::int64_t VersionOf(const torch::Tensor& t) {
  try {
    return static_cast<std::int64_t>(t._version());
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

TensorSlot::TensorSlot(Session* session, std::string name, std::vector<std::string> collections,
                       int unit_axis)
    : session_(session),
      name_(std::move(name)),
      collections_(std::move(collections)),
      unit_axis_(unit_axis),
      state_(std::make_shared<State>()) {}

TensorSlot::~TensorSlot() {
  // The session may outlive the slot: its callback then sees no tensor.
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->latest = torch::Tensor();
  state_->keep = torch::Tensor();
}

Status TensorSlot::Set(const torch::Tensor& t) {
  Status s;
  if (!t.defined()) {
    s = Status::InvalidArgument("undefined tensor");
  } else if (!registered_ && first_error_.ok()) {
    TensorView view;
    torch::Tensor keep;
    s = internal::CaptureView(t, &keep, &view);
    if (s.ok() && session_ == nullptr) s = Status::FailedPrecondition("no session");
    if (s.ok()) {
      view.data = nullptr;
      TensorSpec spec(name_, view, collections_);
      spec.unit_axis = unit_axis_;
      std::shared_ptr<State> state = state_;
      spec.view_fn = [state](TensorView* v) {
        std::lock_guard<std::mutex> lock(state->mu);
        // Changed since Capture: its values are not the ones captured.
        if (state->latest.defined() && state->version >= 0 &&
            VersionOf(state->latest) != state->version) {
          state->read_at_set = true;
          return Status::FailedPrecondition(
              "changed in place after it was captured (an in-place op on it later in the step, "
              "such as x += y or an activation with inplace=True): not read at this step; from "
              "the next step on it is read when it is captured");
        }
        return internal::CaptureView(state->latest, &state->keep, v);
      };
      Result<std::uint32_t> id = session_->RegisterTensor(spec);
      s = id.status();
      registered_ = id.ok();
      if (id.ok()) id_ = *id;
    }
  }
  if (!s.ok()) {
    s = s.WithContext("tensor \"" + name_ + "\"");
    if (first_error_.ok()) first_error_ = s;
    return s;
  }
  if (!registered_) return first_error_;
  bool read_now;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->latest = t.detach();
    state_->version = VersionOf(state_->latest);
    read_now = state_->read_at_set;
  }
  return read_now ? ReadNow() : Status::OK();
}

Status TensorSlot::ReadNow() {
  // The view callback takes the state's lock: not held here.
  Result<EarlyCapture> early = session_->CaptureEarly(id_);
  if (!early.ok()) return early.status().WithContext("tensor \"" + name_ + "\"");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (*early == EarlyCapture::kAtEndStep) {
    // A CUDA tensor, or a raw snapshot is due: EndStep reads a copy that
    // nothing changes (on the current stream for a CUDA one).
    state_->latest = state_->latest.clone();
    state_->version = VersionOf(state_->latest);
  } else {  // read now, or not due at this step
    state_->latest = torch::Tensor();
    state_->keep = torch::Tensor();
    state_->version = -1;
  }
  return Status::OK();
}

ModuleCapture::ModuleCapture(Session* session, const std::string& name, Which which, int unit_axis)
    : which_(which),
      input_(session, name + "_input", {"inputs"}, unit_axis),
      output_(session, name + "_output", {"activations"}, unit_axis) {}

Status ModuleCapture::Capture(const torch::Tensor& input, const torch::Tensor& output) {
  Status in = (which_ & kInputs) ? input_.Set(input) : Status::OK();
  Status out = (which_ & kOutputs) ? output_.Set(output) : Status::OK();
  return in.ok() ? out : in;
}

Status ModuleCapture::status() const {
  return input_.status().ok() ? output_.status() : input_.status();
}

CollectionConfig LabelsCollection(int num_classes, const std::string& predictions_name,
                                  bool argmax) {
  CollectionConfig c;
  c.name = "labels";
  c.stats.label_classes = num_classes;
  c.stats.confusion_predictions = predictions_name;
  c.stats.confusion_argmax = argmax;
  return c;
}

ClassificationCapture::ClassificationCapture(Session* session, const std::string& labels_name,
                                             const std::string& predictions_name)
    : labels_(session, labels_name, {"labels"}), predictions_(session, predictions_name) {}

Status ClassificationCapture::Capture(const torch::Tensor& labels,
                                      const torch::Tensor& predictions) {
  if (!labels.defined() || !predictions.defined()) {
    return Status::InvalidArgument("labels and predictions must be defined tensors");
  }
  const c10::ScalarType t = labels.scalar_type();
  if (t != torch::kLong && t != torch::kInt && t != torch::kByte) {
    return Status::InvalidArgument(
        std::string("labels must be int64, int32 or uint8 class ids, got ") + c10::toString(t));
  }
  if (labels.dim() != 1 || predictions.dim() < 1 || predictions.size(0) != labels.size(0)) {
    return Status::InvalidArgument("labels must be [n] and predictions [n] or [n, classes]; got " +
                                   c10::str(labels.sizes()) + " and " +
                                   c10::str(predictions.sizes()));
  }
  Status l = labels_.Set(labels);
  Status p = predictions_.Set(predictions);
  return l.ok() ? p : l;
}

Status ClassificationCapture::status() const {
  return labels_.status().ok() ? predictions_.status() : labels_.status();
}

}  // namespace tstat::torch_adapter
