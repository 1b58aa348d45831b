// EpisodeTracker (episodes.h).
#include "rules/engine/episodes.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tstat::rules {

std::size_t EpisodeTracker::KeyHash::operator()(const Key& k) const {
  std::size_t h = std::hash<std::string>()(k.rule);
  h = h * 31 + std::hash<std::string>()(k.tensor);
  h = h * 31 + std::hash<std::string>()(k.measure);
  return h * 31 + static_cast<std::size_t>(k.worker) * 7 + static_cast<std::size_t>(k.mode);
}

EpisodeTracker::EpisodeTracker(std::map<std::string, int> confirm_steps)
    : confirm_steps_(std::move(confirm_steps)) {}

EpisodeTracker::Key EpisodeTracker::KeyOf(const Finding& f) {
  return Key{f.worker, f.step.mode, f.rule, f.tensor,
             f.values.empty() ? std::string() : f.values.front().first};
}

int EpisodeTracker::ConfirmSteps(const std::string& rule) const {
  auto it = confirm_steps_.find(rule);
  return it == confirm_steps_.end() ? 1 : std::max(1, it->second);
}

bool EpisodeTracker::Worse(const Finding& a, const Finding& b) {
  if (a.values.empty() || b.values.empty()) return false;
  const double x = a.values.front().second, y = b.values.front().second;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
  return a.lower_is_worse ? x < y : x > y;
}

void EpisodeTracker::Add(const Finding& f, int confirm, std::vector<EpisodeEvent>* events) {
  const Key key = KeyOf(f);
  auto [it, created] = states_.try_emplace(key);
  State& s = it->second;
  if (created) s.key = key;
  if (s.seen_step == step_counter_ && !created) {
    // A second finding of the same key in one step: only its value counts.
    if (s.episode >= 0) {
      Episode& e = episodes_[static_cast<std::size_t>(s.episode)];
      if (Worse(f, e.worst)) e.worst = f;
    }
    return;
  }
  s.seen_step = step_counter_;
  if (s.episode >= 0) {
    Episode& e = episodes_[static_cast<std::size_t>(s.episode)];
    e.last = f.step;
    ++e.steps;
    if (Worse(f, e.worst)) e.worst = f;
    if (f.severity > e.severity) {
      e.severity = f.severity;
      events->push_back({EpisodeEvent::Kind::kEscalate, e});
    }
    return;
  }
  if (s.held == 0) s.first = f;
  ++s.held;
  if (s.held < confirm) return;
  Episode e;
  e.id = episodes_.size() + 1;
  e.rule = f.rule;
  e.type = f.type;
  e.worker = f.worker;
  e.tensor = f.tensor;
  e.severity = std::max(f.severity, s.first.severity);
  e.first = s.first.step;
  e.last = f.step;
  e.reported = f.step;
  e.steps = static_cast<std::uint64_t>(s.held);
  e.opening = s.first;
  e.worst = Worse(f, s.first) ? f : s.first;
  e.open = true;
  s.episode = static_cast<std::int64_t>(episodes_.size());
  episodes_.push_back(e);
  events->push_back({EpisodeEvent::Kind::kOpen, e});
}

void EpisodeTracker::Close(State* s, std::vector<EpisodeEvent>* events) {
  if (s->episode >= 0) {
    Episode& e = episodes_[static_cast<std::size_t>(s->episode)];
    e.open = false;
    events->push_back({EpisodeEvent::Kind::kClose, e});
  }
  s->episode = -1;
  s->held = 0;
}

void EpisodeTracker::Step(const IndexedStep& step, const std::vector<Finding>& findings,
                          std::vector<EpisodeEvent>* events) {
  ++step_counter_;
  const StepView& view = *step.view;
  for (const Finding& f : findings) {
    Add(f, f.confirm_steps > 0 ? f.confirm_steps : ConfirmSteps(f.rule), events);
  }
  bool any_other = false;
  for (const auto& kv : states_) {
    const State& s = kv.second;
    if (s.key.worker == view.worker && s.key.mode == view.key.mode &&
        s.seen_step != step_counter_) {
      any_other = true;
      break;
    }
  }
  if (!any_other) return;
  // Which ids this step judged: its records and its scalars.
  std::fill(present_.begin(), present_.end(), 0);
  auto mark = [this](std::uint32_t id) {
    if (id >= present_.size())
      present_.resize(std::max<std::size_t>(id + 1, present_.size() * 2), 0);
    present_[id] = 1;
  };
  for (std::size_t i = 0; i < step.size; ++i) mark(step.ids[i]);
  if (view.scalars != nullptr) {
    for (const ScalarRecord& r : *view.scalars) mark(r.tensor_id);
  }
  std::vector<std::pair<std::int64_t, const Key*>> ended;  // (episode, key), closed in order
  for (auto& kv : states_) {
    State& s = kv.second;
    if (s.key.worker != view.worker || s.key.mode != view.key.mode ||
        s.seen_step == step_counter_) {
      continue;
    }
    bool judged = s.key.tensor.empty();
    if (!judged) {
      if (s.tensor_id == kNoId) s.tensor_id = FindId(step, s.key.tensor);
      judged = s.tensor_id != kNoId && s.tensor_id < present_.size() && present_[s.tensor_id];
    }
    if (judged) ended.emplace_back(s.episode, &kv.first);
  }
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->rule < b.second->rule;
  });
  for (const auto& [episode, key] : ended) {
    (void)episode;
    auto it = states_.find(*key);
    Close(&it->second, events);
    states_.erase(it);
  }
}

std::uint32_t EpisodeTracker::FindId(const IndexedStep& step, const std::string& name) {
  const StepView& view = *step.view;
  for (std::size_t i = 0; i < step.size; ++i) {
    if (step.infos[i] != nullptr && step.infos[i]->name == name) return step.ids[i];
  }
  if (view.scalars != nullptr && view.catalog != nullptr) {
    for (const ScalarRecord& r : *view.scalars) {
      const TensorInfo* t = view.catalog->Find(r.tensor_id);
      if (t != nullptr && t->name == name) return r.tensor_id;
    }
  }
  return kNoId;
}

void EpisodeTracker::Tick(const std::vector<Finding>& findings, std::vector<EpisodeEvent>* events) {
  if (findings.empty()) return;
  ++step_counter_;
  for (const Finding& f : findings) Add(f, 1, events);
}

void EpisodeTracker::Finish(std::vector<EpisodeEvent>* events) {
  std::vector<State*> open;
  for (auto& kv : states_) {
    if (kv.second.episode >= 0) open.push_back(&kv.second);
  }
  // In opening order, so the events are the same on every run.
  std::sort(open.begin(), open.end(),
            [](const State* a, const State* b) { return a->episode < b->episode; });
  for (State* s : open) Close(s, events);
  states_.clear();
}

}  // namespace tstat::rules
