// A small, safe expression language over a tensor's statistics, for rules
// written in the config ("when": "l2 > 1e3 || nan_count > 0").
//
// Grammar (precedence low to high):
//   expr := or ; or := and ('||' and)* ; and := not ('&&' not)*
//   not  := '!' not | cmp ; cmp := sum (('<'|'<='|'>'|'>='|'=='|'!=') sum)?
//   sum  := prod (('+'|'-') prod)* ; prod := unary (('*'|'/') unary)*
//   unary := '-' unary | primary
//   primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
// Names are the statistics of tstat::StatField (count, nan_count, l2, mean,
// ...) plus fractions (zero_fraction, nan_fraction, inf_fraction,
// neg_fraction, small_fraction, band_lo_fraction, band_hi_fraction,
// nonfinite_count) and the step numbers (step, mode_step). Functions: abs,
// sqrt, log10, log2, min, max. Booleans are 1 and 0. Parsing builds a tree;
// nothing is ever executed but these operators: no eval, no code.
// Thread safety: a parsed Expression is immutable and may be shared.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tstat/stats.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::rules {

struct ExpressionInput {
  const TensorStats* stats = nullptr;
  StepKey step;
};

class Expression {
 public:
  static constexpr std::size_t kMaxExpressionChars = 16384;
  // kInvalidArgument with "column N: <what>" and the text around it with a
  // caret under the offending character; also for a text longer than
  // kMaxExpressionChars or more than 256 operators chained or nested (so
  // that evaluating any accepted expression has a bounded depth).
  static Result<std::shared_ptr<const Expression>> Parse(const std::string& text);
  virtual ~Expression() = default;
  virtual double Evaluate(const ExpressionInput& in) const = 0;
  virtual const std::string& text() const = 0;
};

}  // namespace tstat::rules
