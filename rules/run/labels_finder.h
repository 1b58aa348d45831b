// LabelsFinder: which records of a step are labels tensors, for the label
// rules (class_imbalance, confusion) and loss_not_decreasing's chance level. A
// record qualifies when the rule selects its tensor, the tensor's name matches
// the rule's labels regex parameter, or the tensor is in the finder's
// collection (when one is given). All depend on the tensor only, so the regex
// runs once per tensor and the record list once per step layout; the other
// records are never touched.
#pragma once

#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rules/engine/rule_base.h"
#include "tstat/status.h"

namespace tstat::rules {

class LabelsFinder {
 public:
  // Compiles `pattern`; kInvalidArgument naming the rule type and parameter
  // when it is not a valid RE2 pattern.
  Status Init(const std::string& rule_type, const std::string& parameter,
              const std::string& pattern, std::string collection = {}) {
    collection_ = std::move(collection);
    RE2::Options opt;
    opt.set_log_errors(false);
    regex_ = std::make_unique<RE2>(pattern, opt);
    if (!regex_->ok()) {
      return Status::InvalidArgument("rule " + rule_type + ": parameter " + parameter + " \"" +
                                     pattern + "\" is invalid: " + regex_->error());
    }
    return Status::OK();
  }

  // Whether a tensor called `name` matches the labels regex (any thread).
  bool Matches(const std::string& name) const {
    return regex_ != nullptr && RE2::PartialMatch(name, *regex_);
  }
  // Whether `t` is a labels tensor by its name or the finder's collection.
  bool Matches(const TensorInfo& t) const { return InCollection(t) || Matches(t.name); }

  // The indices of the labels records of `indexed`; `selected(tensor_id)`
  // says whether the rule selects a tensor.
  template <class SelectedFn>
  const std::vector<std::uint32_t>& Records(const IndexedStep& indexed, SelectedFn selected) {
    const int worker = indexed.view->worker;
    return records_.Records(indexed, [&](std::size_t i) {
      const TensorInfo* t = indexed.infos[i];
      if (t == nullptr) return false;
      if (selected(indexed.ids[i])) return true;
      bool created = false;
      std::uint8_t& m =
          matches_.Get(PerTensor<std::uint8_t>::WorkerGroup(worker), indexed.ids[i], &created);
      if (created) m = Matches(*t) ? 1 : 0;
      return m != 0;
    });
  }

 private:
  bool InCollection(const TensorInfo& t) const {
    return !collection_.empty() && std::find(t.collections.begin(), t.collections.end(),
                                             collection_) != t.collections.end();
  }

  std::unique_ptr<RE2> regex_;
  std::string collection_;
  LayoutCache records_;
  PerTensor<std::uint8_t> matches_;  // 1: the tensor's name matches the regex
};

}  // namespace tstat::rules
