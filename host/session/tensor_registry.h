// TensorRegistry: the tensors and scalar names of one session, with their
// ids, collections, and how to find their current view.
//
// Ids are dense, in registration order, never reused (TensorInfo::id). New
// entries are declared to the sink with the next queued batch
// (TakeUndeclared). Thread safety: none; the session serializes access.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tstat/session.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::host {

struct RegisteredTensor {
  TensorInfo info;
  std::vector<int> collections;  // indices into the CollectionSet, ascending
  TensorView view;               // the fixed view (data null when view_fn is set)
  ViewFunction view_fn;
  int unit_axis = -1;                      // TensorSpec::unit_axis
  bool adhoc = false;                      // from SaveTensor/SaveScalar: never captured at EndStep
  std::uint64_t name_hash = 0;             // seeds element sampling
  std::uint64_t saved_epoch = UINT64_MAX;  // the step (epoch) last saved in: ad-hoc,
                                           // or captured early (CaptureEarly)
  std::vector<std::uint8_t> previous;      // delta: the values of the previous save (host)
  bool has_previous = false;
  int raw_steps_left = 0;  // raw snapshots asked for by CaptureRawFor
  // Label counts with inferred classes (CaptureOptions::infer_label_classes):
  // the classes counted now, grown by the results (shared with the device
  // collector); 0 when the tensor holds too many classes to be labels.
  std::shared_ptr<std::atomic<int>> label_classes;
};

// Tensor (and scalar) names: 1 to 1024 bytes of valid UTF-8 without NUL.
// Anything else is allowed ('/', quotes, spaces, "..", newlines): names are
// stored verbatim and never used as paths.
inline constexpr std::size_t kMaxTensorNameBytes = 1024;
Status CheckTensorName(const std::string& name);

// Checks a view against its dtype/shape rules: valid dtype, non-negative
// dims whose product is numel (shape may be empty: 1-D of numel).
Status CheckViewShape(const TensorView& view);

// The view to capture now: the registered one, or the callback's (exceptions
// caught), checked against the registration: same dtype, space and device;
// a new shape sets numel. data == nullptr: not available at this step.
Status ResolveView(const RegisteredTensor& t, TensorView* v);

// 64-bit FNV-1a of the name (stable across runs and platforms).
std::uint64_t NameHash(const std::string& name);

class TensorRegistry {
 public:
  // Takes `t`, assigns its id. kInvalidArgument when the name is taken.
  Result<RegisteredTensor*> Add(RegisteredTensor t);
  RegisteredTensor* Find(const std::string& name);
  const RegisteredTensor* Find(const std::string& name) const;
  // Every entry, in id order; pointers stay valid for the registry's life.
  const std::vector<std::unique_ptr<RegisteredTensor>>& all() const { return tensors_; }
  std::vector<TensorInfo> TakeUndeclared();

 private:
  std::vector<std::unique_ptr<RegisteredTensor>> tensors_;
  std::unordered_map<std::string, std::uint32_t> by_name_;
  std::size_t declared_ = 0;
};

}  // namespace tstat::host
