// Parameters differ from smdebug's defaults only where a comment says why.
// The same config judges the healthy run, which must stay clean, so none of
// these is tuned past what a healthy run of this model does.
#include "tools/demo/demo_rules.h"

namespace tstat::demo {

// - gradient_growth: exploding_tensor's growth check on gradients, comparing
//   each step with the step before (growth_window 1): a gradient norm growing
//   10x in one full-batch step is divergence, and it is seen one step after the
//   bad update instead of ten.
// - saturated_activation: only tanh inputs (band_counts: the capture counts
//   values outside tanh's (-9.4999, 9.4999) exactly, see trainer.cc); a unit
//   is saturated when < 5% (smdebug: 1%) of its inputs are in the live range.
// - loss_not_decreasing: TRAIN losses only (EVAL losses are overfit's), and
//   checked every 5 steps instead of 10: full-batch training has no
//   mini-batch noise, so a loss that did not fall in 5 steps is stuck.
// Measured on the healthy run (300 steps): the largest step-to-step growth of
// a gradient norm is 1.04x, and its last validation loss (0.129) equals its
// training loss (0.130). overfit: smdebug's ratio_threshold (0.1), but
//   patience 3 (smdebug: 1): three evaluations in a row, so the finding rests
//   on a trend rather than on the first evaluation after 10 steps.
std::string DemoRulesJson() {
  return R"json({"rules": [
  {"type": "nan_origin", "actions": {"stop_training": true, "print": false}},
  {"type": "exploding_tensor", "actions": {"stop_training": true, "print": false}},
  {"name": "gradient_growth", "type": "exploding_tensor", "collection_names": "gradients",
   "parameters": {"growth_factor": "10", "growth_window": "1"},
   "actions": {"stop_training": true, "print": false}},
  {"type": "vanishing_gradient", "actions": {"stop_training": true, "print": false}},
  {"type": "dead_relu", "actions": {"stop_training": true, "print": false}},
  {"type": "saturated_activation", "tensor_regex": ".*tanh_input",
   "parameters": {"band_counts": "true", "threshold_inactivity": "5"},
   "actions": {"stop_training": true, "print": false}},
  {"type": "poor_weight_initialization", "actions": {"stop_training": true, "print": false}},
  {"type": "loss_not_decreasing", "modes": ["TRAIN"], "parameters": {"num_steps": "5"},
   "actions": {"stop_training": true, "print": false}},
  {"type": "overfit", "parameters": {"patience": "3"}, "actions": {"stop_training": true, "print": false}},
  {"type": "class_imbalance", "actions": {"stop_training": true, "print": false}}
]})json";
}

}  // namespace tstat::demo
