#include "rules/engine/rule_base.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdio>

#include "rules/engine/builtin_defaults.h"

namespace tstat::rules {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string AsciiLower(const std::string& s) {
  std::string lower;
  lower.reserve(s.size());
  for (char c : s) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return lower;
}

std::string StepText(Mode mode, std::int64_t mode_step) {
  const std::string n = "step " + std::to_string(mode_step);
  return mode == Mode::kGlobal ? n : std::string(ModeName(mode)) + " " + n;
}

RuleBase::RuleBase(RuleSpec spec, std::vector<std::string> default_collections)
    : spec_(std::move(spec)) {
  if (spec_.name.empty()) spec_.name = spec_.type;
  const BuiltinDefaults* d = FindBuiltinDefaults(spec_.type);
  if (!spec_.severity) spec_.severity = d ? d->severity : Severity::kError;
  if (!spec_.confirm_steps) spec_.confirm_steps = d ? d->confirm_steps : 1;
  collections_ = spec_.collection_names;
  if (collections_.empty() && spec_.tensor_regex.empty())
    collections_ = std::move(default_collections);
}

RuleBase::~RuleBase() = default;

Status RuleBase::Init() {
  if (!spec_.tensor_regex.empty()) {
    RE2::Options opt;
    opt.set_log_errors(false);
    regex_ = std::make_unique<RE2>(spec_.tensor_regex, opt);
    if (!regex_->ok()) {
      return Status::InvalidArgument("rule " + spec_.name + ": tensor_regex \"" +
                                     spec_.tensor_regex + "\" is invalid: " + regex_->error());
    }
  }
  return Status::OK();
}

bool RuleBase::ModeSelected(Mode m) const {
  return spec_.modes.empty() ||
         std::find(spec_.modes.begin(), spec_.modes.end(), m) != spec_.modes.end();
}

bool RuleBase::Matches(const TensorInfo& t) const {
  for (const std::string& c : collections_) {
    if (std::find(t.collections.begin(), t.collections.end(), c) != t.collections.end())
      return true;
  }
  return regex_ != nullptr && RE2::PartialMatch(t.name, *regex_);
}

RuleBase::WorkerSelection& RuleBase::ForWorker(int worker) {
  if (last_worker_ < workers_.size() && workers_[last_worker_].worker == worker) {
    return workers_[last_worker_];
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].worker == worker) {
      last_worker_ = i;
      return workers_[i];
    }
  }
  workers_.emplace_back();
  workers_.back().worker = worker;
  last_worker_ = workers_.size() - 1;
  return workers_.back();
}

bool RuleBase::Resolve(int worker, std::uint32_t tensor_id, const StepView& step) {
  WorkerSelection& w = ForWorker(worker);
  if (tensor_id < kDenseIds) {
    if (tensor_id < w.dense.size() && w.dense[tensor_id] >= 0) return w.dense[tensor_id] != 0;
    if (tensor_id >= w.dense.size()) {
      w.dense.resize(std::max<std::size_t>(tensor_id + 1, w.dense.size() * 2), -1);
    }
    const TensorInfo* t = Info(step, tensor_id);
    const bool sel = t != nullptr && Matches(*t);
    w.dense[tensor_id] = sel ? 1 : 0;
    return sel;
  }
  auto it = w.sparse.find(tensor_id);
  if (it != w.sparse.end()) return it->second;
  const TensorInfo* t = Info(step, tensor_id);
  const bool sel = t != nullptr && Matches(*t);
  w.sparse.emplace(tensor_id, sel);
  return sel;
}

const std::vector<std::uint32_t>& RuleBase::SelectedRecords(const IndexedStep& step) {
  WorkerSelection& w = ForWorker(step.view->worker);
  if (w.indexer == step.indexer && w.layout == step.layout && step.layout != 0) return w.records;
  w.records.clear();
  for (std::size_t i = 0; i < step.size; ++i) {
    // Resolve() may grow w's tables but never moves `w` itself.
    if (Resolve(step.view->worker, step.ids[i], *step.view)) {
      w.records.push_back(static_cast<std::uint32_t>(i));
    }
  }
  w.indexer = step.indexer;
  w.layout = step.layout;
  return w.records;
}

IndexedStep StepIndexer::Index(const StepView& view) {
  IndexedStep out;
  out.view = &view;
  out.indexer = this;
  const std::size_t n = view.records ? view.records->size() : 0;
  scratch_.resize(n);
  infos_.resize(n);
  bool all_known = true;
  // Records are kilobytes apart: ask for the ids a few records ahead.
  constexpr std::size_t kAhead = 8;
  const TensorStatsRecord* records = n ? view.records->data() : nullptr;
  for (std::size_t i = 0; i < n && i < kAhead; ++i) __builtin_prefetch(&records[i].tensor_id);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&records[i + kAhead].tensor_id);
    const std::uint32_t id = records[i].tensor_id;
    scratch_[i] = id;
    infos_[i] = view.catalog ? view.catalog->Find(id) : nullptr;
    all_known = all_known && infos_[i] != nullptr;
  }
  WorkerLayout* w = nullptr;
  for (WorkerLayout& l : layouts_) w = l.worker == view.worker ? &l : w;
  if (w == nullptr) {
    layouts_.emplace_back();
    w = &layouts_.back();
    w->worker = view.worker;
  }
  // An unknown id may become known later, and what rules derive from a
  // catalog entry must then be derived anew: such a step shares no layout.
  const bool same = all_known && w->layout != 0 && w->catalog == view.catalog && w->ids == scratch_;
  if (!same) {
    w->ids.swap(scratch_);
    w->catalog = view.catalog;
    w->layout = all_known ? next_layout_++ : 0;
  }
  out.ids = w->ids.data();
  out.infos = infos_.data();
  out.size = n;
  out.layout = w->layout;
  return out;
}

std::string RuleBase::Diagnostics() const {
  if (!saw_tensors_ || matched_any_) return {};
  std::string what;
  if (!spec_.tensor_regex.empty()) what = "tensor_regex \"" + spec_.tensor_regex + "\"";
  for (const std::string& c : collections_) {
    what += (what.empty() ? "collection " : ", collection ") + c;
  }
  return "rule " + spec_.name + ": " + what + " matched no tensor, so it never fires";
}

Finding RuleBase::MakeFinding(const StepView& step, const std::string& tensor, std::string message,
                              std::vector<std::pair<std::string, double>> values) const {
  Finding f;
  f.rule = spec_.name;
  f.type = spec_.type;
  f.step = step.key;
  f.worker = step.worker;
  f.tensor = tensor;
  f.values = std::move(values);
  f.severity = *spec_.severity;
  f.message = std::move(message);
  f.wall_time = step.wall_time;
  return f;
}

std::uint8_t RuleBase::JudgedModes(std::uint8_t def) const {
  if (spec_.modes.empty()) return def;
  std::uint8_t m = 0;
  for (Mode mode : spec_.modes) m = static_cast<std::uint8_t>(m | CaptureNeeds::ModeBit(mode));
  return m;
}

CaptureNeeds RuleBase::StatsIn(const TensorInfo& t, std::uint8_t modes) {
  CaptureNeeds n;
  n.stats = true;
  n.modes = modes;
  if (InCollection(t, "gradients")) {
    n.modes = static_cast<std::uint8_t>(n.modes & CaptureNeeds::TrainModes());
  }
  return n;
}

}  // namespace tstat::rules
