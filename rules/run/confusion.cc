// confusion (smdebug Confusion): the confusion matrix is far from diagonal.
//
// Labels tensors: selected records that carry a confusion matrix
// (StatsOptions::confusion; row = label, column = prediction) - in the spec's
// collection_names / tensor_regex (default: collection `labels_collection`,
// "labels"), or with a name matching `labels` (RE2 partial match, default
// "labels"). Per tensor NAME the matrices are summed over every worker and
// over every saved step, or over the last `window` saved steps when window > 0
// (tstat's addition: early, untrained steps stop counting). With K =
// category_no (default: the matrix's classes) and column sums
// S_i = sum_j C[j][i] over the first K classes, at each step that adds a
// matrix, for every column with S_i > 0:
//   C[i][i] / S_i < min_diag      or     C[j][i] / S_i > max_off_diag (j != i)
// is a violation (smdebug's per-column normalisation). The rule fires once
// per tensor when a violation appears, and again only after a step without.
// `predictions` and `predictions_collection` are accepted for smdebug
// compatibility: the predictions are already inside the matrix.
#include <deque>
#include <map>

#include "rules/engine/rule_base.h"
#include "rules/run/labels_finder.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class Confusion final : public RuleBase {
 public:
  Confusion(const RuleSpec& spec, ParamReader* p, Status*)
      : RuleBase(spec, {p->String("labels_collection", "labels")}) {
    category_no_ = p->Int("category_no", 0);
    p->CheckRange("category_no", static_cast<double>(category_no_), 0, 1e6);
    labels_text_ = p->String("labels", "labels");
    p->String("predictions", "predictions");
    p->String("predictions_collection", "predictions");
    min_diag_ = p->Double("min_diag", 0.9);
    p->CheckRange("min_diag", min_diag_, 0.0, 1.0);
    max_off_diag_ = p->Double("max_off_diag", 0.1);
    p->CheckRange("max_off_diag", max_off_diag_, 0.0, 1.0);
    window_ = p->Int("window", 0);
    p->CheckRange("window", static_cast<double>(window_), 0, 1e9);
  }

  Status Init() {
    TSTAT_RETURN_IF_ERROR(RuleBase::Init());
    return labels_finder_.Init(spec().type, "labels", labels_text_);
  }

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    EvaluateViaIndex(step, findings);
  }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    if (!ModeSelected(step.key.mode) || step.records == nullptr) return;
    saw_step_ = true;
    const std::vector<std::uint32_t>& labels = labels_finder_.Records(
        indexed, [&](std::uint32_t tensor_id) { return Selected(step, tensor_id); });
    for (std::uint32_t i : labels) {
      const TensorStatsRecord& r = (*step.records)[i];
      if (!r.confusion || r.confusion->classes <= 0) continue;
      const TensorInfo* t = indexed.infos[i];
      saw_matrix_ = true;
      Acc& acc = acc_[t->name];
      Add(step.key.global_step, *r.confusion, &acc);
      Check(step, t->name, &acc, findings);
    }
  }

  std::string Diagnostics() const override {
    if (!saw_step_ || saw_matrix_) return {};
    return "rule " + spec().name + ": no tensor with a confusion matrix found (labels \"" +
           labels_text_ +
           "\" or the selected collections), so confusion checked nothing; "
           "capture the labels with stats.label_classes and confusion predictions";
  }

 private:
  LabelsFinder labels_finder_;
  struct Acc {
    int classes = 0;
    std::vector<std::uint64_t> sum;                              // classes x classes
    std::deque<std::pair<std::int64_t, ConfusionMatrix>> steps;  // window > 0 only
    bool fired = false;
  };

  static void AddInto(const ConfusionMatrix& m, std::int64_t sign, Acc* acc) {
    for (int i = 0; i < m.classes && i < acc->classes; ++i) {
      for (int j = 0; j < m.classes && j < acc->classes; ++j) {
        std::uint64_t& cell = acc->sum[static_cast<std::size_t>(i) * acc->classes + j];
        const std::uint64_t v = m.counts[static_cast<std::size_t>(i) * m.classes + j];
        cell = sign > 0 ? cell + v : cell - v;
      }
    }
  }

  void Add(std::int64_t global_step, const ConfusionMatrix& m, Acc* acc) {
    if (m.classes > acc->classes) {
      std::vector<std::uint64_t> grown(static_cast<std::size_t>(m.classes) * m.classes, 0);
      for (int i = 0; i < acc->classes; ++i) {
        for (int j = 0; j < acc->classes; ++j) {
          grown[static_cast<std::size_t>(i) * m.classes + j] =
              acc->sum[static_cast<std::size_t>(i) * acc->classes + j];
        }
      }
      acc->sum.swap(grown);
      acc->classes = m.classes;
    }
    AddInto(m, +1, acc);
    if (window_ <= 0) return;
    if (!acc->steps.empty() && acc->steps.back().first == global_step) {
      ConfusionMatrix& last = acc->steps.back().second;  // another worker, same step
      if (last.classes == m.classes) {
        for (std::size_t k = 0; k < m.counts.size(); ++k) last.counts[k] += m.counts[k];
      } else {
        acc->steps.emplace_back(global_step, m);
      }
    } else {
      acc->steps.emplace_back(global_step, m);
    }
    std::size_t distinct = 0;  // saved steps in the deque
    for (std::size_t k = 0; k < acc->steps.size(); ++k) {
      if (k == 0 || acc->steps[k].first != acc->steps[k - 1].first) ++distinct;
    }
    while (static_cast<std::int64_t>(distinct) > window_) {
      const std::int64_t oldest = acc->steps.front().first;
      while (!acc->steps.empty() && acc->steps.front().first == oldest) {
        AddInto(acc->steps.front().second, -1, acc);
        acc->steps.pop_front();
      }
      --distinct;
    }
  }

  void Check(const StepView& step, const std::string& name, Acc* acc,
             std::vector<Finding>* findings) {
    const int k = category_no_ > 0 && category_no_ < acc->classes ? static_cast<int>(category_no_)
                                                                  : acc->classes;
    double worst_diag = 2.0, worst_off = -1.0;
    int diag_col = -1, off_row = -1, off_col = -1;
    for (int i = 0; i < k; ++i) {
      std::uint64_t col = 0;
      for (int j = 0; j < k; ++j) col += acc->sum[static_cast<std::size_t>(j) * acc->classes + i];
      if (col == 0) continue;
      for (int j = 0; j < k; ++j) {
        const double f =
            static_cast<double>(acc->sum[static_cast<std::size_t>(j) * acc->classes + i]) /
            static_cast<double>(col);
        if (j == i && f < worst_diag) worst_diag = f, diag_col = i;
        if (j != i && f > worst_off) worst_off = f, off_row = j, off_col = i;
      }
    }
    const bool diag_bad = diag_col >= 0 && worst_diag < min_diag_;
    const bool off_bad = off_col >= 0 && worst_off > max_off_diag_;
    if (!diag_bad && !off_bad) {
      acc->fired = false;
      return;
    }
    if (acc->fired) return;
    acc->fired = true;
    std::string what;
    if (diag_bad) {
      what = "only " + Num(worst_diag * 100.0) + "% of the predictions of class " +
             std::to_string(diag_col) + " are right (min_diag " + Num(min_diag_) + ")";
    }
    if (off_bad) {
      what += (what.empty() ? "" : "; ") + Num(worst_off * 100.0) +
              "% of the predictions of class " + std::to_string(off_col) + " have label " +
              std::to_string(off_row) + " (max_off_diag " + Num(max_off_diag_) + ")";
    }
    findings->push_back(
        MakeFinding(step, name, "confusion matrix of '" + name + "': " + what,
                    {{"min_diag_value", diag_col >= 0 ? worst_diag : 1.0},
                     {"min_diag", min_diag_},
                     {"max_off_diag_value", off_col >= 0 ? worst_off : 0.0},
                     {"max_off_diag", max_off_diag_},
                     {"column", static_cast<double>(diag_bad ? diag_col : off_col)}}));
  }

  std::int64_t category_no_ = 0;
  std::string labels_text_;
  double min_diag_ = 0.9;
  double max_off_diag_ = 0.1;
  std::int64_t window_ = 0;
  bool saw_step_ = false;
  bool saw_matrix_ = false;
  std::map<std::string, Acc> acc_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeConfusion(const RuleSpec& spec) {
  return BuildRule<Confusion>(spec);
}

}  // namespace tstat::rules::run
