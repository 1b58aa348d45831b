// EpisodeTracker: turns the per-step findings of the rules into episodes
// (tstat/rule.h): one per rule, worker, tensor, mode and measure (the name
// of the finding's first value), from the step its condition started to the
// step it ended.
//
// After the engine evaluated a step it hands the step (which tensors and
// scalars were judged) and that step's findings to Step():
//  - a finding with no episode starts one, or continues a pending one: the
//    episode opens once its rule's confirm_steps judged steps in a row held
//    the condition (a kOpen event; `first` is the first of them);
//  - a finding of an open episode extends it (last step, count, worst value;
//    a higher severity than before is a kEscalate event);
//  - an open or pending episode of this worker and mode whose tensor was
//    judged at this step without a finding ends (kClose; a pending one is
//    forgotten). A run-level episode (no tensor) ends at the first step of
//    its worker and mode without its finding.
// Steps where the tensor was not captured neither extend nor end it.
// Tick() takes findings of the clock (stalled_training); Finish() closes
// every open episode. Episode ids count from 1 in opening order, so the
// in-process and out-of-process runners of the same steps agree.
// Thread safety: one thread drives a tracker.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "rules/engine/rule_base.h"
#include "tstat/rule.h"

namespace tstat::rules {

struct EpisodeEvent {
  enum class Kind { kOpen, kEscalate, kClose };
  Kind kind = Kind::kOpen;
  Episode episode;  // its state after the event
};

class EpisodeTracker {
 public:
  // confirm_steps by rule name (1 for rules not listed).
  explicit EpisodeTracker(std::map<std::string, int> confirm_steps = {});

  void Step(const IndexedStep& step, const std::vector<Finding>& findings,
            std::vector<EpisodeEvent>* events);
  void Tick(const std::vector<Finding>& findings, std::vector<EpisodeEvent>* events);
  void Finish(std::vector<EpisodeEvent>* events);

  // Every episode opened so far, in opening order, with its current state.
  const std::vector<Episode>& episodes() const { return episodes_; }

 private:
  struct Key {
    int worker;
    Mode mode;
    std::string rule, tensor, measure;
    bool operator==(const Key& o) const {
      return worker == o.worker && mode == o.mode && rule == o.rule && tensor == o.tensor &&
             measure == o.measure;
    }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct State {
    Key key;
    std::int64_t episode = -1;        // index into episodes_, or -1 while pending
    int held = 0;                     // judged steps in a row with a finding (pending)
    Finding first;                    // pending: the finding of the first of them
    std::uint64_t seen_step = 0;      // the tracker step that last had a finding
    std::uint32_t tensor_id = kNoId;  // resolved when first judged
  };
  static constexpr std::uint32_t kNoId = 0xffffffffu;

  static Key KeyOf(const Finding& f);
  int ConfirmSteps(const std::string& rule) const;
  // A finding of the current step; `confirm` is 1 for ticks.
  void Add(const Finding& f, int confirm, std::vector<EpisodeEvent>* events);
  void Close(State* s, std::vector<EpisodeEvent>* events);
  // The id of the record or scalar called `name` in `step`, or kNoId.
  static std::uint32_t FindId(const IndexedStep& step, const std::string& name);
  static bool Worse(const Finding& a, const Finding& b);  // a worse than b

  std::map<std::string, int> confirm_steps_;
  std::unordered_map<Key, State, KeyHash> states_;
  std::vector<Episode> episodes_;
  std::uint64_t step_counter_ = 0;
  std::vector<std::uint8_t> present_;  // this step: ids judged (records and scalars)
};

}  // namespace tstat::rules
