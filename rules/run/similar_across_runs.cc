// similar_across_runs (smdebug SimilarAcrossRuns): this run diverges from
// another run (a reproducibility check).
//
// other_trials (required): the other run's directory (several, comma-
// separated: each is compared). Selected tensors: collection_names /
// tensor_regex, or every tensor when neither is given. For each selected
// record with a stat set at global step s, the other run's stats of the same
// tensor name at global step s (same worker rank when the other run has it,
// else its lowest rank) are compared:
//  - count, nan_count, pos_inf_count and neg_inf_count must be equal;
//  - min, max, mean, variance, l1, l2 must satisfy |a - b| <= atol + rtol*|b|
//    (b = the other run's value; NaN equals NaN).
// The first difference of each tensor (per other run) fires; that tensor is
// not reported again. Steps or tensors the other run did not save are
// skipped; a live other run is refreshed once when a step is not there yet.
#include <cmath>
#include <set>

#include "rules/engine/param_reader.h"
#include "rules/engine/rule_base.h"
#include "rules/run/run_rules.h"
#include "tstat/trial.h"

namespace tstat::rules::run {
namespace {

class SimilarAcrossRuns final : public RuleBase {
 public:
  SimilarAcrossRuns(const RuleSpec& spec, ParamReader* p, Status* error)
      : RuleBase(SelectAllWhenUnset(spec), {}) {
    paths_ = p->List("other_trials", {});
    if (paths_.empty() && error->ok()) {
      *error = Status::InvalidArgument("rule " + spec.type +
                                       ": parameter other_trials is required (the other run's "
                                       "directory)");
    }
    rtol_ = p->Double("rtol", 1e-5);
    p->CheckRange("rtol", rtol_, 0.0, 1e300);
    atol_ = p->Double("atol", 1e-8);
    p->CheckRange("atol", atol_, 0.0, 1e300);
  }

  Status Init() {
    TSTAT_RETURN_IF_ERROR(RuleBase::Init());
    for (const std::string& path : paths_) {
      Result<std::unique_ptr<Trial>> t = Trial::Open(path);
      if (!t.ok()) {
        return t.status().WithContext("rule " + spec().type + ": parameter other_trials");
      }
      others_.push_back(Other{path, std::move(t).value(), {}, {}, {}, false, -1});
      Load(&others_.back());
    }
    return Status::OK();
  }

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    if (!ModeSelected(step.key.mode) || step.records == nullptr) return;
    for (Other& o : others_) {
      looked_ = true;
      if (!HasStep(&o, step.key.global_step)) continue;  // one lookup per step, not per tensor
      for (const TensorStatsRecord& r : *step.records) {
        if (!r.has_stats || !Selected(step, r.tensor_id)) continue;
        const TensorInfo* t = Info(step, r.tensor_id);
        if (t != nullptr) Compare(step, *t, r.stats, &o, findings);
      }
    }
  }

  std::string Diagnostics() const override {
    std::string d = RuleBase::Diagnostics();
    if (!d.empty() || compared_ > 0 || !looked_) return d;
    return "rule " + spec().name +
           ": no selected tensor of this run was saved at the same step "
           "in " +
           paths_.front() + ", so similar_across_runs compared nothing";
  }

 private:
  struct Other {
    std::string path;
    std::unique_ptr<Trial> trial;
    std::set<std::string> reported;
    std::set<int> ranks;             // the other run's workers
    std::set<std::int64_t> steps;    // its saved global steps
    bool closed = false;             // every step it will ever have is loaded
    std::int64_t refreshed_at = -1;  // the step at which it was last refreshed
  };

  // Whether the other run saved global step `s`; a live other run that has
  // not got there yet is refreshed once for this step.
  static bool HasStep(Other* o, std::int64_t s) {
    if (o->steps.count(s)) return true;
    if (o->closed || o->refreshed_at == s) return false;
    o->refreshed_at = s;
    (void)o->trial->Refresh();  // damaged files are skipped; what is readable is compared
    Load(o);
    return o->steps.count(s) != 0;
  }

  void Compare(const StepView& step, const TensorInfo& t, const TensorStats& a, Other* o,
               std::vector<Finding>* findings) {
    if (o->reported.count(t.name)) return;
    const int worker = o->ranks.count(step.worker) ? step.worker : -1;
    Result<TensorStats> b = o->trial->stats(t.name, step.key.global_step, Mode::kGlobal, worker);
    if (!b.ok()) return;
    ++compared_;
    const TensorStats& other = b.value();
    std::string field;
    double va = 0.0, vb = 0.0;
    const std::pair<const char*, std::pair<double, double>> counts[] = {
        {"count", {double(a.count), double(other.count)}},
        {"nan_count", {double(a.nan_count), double(other.nan_count)}},
        {"pos_inf_count", {double(a.pos_inf_count), double(other.pos_inf_count)}},
        {"neg_inf_count", {double(a.neg_inf_count), double(other.neg_inf_count)}},
    };
    for (const auto& c : counts) {
      if (c.second.first != c.second.second) {
        field = c.first, va = c.second.first, vb = c.second.second;
        break;
      }
    }
    if (field.empty()) {
      const std::pair<const char*, std::pair<double, double>> floats[] = {
          {"min", {a.min, other.min}},    {"max", {a.max, other.max}},
          {"mean", {a.mean, other.mean}}, {"variance", {a.variance(), other.variance()}},
          {"l1", {a.l1, other.l1}},       {"l2", {a.l2, other.l2}},
      };
      for (const auto& f : floats) {
        if (!Close(f.second.first, f.second.second)) {
          field = f.first, va = f.second.first, vb = f.second.second;
          break;
        }
      }
    }
    if (field.empty()) return;
    o->reported.insert(t.name);
    findings->push_back(MakeFinding(
        step, t.name,
        "'" + t.name + "' differs from " + o->path + " at step " +
            std::to_string(step.key.global_step) + " (" + StepText(step.key) + "): " + field + " " +
            Num(va) + " vs " + Num(vb) + " (rtol " + Num(rtol_) + ", atol " + Num(atol_) + ")",
        {{field, va}, {"other_" + field, vb}, {"rtol", rtol_}, {"atol", atol_}}));
  }

  bool Close(double a, double b) const {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= atol_ + rtol_ * std::fabs(b);
  }

  static void Load(Other* o) {
    for (const WorkerSummary& w : o->trial->workers()) o->ranks.insert(w.rank);
    for (const StepKey& k : o->trial->steps(Mode::kGlobal)) o->steps.insert(k.global_step);
    o->closed = o->trial->loaded_all_steps();
  }

  std::vector<std::string> paths_;
  double rtol_ = 1e-5;
  double atol_ = 1e-8;
  std::vector<Other> others_;
  std::uint64_t compared_ = 0;
  bool looked_ = false;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeSimilarAcrossRuns(const RuleSpec& spec) {
  return BuildRule<SimilarAcrossRuns>(spec);
}

}  // namespace tstat::rules::run
