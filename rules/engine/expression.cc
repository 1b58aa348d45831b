// Recursive-descent parser and tree evaluator for rules/engine/expression.h.
#include "rules/engine/expression.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "tstat/trial.h"

namespace tstat::rules {
namespace {

// ----------------------------------------------------------------------------
// Variables.
double Fraction(std::uint64_t part, std::uint64_t count) {
  return count ? static_cast<double>(part) / static_cast<double>(count) : 0.0;
}

enum class Var {
  kStat,
  kZeroFraction,
  kNanFraction,
  kInfFraction,
  kNegFraction,
  kSmallFraction,
  kBandLoFraction,
  kBandHiFraction,
  kNonfiniteCount,
  kStep,
  kModeStep,
};

struct VarRef {
  Var var;
  StatField field;
};

bool LookupVar(const std::string& name, VarRef* out) {
  static const std::pair<const char*, Var> kDerived[] = {
      {"zero_fraction", Var::kZeroFraction},
      {"nan_fraction", Var::kNanFraction},
      {"inf_fraction", Var::kInfFraction},
      {"neg_fraction", Var::kNegFraction},
      {"small_fraction", Var::kSmallFraction},
      {"band_lo_fraction", Var::kBandLoFraction},
      {"band_hi_fraction", Var::kBandHiFraction},
      {"nonfinite_count", Var::kNonfiniteCount},
      {"step", Var::kStep},
      {"mode_step", Var::kModeStep},
  };
  for (const auto& d : kDerived) {
    if (name == d.first) {
      *out = {d.second, StatField::kCount};
      return true;
    }
  }
  StatField f;
  if (ParseStatField(name, &f)) {
    *out = {Var::kStat, f};
    return true;
  }
  return false;
}

double ReadVar(const VarRef& v, const ExpressionInput& in) {
  const TensorStats& s = *in.stats;
  switch (v.var) {
    case Var::kStat:
      return StatValue(s, v.field);
    case Var::kZeroFraction:
      return Fraction(s.zero_count, s.count);
    case Var::kNanFraction:
      return Fraction(s.nan_count, s.count);
    case Var::kInfFraction:
      return Fraction(s.inf_count(), s.count);
    case Var::kNegFraction:
      return Fraction(s.neg_count, s.count);
    case Var::kSmallFraction:
      return Fraction(s.small_count, s.count);
    case Var::kBandLoFraction:
      return Fraction(s.band_lo_count, s.count);
    case Var::kBandHiFraction:
      return Fraction(s.band_hi_count, s.count);
    case Var::kNonfiniteCount:
      return static_cast<double>(s.nan_count + s.inf_count());
    case Var::kStep:
      return static_cast<double>(in.step.global_step);
    case Var::kModeStep:
      return static_cast<double>(in.step.mode_step);
  }
  return 0.0;
}

// ----------------------------------------------------------------------------
// Tree.
// Operators and functions, decoded from their text once at parse time (no
// string comparison per evaluation).
enum class Op {
  kOr,
  kAnd,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kAbs,
  kSqrt,
  kLog10,
  kLog2,
  kMin,
  kMax,
};

Op OpOf(const std::string& op) {
  static const std::pair<const char*, Op> kOps[] = {
      {"||", Op::kOr},   {"&&", Op::kAnd},    {"+", Op::kAdd},       {"-", Op::kSub},
      {"*", Op::kMul},   {"/", Op::kDiv},     {"<", Op::kLt},        {"<=", Op::kLe},
      {">", Op::kGt},    {">=", Op::kGe},     {"==", Op::kEq},       {"!=", Op::kNe},
      {"abs", Op::kAbs}, {"sqrt", Op::kSqrt}, {"log10", Op::kLog10}, {"log2", Op::kLog2},
      {"min", Op::kMin}, {"max", Op::kMax},
  };
  for (const auto& o : kOps) {
    if (op == o.first) return o.second;
  }
  return Op::kMax;  // the parser makes no other text
}

struct Node {
  enum Kind { kNum, kVar, kNeg, kNot, kBin, kCall } kind;
  double num = 0.0;
  VarRef var{};
  Op op = Op::kAdd;  // for kBin / kCall
  int height = 1;    // levels of the subtree rooted here
  std::vector<std::unique_ptr<Node>> kids;
};

double Eval(const Node& n, const ExpressionInput& in) {
  switch (n.kind) {
    case Node::kNum:
      return n.num;
    case Node::kVar:
      return ReadVar(n.var, in);
    case Node::kNeg:
      return -Eval(*n.kids[0], in);
    case Node::kNot:
      return Eval(*n.kids[0], in) != 0.0 ? 0.0 : 1.0;
    case Node::kCall: {
      const double a = Eval(*n.kids[0], in);
      switch (n.op) {
        case Op::kAbs:
          return std::fabs(a);
        case Op::kSqrt:
          return std::sqrt(a);
        case Op::kLog10:
          return std::log10(a);
        case Op::kLog2:
          return std::log2(a);
        default:
          break;
      }
      const double b = Eval(*n.kids[1], in);
      if (n.op == Op::kMin) return std::fmin(a, b);
      return std::fmax(a, b);  // max
    }
    case Node::kBin: {
      if (n.op == Op::kOr) {
        return (Eval(*n.kids[0], in) != 0.0 || Eval(*n.kids[1], in) != 0.0) ? 1.0 : 0.0;
      }
      if (n.op == Op::kAnd) {
        return (Eval(*n.kids[0], in) != 0.0 && Eval(*n.kids[1], in) != 0.0) ? 1.0 : 0.0;
      }
      const double a = Eval(*n.kids[0], in), b = Eval(*n.kids[1], in);
      switch (n.op) {
        case Op::kAdd:
          return a + b;
        case Op::kSub:
          return a - b;
        case Op::kMul:
          return a * b;
        case Op::kDiv:
          return a / b;
        case Op::kLt:
          return a < b;
        case Op::kLe:
          return a <= b;
        case Op::kGt:
          return a > b;
        case Op::kGe:
          return a >= b;
        case Op::kEq:
          return a == b;
        default:
          return a != b;  // !=
      }
    }
  }
  return 0.0;
}

class ParsedExpression final : public Expression {
 public:
  ParsedExpression(std::string text, std::unique_ptr<Node> root)
      : text_(std::move(text)), root_(std::move(root)) {}
  double Evaluate(const ExpressionInput& in) const override { return Eval(*root_, in); }
  const std::string& text() const override { return text_; }

 private:
  std::string text_;
  std::unique_ptr<Node> root_;
};

// ----------------------------------------------------------------------------
// Parser.
class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Result<std::unique_ptr<Node>> ParseAll() {
    auto root = ParseOr(0);
    if (!error_.empty()) return Fail();
    SkipSpace();
    if (pos_ < s_.size()) {
      SetError("unexpected '" + std::string(1, s_[pos_]) + "'");
      return Fail();
    }
    return root;
  }

 private:
  // No stack exhaustion on hostile input: the parser recurses once per
  // nesting level (kMaxDepth); Evaluate and the tree's destructor once per
  // level of the tree (kMaxHeight), which a flat chain "a + a + ..." deepens
  // as much as parentheses do.
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxHeight = 256;
  // Characters of the text quoted on each side of an error.
  static constexpr std::size_t kQuote = 40;

  Status Fail() const {
    const std::size_t from = error_pos_ > kQuote ? error_pos_ - kQuote : 0;
    const std::size_t to = std::min(s_.size(), error_pos_ + kQuote);
    const std::string head = from > 0 ? "..." : "";
    const std::string tail = to < s_.size() ? "..." : "";
    const std::string caret(head.size() + error_pos_ - from, ' ');
    return Status::InvalidArgument("expression error at column " + std::to_string(error_pos_ + 1) +
                                   ": " + error_ + "\n  " + head + s_.substr(from, to - from) +
                                   tail + "\n  " + caret + "^");
  }
  // Sets n's height from its children; a tree higher than kMaxHeight is an
  // error (and stops the parse before it grows further).
  std::unique_ptr<Node> Sized(std::unique_ptr<Node> n) {
    int h = 0;
    for (const auto& k : n->kids) {
      if (k) h = std::max(h, k->height);
    }
    n->height = h + 1;
    if (n->height > kMaxHeight) {
      SetError("expression too long: more than " + std::to_string(kMaxHeight) +
               " operators chained or nested");
    }
    return n;
  }
  void SetError(const std::string& what) {
    if (error_.empty()) {
      error_ = what;
      error_pos_ = pos_;
    }
  }
  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(const char* tok) {
    SkipSpace();
    const std::size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(pos_, n, tok) == 0) {
      // "<" must not eat the first char of "<=", "!" not of "!=".
      if ((n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '!' || tok[0] == '=')) &&
          pos_ + 1 < s_.size() && s_[pos_ + 1] == '=') {
        return false;
      }
      pos_ += n;
      return true;
    }
    return false;
  }
  std::unique_ptr<Node> Bin(std::string op, std::unique_ptr<Node> a, std::unique_ptr<Node> b) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kBin;
    n->op = OpOf(op);
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return Sized(std::move(n));
  }
  bool Deep(int depth) {
    if (depth > kMaxDepth) {
      SetError("expression nested too deeply");
      return true;
    }
    return !error_.empty();
  }

  std::unique_ptr<Node> ParseOr(int d) {
    if (Deep(d)) return nullptr;
    auto a = ParseAnd(d + 1);
    while (error_.empty() && Eat("||")) a = Bin("||", std::move(a), ParseAnd(d + 1));
    return a;
  }
  std::unique_ptr<Node> ParseAnd(int d) {
    if (Deep(d)) return nullptr;
    auto a = ParseNot(d + 1);
    while (error_.empty() && Eat("&&")) a = Bin("&&", std::move(a), ParseNot(d + 1));
    return a;
  }
  std::unique_ptr<Node> ParseNot(int d) {
    if (Deep(d)) return nullptr;
    if (Eat("!")) {
      auto n = std::make_unique<Node>();
      n->kind = Node::kNot;
      n->kids.push_back(ParseNot(d + 1));
      return Sized(std::move(n));
    }
    return ParseCmp(d + 1);
  }
  std::unique_ptr<Node> ParseCmp(int d) {
    if (Deep(d)) return nullptr;
    auto a = ParseSum(d + 1);
    for (const char* op : {"<=", ">=", "==", "!=", "<", ">"}) {
      if (error_.empty() && Eat(op)) return Bin(op, std::move(a), ParseSum(d + 1));
    }
    return a;
  }
  std::unique_ptr<Node> ParseSum(int d) {
    if (Deep(d)) return nullptr;
    auto a = ParseProd(d + 1);
    while (error_.empty()) {
      if (Eat("+"))
        a = Bin("+", std::move(a), ParseProd(d + 1));
      else if (Eat("-"))
        a = Bin("-", std::move(a), ParseProd(d + 1));
      else
        break;
    }
    return a;
  }
  std::unique_ptr<Node> ParseProd(int d) {
    if (Deep(d)) return nullptr;
    auto a = ParseUnary(d + 1);
    while (error_.empty()) {
      if (Eat("*"))
        a = Bin("*", std::move(a), ParseUnary(d + 1));
      else if (Eat("/"))
        a = Bin("/", std::move(a), ParseUnary(d + 1));
      else
        break;
    }
    return a;
  }
  std::unique_ptr<Node> ParseUnary(int d) {
    if (Deep(d)) return nullptr;
    if (Eat("-")) {
      auto n = std::make_unique<Node>();
      n->kind = Node::kNeg;
      n->kids.push_back(ParseUnary(d + 1));
      return Sized(std::move(n));
    }
    return ParsePrimary(d + 1);
  }
  std::unique_ptr<Node> ParsePrimary(int d) {
    if (Deep(d)) return nullptr;
    SkipSpace();
    if (pos_ >= s_.size()) {
      SetError("expected a number, a name or '('");
      return nullptr;
    }
    if (Eat("(")) {
      auto e = ParseOr(d + 1);
      if (error_.empty() && !Eat(")")) SetError("expected ')'");
      return e;
    }
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) {
        SetError("malformed number");
        return nullptr;
      }
      pos_ += static_cast<std::size_t>(end - begin);
      auto n = std::make_unique<Node>();
      n->kind = Node::kNum;
      n->num = v;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
        ++pos_;
      }
      const std::string name = s_.substr(start, pos_ - start);
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '(') return ParseCall(name, start, d);
      auto n = std::make_unique<Node>();
      n->kind = Node::kVar;
      if (!LookupVar(name, &n->var)) {
        pos_ = start;
        SetError("unknown name '" + name + "' (use a statistic such as l2, mean, nan_count, " +
                 "zero_fraction)");
        return nullptr;
      }
      return n;
    }
    SetError("unexpected '" + std::string(1, c) + "'");
    return nullptr;
  }
  std::unique_ptr<Node> ParseCall(const std::string& name, std::size_t name_pos, int d) {
    int arity = 0;
    if (name == "abs" || name == "sqrt" || name == "log10" || name == "log2") arity = 1;
    if (name == "min" || name == "max") arity = 2;
    if (arity == 0) {
      pos_ = name_pos;
      SetError("unknown function '" + name + "' (abs, sqrt, log10, log2, min, max)");
      return nullptr;
    }
    Eat("(");
    auto n = std::make_unique<Node>();
    n->kind = Node::kCall;
    n->op = OpOf(name);
    for (int i = 0; i < arity && error_.empty(); ++i) {
      if (i > 0 && !Eat(",")) {
        SetError("expected ',' (" + name + " takes " + std::to_string(arity) + " arguments)");
        return nullptr;
      }
      n->kids.push_back(ParseOr(d + 1));
    }
    if (error_.empty() && !Eat(")")) SetError("expected ')' after the arguments of " + name);
    return Sized(std::move(n));
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  std::string error_;
  std::size_t error_pos_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Expression>> Expression::Parse(const std::string& text) {
  if (text.size() > kMaxExpressionChars) {
    return Status::InvalidArgument("expression is " + std::to_string(text.size()) +
                                   " characters long, more than " +
                                   std::to_string(kMaxExpressionChars));
  }
  Parser p(text);
  auto root = p.ParseAll();
  if (!root.ok()) return root.status();
  return std::shared_ptr<const Expression>(
      std::make_shared<ParsedExpression>(text, std::move(root).value()));
}

}  // namespace tstat::rules
