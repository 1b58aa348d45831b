#include "rules/engine/param_reader.h"

#include <gtest/gtest.h>

namespace tstat::rules {
namespace {

TEST(ParamReaderTest, ReadsTypedValuesAndDefaults) {
  const std::map<std::string, std::string> p = {
      {"threshold", "1e-7"}, {"num_steps", "12"}, {"only_nan", "True"}, {"names", "a, b,,c"}};
  ParamReader r("vanishing_gradient", p);
  EXPECT_DOUBLE_EQ(r.Double("threshold", 1.0), 1e-7);
  EXPECT_EQ(r.Int("num_steps", 3), 12);
  EXPECT_TRUE(r.Bool("only_nan", false));
  EXPECT_EQ(r.List("names", {}), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_DOUBLE_EQ(r.Double("absent", 2.5), 2.5);
  EXPECT_TRUE(r.Finish().ok());
}

TEST(ParamReaderTest, MistypedParameterIsNamed) {
  const std::map<std::string, std::string> p = {{"threshold", "tiny"}};
  ParamReader r("vanishing_gradient", p);
  r.Double("threshold", 1e-7);
  const Status s = r.Finish();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("threshold"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tiny"), std::string::npos) << s.message();
}

TEST(ParamReaderTest, UnknownParameterIsAnErrorListingKnownOnes) {
  const std::map<std::string, std::string> p = {{"threshhold", "1"}};
  ParamReader r("all_zero", p);
  r.Double("threshold", 100);
  const Status s = r.Finish();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown parameter(s) threshhold"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("known: threshold"), std::string::npos) << s.message();
}

TEST(ParamReaderTest, RangeCheckNamesTheParameter) {
  const std::map<std::string, std::string> p = {{"threshold", "150"}};
  ParamReader r("all_zero", p);
  r.CheckRange("threshold", r.Double("threshold", 100), 0, 100);
  EXPECT_NE(r.Finish().message().find("threshold must be in [0, 100], got 150"), std::string::npos);
}

TEST(ParamReaderTest, IntegerRejectsFractionAndBoolRejectsWords) {
  const std::map<std::string, std::string> p = {{"n", "2.5"}, {"b", "yes"}};
  ParamReader r("x", p);
  r.Int("n", 1);
  EXPECT_NE(r.Finish().message().find("n must be an integer"), std::string::npos);
  ParamReader r3("x", {{"b", "yes"}});
  r3.Bool("b", false);
  EXPECT_NE(r3.Finish().message().find("b must be true or false"), std::string::npos);
}

TEST(ParamReaderTest, OneOfNamesTheChoices) {
  ParamReader ok("x", {{"mode", "b"}});
  EXPECT_EQ(ok.OneOf("mode", "a", {"a", "b", "c"}), "b");
  EXPECT_EQ(ok.OneOf("absent", "a", {"a", "b"}), "a");
  EXPECT_TRUE(ok.Finish().ok());
  ParamReader bad("x", {{"mode", "d"}});
  EXPECT_EQ(bad.OneOf("mode", "a", {"a", "b", "c"}), "a");
  EXPECT_NE(bad.Finish().message().find("rule x: parameter mode must be a, b or c, got \"d\""),
            std::string::npos)
      << bad.Finish().message();
  ParamReader two("x", {{"mode", "d"}});
  two.OneOf("mode", "a", {"a", "b"});
  EXPECT_NE(two.Finish().message().find("must be a or b, got"), std::string::npos);
}

}  // namespace
}  // namespace tstat::rules
