#include "rules/engine/expression.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tstat::rules {
namespace {

TensorStats MakeStats() {
  TensorStats s;
  s.count = 100;
  s.finite_count = 98;
  s.nan_count = 2;
  s.zero_count = 25;
  s.mean = 0.5;
  s.m2 = 98.0 * 4.0;  // variance 4
  s.l2 = 1500.0;
  s.min = -3;
  s.max = 7;
  return s;
}

double Eval(const std::string& text, const TensorStats& s, std::int64_t step = 10) {
  auto e = Expression::Parse(text);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return NAN;
  ExpressionInput in;
  in.stats = &s;
  in.step.global_step = step;
  return (*e)->Evaluate(in);
}

TEST(ExpressionTest, ArithmeticAndPrecedence) {
  const TensorStats s = MakeStats();
  EXPECT_DOUBLE_EQ(Eval("1 + 2 * 3", s), 7.0);
  EXPECT_DOUBLE_EQ(Eval("(1 + 2) * 3", s), 9.0);
  EXPECT_DOUBLE_EQ(Eval("-2 - -3", s), 1.0);
  EXPECT_DOUBLE_EQ(Eval("10 / 4", s), 2.5);
  EXPECT_DOUBLE_EQ(Eval("max(min(3, 9), 2) + abs(-1.5)", s), 4.5);
  EXPECT_DOUBLE_EQ(Eval("sqrt(16) + log10(1000) + log2(8)", s), 10.0);
  EXPECT_DOUBLE_EQ(Eval("2e3 / 1e3", s), 2.0);
}

TEST(ExpressionTest, ReadsStatisticsAndDerivedFractions) {
  const TensorStats s = MakeStats();
  EXPECT_DOUBLE_EQ(Eval("l2", s), 1500.0);
  EXPECT_DOUBLE_EQ(Eval("variance", s), 4.0);
  EXPECT_DOUBLE_EQ(Eval("std", s), 2.0);
  EXPECT_DOUBLE_EQ(Eval("zero_fraction", s), 0.25);
  EXPECT_DOUBLE_EQ(Eval("nan_fraction", s), 0.02);
  EXPECT_DOUBLE_EQ(Eval("nonfinite_count", s), 2.0);
  EXPECT_DOUBLE_EQ(Eval("step", s, 42), 42.0);
  EXPECT_DOUBLE_EQ(Eval("max - min", s), 10.0);
}

TEST(ExpressionTest, ComparisonsAndLogic) {
  const TensorStats s = MakeStats();
  EXPECT_EQ(Eval("l2 > 1e3 || nan_count > 0", s), 1.0);
  EXPECT_EQ(Eval("l2 > 1e4 || nan_count > 5", s), 0.0);
  EXPECT_EQ(Eval("l2 > 1e3 && nan_count > 5", s), 0.0);
  EXPECT_EQ(Eval("!(l2 > 1e3)", s), 0.0);
  EXPECT_EQ(Eval("mean <= 0.5", s), 1.0);
  EXPECT_EQ(Eval("mean < 0.5", s), 0.0);
  EXPECT_EQ(Eval("mean >= 0.5 && mean != 0.4 && mean == 0.5", s), 1.0);
  // && binds tighter than ||.
  EXPECT_EQ(Eval("1 || 0 && 0", s), 1.0);
}

struct BadCase {
  const char* text;
  int column;
  const char* fragment;
};

TEST(ExpressionTest, SyntaxErrorsPointAtTheOffendingCharacter) {
  const BadCase cases[] = {
      {"l2 > (1e3", 10, "expected ')'"},
      {"l2 >> 3", 5, "unexpected '>'"},
      {"norm > 3", 1, "unknown name 'norm'"},
      {"exp(l2) > 3", 1, "unknown function 'exp'"},
      {"max(l2) > 3", 7, "expected ','"},
      {"", 1, "expected a number"},
      {"l2 > 3 )", 8, "unexpected ')'"},
      {"l2 # 3", 4, "unexpected '#'"},
      {"__import__('os')", 1, "unknown function '__import__'"},
  };
  for (const BadCase& c : cases) {
    auto e = Expression::Parse(c.text);
    ASSERT_FALSE(e.ok()) << c.text;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("column " + std::to_string(c.column) + ":"),
              std::string::npos)
        << c.text << " -> " << e.status().message();
    EXPECT_NE(e.status().message().find(c.fragment), std::string::npos)
        << c.text << " -> " << e.status().message();
  }
}

TEST(ExpressionTest, DeepNestingIsAnErrorNotACrash) {
  std::string text(5000, '(');
  text += "1";
  text += std::string(5000, ')');
  auto e = Expression::Parse(text);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nested too deeply"), std::string::npos);
}

// A flat chain nests the tree as deeply as parentheses: every operator, long
// chains of it are an error (not a stack overflow while evaluating or freeing
// the tree), and a chain within the bound evaluates exactly.
TEST(ExpressionTest, LongFlatChainsAreAnErrorNotACrash) {
  for (const std::string op : {" + ", " * ", " && ", " || ", " - ", " / "}) {
    std::string text = "l2";
    for (int i = 0; i < 200000 / 8; ++i) text += op + "l2";
    auto e = Expression::Parse(text.substr(0, Expression::kMaxExpressionChars));
    ASSERT_FALSE(e.ok()) << op;
    EXPECT_NE(e.status().message().find("operators chained or nested"), std::string::npos)
        << e.status().message().substr(0, 300);
    // The message quotes the text around the error, not all of it.
    EXPECT_LT(e.status().message().size(), 400u) << op;
  }
  std::string ok = "1";
  for (int i = 0; i < 255; ++i) ok += " + 1";
  EXPECT_EQ(Eval(ok, MakeStats()), 256.0);
  std::string unary(30, '-');
  EXPECT_EQ(Eval(unary + "1", MakeStats()), 1.0);
}

TEST(ExpressionTest, AHugeTextIsRefusedUnread) {
  const std::string text(std::size_t{10} << 20, '1');
  auto e = Expression::Parse(text);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("10485760 characters long"), std::string::npos)
      << e.status().message().substr(0, 200);
  EXPECT_LT(e.status().message().size(), 200u);
}

}  // namespace
}  // namespace tstat::rules
