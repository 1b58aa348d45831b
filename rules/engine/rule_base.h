// RuleBase: what every built-in rule shares — its spec, which tensors and
// modes it looks at (collection_names ∪ tensor_regex, or the rule's default
// collections when neither is given), the "matched nothing" warning, and the
// construction of findings.
//
// Also the indexed form of a step (IndexedStep, built once per step by a
// StepIndexer): the engine hands it to every RuleBase rule, so that per step
// a rule costs O(records it selects), not O(all records): its selection is
// resolved once per (worker, tensor) into a dense table and the list of
// selected record indices is reused while a worker's steps list the same
// tensors in the same order (the usual case).
// Thread safety: like Rule, driven by one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tstat/rule.h"

namespace re2 {
class RE2;
}

namespace tstat::rules {

// One step with, for each record (capture order), its tensor id and catalog
// entry (null when the catalog does not know the id). `layout` is equal for
// two steps of one worker indexed by the same `indexer` exactly when they
// list the same tensor ids in the same order, with the same catalog, and
// every id was known to it; anything cached per layout stays valid.
struct IndexedStep {
  const StepView* view = nullptr;
  const std::uint32_t* ids = nullptr;
  const TensorInfo* const* infos = nullptr;
  std::size_t size = 0;  // records->size() (0 when records is null)
  const void* indexer = nullptr;
  std::uint64_t layout = 0;
};

// Builds IndexedSteps; keeps the last id list of each worker to tell layouts
// apart. The IndexedStep it returns is valid until the next Index() call.
class StepIndexer {
 public:
  IndexedStep Index(const StepView& view);

 private:
  struct WorkerLayout {
    int worker = 0;
    std::vector<std::uint32_t> ids;
    const TensorCatalog* catalog = nullptr;
    std::uint64_t layout = 0;
  };
  std::vector<WorkerLayout> layouts_;
  std::vector<std::uint32_t> scratch_;
  std::vector<const TensorInfo*> infos_;
  std::uint64_t next_layout_ = 1;
};

// State of each tensor of a group (a worker, or a worker and a mode): dense,
// indexed by id, for ids below kDenseIds (ids are dense per worker), hashed
// above (a wild id must not allocate gigabytes). No hashing per record in
// the usual case. A reference from Get() is valid until the next Get().
template <class T>
class PerTensor {
 public:
  static constexpr std::uint32_t kDenseIds = 1u << 20;
  static std::uint64_t WorkerGroup(int worker) { return static_cast<std::uint32_t>(worker); }
  static std::uint64_t WorkerModeGroup(int worker, Mode mode) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(worker)) << 8) |
           static_cast<std::uint64_t>(mode);
  }

  // The state of (group, id); value-initialized and *created = true when new.
  T& Get(std::uint64_t group, std::uint32_t id, bool* created = nullptr) {
    Group& g = FindGroup(group);
    bool is_new = false;
    T* t = nullptr;
    if (id < kDenseIds) {
      if (id >= g.present.size()) {
        const std::size_t n = std::max<std::size_t>(id + 1, g.present.size() * 2);
        g.present.resize(n, 0);
        g.dense.resize(n);
      }
      is_new = g.present[id] == 0;
      g.present[id] = 1;
      t = &g.dense[id];
    } else {
      auto [it, inserted] = g.sparse.try_emplace(id);
      is_new = inserted;
      t = &it->second;
    }
    if (created != nullptr) *created = is_new;
    return *t;
  }

  // The state of (group, id), or null if never created.
  const T* Find(std::uint64_t group, std::uint32_t id) const {
    for (const Group& g : groups_) {
      if (g.key != group) continue;
      if (id < kDenseIds) return id < g.present.size() && g.present[id] ? &g.dense[id] : nullptr;
      auto it = g.sparse.find(id);
      return it == g.sparse.end() ? nullptr : &it->second;
    }
    return nullptr;
  }

  // f(state) for every state created so far.
  template <class F>
  void ForEach(F f) const {
    for (const Group& g : groups_) {
      for (std::size_t i = 0; i < g.present.size(); ++i) {
        if (g.present[i]) f(g.dense[i]);
      }
      for (const auto& kv : g.sparse) f(kv.second);
    }
  }

 private:
  struct Group {
    std::uint64_t key = 0;
    std::vector<std::uint8_t> present;
    std::vector<T> dense;
    std::unordered_map<std::uint32_t, T> sparse;
  };
  Group& FindGroup(std::uint64_t key) {
    if (last_ < groups_.size() && groups_[last_].key == key) return groups_[last_];
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      if (groups_[i].key == key) {
        last_ = i;
        return groups_[i];
      }
    }
    groups_.emplace_back();
    groups_.back().key = key;
    last_ = groups_.size() - 1;
    return groups_.back();
  }
  std::vector<Group> groups_;
  std::size_t last_ = 0;
};

// Record indices of a step for which pred(index) holds, recomputed only when
// the worker's layout changes: pred may depend only on the record's tensor
// (its id and catalog entry) and on what is fixed once per (worker, tensor).
class LayoutCache {
 public:
  template <class Pred>
  const std::vector<std::uint32_t>& Records(const IndexedStep& step, Pred pred) {
    Entry* e = nullptr;
    for (Entry& x : entries_) e = x.worker == step.view->worker ? &x : e;
    if (e == nullptr) {
      entries_.emplace_back();
      e = &entries_.back();
      e->worker = step.view->worker;
    } else if (e->indexer == step.indexer && e->layout == step.layout && step.layout != 0) {
      return e->records;
    }
    e->records.clear();
    for (std::size_t i = 0; i < step.size; ++i) {
      if (pred(i)) e->records.push_back(static_cast<std::uint32_t>(i));
    }
    e->indexer = step.indexer;
    e->layout = step.layout;
    return e->records;
  }

 private:
  struct Entry {
    int worker = 0;
    const void* indexer = nullptr;
    std::uint64_t layout = 0;
    std::vector<std::uint32_t> records;
  };
  std::vector<Entry> entries_;
};

class RuleBase : public Rule {
 public:
  // `default_collections` apply when the spec names neither collections nor a regex.
  RuleBase(RuleSpec spec, std::vector<std::string> default_collections);
  ~RuleBase() override;
  // The built-in rules judge stats, scalars and extras; the one that reads
  // exponent histograms (low_precision_range) says so.
  bool ReadsExponentHistograms() const override { return false; }

  const RuleSpec& spec() const override { return spec_; }
  std::string Diagnostics() const override;

  // kInvalidArgument naming tensor_regex if it does not compile.
  Status Init();

  // The engine's entry point for RuleBase rules: one complete step, indexed.
  // Same contract as Rule::Evaluate. The default forwards to Evaluate(view);
  // rules that walk records override it (and route Evaluate() here through
  // EvaluateViaIndex()).
  virtual void EvaluateStep(const IndexedStep& step, std::vector<Finding>* findings) {
    Evaluate(*step.view, findings);
  }

 protected:
  bool ModeSelected(Mode m) const;
  // Selection of one tensor of one worker (resolved once per worker and id);
  // notes it for the "matched nothing" warning.
  bool Selected(const StepView& step, std::uint32_t tensor_id) {
    const bool sel = Resolve(step.worker, tensor_id, step);
    saw_tensors_ = true;
    matched_any_ = matched_any_ || sel;
    return sel;
  }
  // Indices of the records of `step` whose tensor is selected, in capture
  // order (cached per layout). Does not note anything for the warning: call
  // NoteSelection().
  const std::vector<std::uint32_t>& SelectedRecords(const IndexedStep& step);
  // What Selected() notes, for callers of SelectedRecords(): `saw` that the
  // selection was asked about some tensor, `matched` that one was selected.
  void NoteSelection(bool saw, bool matched) {
    saw_tensors_ = saw_tensors_ || saw;
    matched_any_ = matched_any_ || matched;
  }
  bool saw_tensors() const { return saw_tensors_; }
  // Evaluate(view) through this rule's own indexer (for callers that drive
  // the rule without an engine).
  void EvaluateViaIndex(const StepView& view, std::vector<Finding>* findings) {
    EvaluateStep(own_indexer_.Index(view), findings);
  }

  const TensorInfo* Info(const StepView& step, std::uint32_t tensor_id) const {
    return step.catalog ? step.catalog->Find(tensor_id) : nullptr;
  }
  // A finding of this rule at `step`, with the rule's severity.
  Finding MakeFinding(const StepView& step, const std::string& tensor, std::string message,
                      std::vector<std::pair<std::string, double>> values) const;

  // For Needs(): whether the selection takes `t` (reads only what is fixed
  // at construction, so any thread may ask), and the modes the rule judges
  // as a CaptureNeeds mask: the spec's, or `def` when it names none.
  bool Takes(const TensorInfo& t) const { return Matches(t); }
  std::uint8_t JudgedModes(std::uint8_t def) const;
  // The stat set of `t` in `modes`, except EVAL and PREDICT for gradients
  // (they are not computed there: collection `gradients` never saves them).
  static CaptureNeeds StatsIn(const TensorInfo& t, std::uint8_t modes);

 private:
  // Per-worker selection: dense by id below kDenseIds, hashed above (ids are
  // dense in practice; a wild id must not allocate gigabytes).
  static constexpr std::uint32_t kDenseIds = 1u << 22;
  struct WorkerSelection {
    int worker = 0;
    std::vector<std::int8_t> dense;  // -1 unknown, 0 no, 1 yes
    std::unordered_map<std::uint32_t, bool> sparse;
    const void* indexer = nullptr;  // layout of `records`
    std::uint64_t layout = 0;
    std::vector<std::uint32_t> records;
  };
  WorkerSelection& ForWorker(int worker);
  bool Resolve(int worker, std::uint32_t tensor_id, const StepView& step);
  bool Matches(const TensorInfo& t) const;

  RuleSpec spec_;
  std::vector<std::string> collections_;
  std::unique_ptr<re2::RE2> regex_;
  std::vector<WorkerSelection> workers_;
  std::size_t last_worker_ = 0;
  StepIndexer own_indexer_;
  bool saw_tensors_ = false;
  bool matched_any_ = false;
};

// Whether `t` is registered in collection `c`.
inline bool InCollection(const TensorInfo& t, const char* c) {
  return std::find(t.collections.begin(), t.collections.end(), c) != t.collections.end();
}
// Whether a record's stats count a NaN or an Inf.
inline bool HoldsNonFinite(const TensorStatsRecord& r) {
  return r.has_stats && (r.stats.nan_count > 0 || r.stats.inf_count() > 0);
}

// Formats a double for messages ("1e-07", "0.25").
std::string Num(double v);
// `s` with ASCII A-Z lowered (what case-insensitive parameters and names
// are compared by; other bytes as they are).
std::string AsciiLower(const std::string& s);
// A step in messages, in the user's terms: "TRAIN step 12", or "step 12" for
// a GLOBAL step (a run that never set a mode).
std::string StepText(Mode mode, std::int64_t mode_step);
inline std::string StepText(const StepKey& k) { return StepText(k.mode, k.mode_step); }

}  // namespace tstat::rules
