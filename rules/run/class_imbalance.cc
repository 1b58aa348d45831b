// class_imbalance (smdebug ClassImbalance).
//
// Labels tensors: selected records that carry label counts (StatsOptions::
// label_classes) - in the spec's collection_names / tensor_regex (default
// collection "labels"), or with a name matching labels_regex (RE2 partial
// match, default ".*labels"). Only TRAIN and GLOBAL steps unless modes are
// given: the training labels are the ones that shape the model (a balanced
// validation set must not dilute them). Per tensor NAME, counts are
// accumulated over those steps of every worker. Labels outside the counted
// classes (negative ones, or past the classes) are counted and reported in
// Diagnostics(), as are labels seen only in modes it does not judge. At each
// step that adds counts, once the total reaches `samples`, it fires while:
//  - imbalance: among the classes seen so far (count > 0; at least two),
//    max count / min count > threshold_imbalance;
//  - misprediction: if the tensor also carries a confusion matrix
//    (StatsOptions::confusion), accumulated the same way and with at least
//    `samples` entries: some class i seen as a label has
//    1 - C[i][i] / sum_j C[i][j] > threshold_misprediction.
// Needs: label counts of the labels tensors at every training step (an
// in-process session infers the classes: rules/engine/capture_needs.h).
// `argmax` and `predictions_regex` are accepted for smdebug
// compatibility: tstat applies argmax when it captures the confusion matrix
// (ConfusionOptions::argmax), and the predictions are part of that matrix.
#include <algorithm>
#include <map>

#include "rules/engine/rule_base.h"
#include "rules/run/labels_finder.h"
#include "rules/run/loss_source.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class ClassImbalance final : public RuleBase {
 public:
  ClassImbalance(const RuleSpec& spec, ParamReader* p, Status*) : RuleBase(spec, {"labels"}) {
    threshold_imbalance_ = p->Double("threshold_imbalance", 10.0);
    p->CheckRange("threshold_imbalance", threshold_imbalance_, 0.0, 1e300);
    threshold_misprediction_ = p->Double("threshold_misprediction", 0.7);
    p->CheckRange("threshold_misprediction", threshold_misprediction_, 0.0, 1.0);
    samples_ = p->Int("samples", 500);
    p->CheckRange("samples", static_cast<double>(samples_), 0, 1e18);
    p->Bool("argmax", false);
    labels_regex_text_ = p->String("labels_regex", ".*labels");
    p->String("predictions_regex", ".*predictions");
  }

  Status Init() {
    TSTAT_RETURN_IF_ERROR(RuleBase::Init());
    return labels_finder_.Init(spec().type, "labels_regex", labels_regex_text_);
  }

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    EvaluateViaIndex(step, findings);
  }

  CaptureNeeds Needs(const TensorInfo& t) const override {
    if (t.kind != TensorKind::kTensor || !IsIntegerDType(t.dtype)) return {};
    if (!Takes(t) && !labels_finder_.Matches(t.name)) return {};
    CaptureNeeds n;
    n.stats = true;
    n.label_counts = true;
    n.modes = JudgedModes(CaptureNeeds::TrainModes());
    return n;
  }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    const bool judged =
        spec().modes.empty() ? IsTrainingMode(step.key.mode) : ModeSelected(step.key.mode);
    if (step.records == nullptr) return;
    if (!judged) {
      // Remembered for Diagnostics(): labels exist, in a mode not judged.
      if (!saw_labels_ && unjudged_mode_.empty() &&
          !labels_finder_.Records(indexed, [&](std::uint32_t id) { return Selected(step, id); })
               .empty()) {
        unjudged_mode_ = ModeName(step.key.mode);
      }
      return;
    }
    saw_step_ = true;
    const std::vector<std::uint32_t>& labels = labels_finder_.Records(
        indexed, [&](std::uint32_t tensor_id) { return Selected(step, tensor_id); });
    for (std::uint32_t k : labels) {
      const TensorStatsRecord& r = (*step.records)[k];
      if (!r.label_counts && !r.confusion) continue;
      const TensorInfo* t = indexed.infos[k];
      saw_labels_ = true;
      Acc& acc = acc_[t->name];
      if (r.label_counts) {
        out_of_range_ += r.label_counts->out_of_range;
        const auto& c = r.label_counts->counts;
        if (acc.counts.size() < c.size()) acc.counts.resize(c.size(), 0);
        for (std::size_t i = 0; i < c.size(); ++i) acc.counts[i] += c[i];
        for (auto v : c) acc.total += v;
        CheckImbalance(step, t->name, &acc, findings);
      }
      if (r.confusion && r.confusion->classes > 0) {
        AddConfusion(*r.confusion, &acc);
        CheckMisprediction(step, t->name, &acc, findings);
      }
    }
  }

  std::string Diagnostics() const override {
    if (saw_labels_ && out_of_range_ > 0) {
      return "rule " + spec().name + ": " + std::to_string(out_of_range_) +
             " label(s) were outside the counted classes (negative, e.g. an ignore index, or "
             "past stats.label_classes) and are not part of the counts";
    }
    if (saw_labels_) return {};
    if (!unjudged_mode_.empty()) {
      return "rule " + spec().name + ": labels were saved in " + unjudged_mode_ +
             " steps only, and class_imbalance judges " +
             (spec().modes.empty() ? std::string("TRAIN (and GLOBAL) steps")
                                   : "the modes it was given") +
             ": the training labels shape the model; set \"modes\" to judge others";
    }
    if (!saw_step_) return {};
    std::string where = "labels_regex \"" + labels_regex_text_ + "\"";
    for (const std::string& c : spec().collection_names) where += ", collection " + c;
    if (spec().collection_names.empty() && spec().tensor_regex.empty())
      where += ", collection labels";
    if (!spec().tensor_regex.empty()) where += ", tensor_regex \"" + spec().tensor_regex + "\"";
    return "rule " + spec().name + ": no labels tensor with label counts found (" + where +
           "), so class_imbalance checked nothing; capture the labels with stats.label_classes";
  }

 private:
  LabelsFinder labels_finder_;
  struct Acc {
    std::vector<std::uint64_t> counts;
    std::uint64_t total = 0;
    int classes = 0;
    std::vector<std::uint64_t> confusion;  // classes x classes
    std::uint64_t confusion_total = 0;
  };

  static void AddConfusion(const ConfusionMatrix& m, Acc* acc) {
    if (m.classes > acc->classes) {  // grow, keeping what was accumulated
      std::vector<std::uint64_t> grown(static_cast<std::size_t>(m.classes) * m.classes, 0);
      for (int i = 0; i < acc->classes; ++i) {
        for (int j = 0; j < acc->classes; ++j) {
          grown[static_cast<std::size_t>(i) * m.classes + j] =
              acc->confusion[static_cast<std::size_t>(i) * acc->classes + j];
        }
      }
      acc->confusion.swap(grown);
      acc->classes = m.classes;
    }
    for (int i = 0; i < m.classes; ++i) {
      for (int j = 0; j < m.classes; ++j) {
        const std::uint64_t v = m.counts[static_cast<std::size_t>(i) * m.classes + j];
        acc->confusion[static_cast<std::size_t>(i) * acc->classes + j] += v;
        acc->confusion_total += v;
      }
    }
  }

  void CheckImbalance(const StepView& step, const std::string& name, Acc* acc,
                      std::vector<Finding>* findings) {
    if (acc->total < static_cast<std::uint64_t>(samples_)) return;
    std::uint64_t mx = 0, mn = 0;
    std::size_t imx = 0, imn = 0, present = 0;
    for (std::size_t i = 0; i < acc->counts.size(); ++i) {
      const std::uint64_t c = acc->counts[i];
      if (c == 0) continue;
      if (present == 0 || c > mx) mx = c, imx = i;
      if (present == 0 || c < mn) mn = c, imn = i;
      ++present;
    }
    const double ratio = present >= 2 ? static_cast<double>(mx) / static_cast<double>(mn) : 1.0;
    if (!(ratio > threshold_imbalance_)) return;
    findings->push_back(MakeFinding(
        step, name,
        "class imbalance in '" + name + "': class " + std::to_string(imx) + " has " +
            std::to_string(mx) + " samples, class " + std::to_string(imn) + " only " +
            std::to_string(mn) + " (ratio " + Num(ratio) + " > threshold_imbalance " +
            Num(threshold_imbalance_) + ", " + std::to_string(acc->total) + " samples so far)",
        {{"ratio", ratio},
         {"threshold_imbalance", threshold_imbalance_},
         {"max_class", static_cast<double>(imx)},
         {"max_count", static_cast<double>(mx)},
         {"min_class", static_cast<double>(imn)},
         {"min_count", static_cast<double>(mn)},
         {"samples", static_cast<double>(acc->total)}}));
  }

  void CheckMisprediction(const StepView& step, const std::string& name, Acc* acc,
                          std::vector<Finding>* findings) {
    if (acc->confusion_total < static_cast<std::uint64_t>(samples_)) return;
    double worst = -1.0;
    int worst_class = -1;
    for (int i = 0; i < acc->classes; ++i) {
      std::uint64_t row = 0;
      for (int j = 0; j < acc->classes; ++j) {
        row += acc->confusion[static_cast<std::size_t>(i) * acc->classes + j];
      }
      if (row == 0) continue;
      const double wrong =
          1.0 -
          static_cast<double>(acc->confusion[static_cast<std::size_t>(i) * acc->classes + i]) /
              static_cast<double>(row);
      if (wrong > worst) worst = wrong, worst_class = i;
    }
    if (!(worst > threshold_misprediction_)) return;
    findings->push_back(MakeFinding(step, name,
                                    "class " + std::to_string(worst_class) + " of '" + name +
                                        "' is mispredicted " + Num(worst * 100.0) +
                                        "% of the time (threshold_misprediction " +
                                        Num(threshold_misprediction_) + ", " +
                                        std::to_string(acc->confusion_total) + " samples so far)",
                                    {{"mispredicted_fraction", worst},
                                     {"class", static_cast<double>(worst_class)},
                                     {"threshold_misprediction", threshold_misprediction_},
                                     {"samples", static_cast<double>(acc->confusion_total)}}));
  }

  double threshold_imbalance_ = 10.0;
  double threshold_misprediction_ = 0.7;
  std::int64_t samples_ = 500;
  std::string labels_regex_text_;
  bool saw_step_ = false;
  bool saw_labels_ = false;
  std::uint64_t out_of_range_ = 0;
  std::string unjudged_mode_;  // a mode not judged whose steps had labels
  std::map<std::string, Acc> acc_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeClassImbalance(const RuleSpec& spec) {
  return BuildRule<ClassImbalance>(spec);
}

}  // namespace tstat::rules::run
