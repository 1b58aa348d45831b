// Collection selection: built-in regexes (RE2, partial match, with exclude
// lists in place of smdebug's lookaheads), custom collections, exact names,
// explicit membership, `default`, activity, and the merge of stats options.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "host/config/collection_set.h"

namespace tstat::host {
namespace {

using Names = std::vector<std::string>;

Names Selected(const CollectionSet& set, const std::string& tensor,
               TensorKind kind = TensorKind::kTensor, const Names& explicit_names = {}) {
  auto cols = set.Select(tensor, kind, explicit_names);
  EXPECT_TRUE(cols.ok()) << cols.status().ToString();
  Names out;
  if (!cols.ok()) return out;
  for (int i : cols.value()) out.push_back(set.at(i).name);
  return out;
}

std::unique_ptr<CollectionSet> Make(const SessionConfig& c) {
  auto set = CollectionSet::Create(c);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? std::move(set).value() : nullptr;
}

TEST(CollectionsTest, BuiltInRegexes) {
  auto set = Make({});
  EXPECT_EQ(Selected(*set, "Net_fc1.weight"), (Names{"weights", "all"}));
  EXPECT_EQ(Selected(*set, "gradient/Net_fc1.weight"), (Names{"gradients", "all"}));
  EXPECT_EQ(Selected(*set, "fc1.bias"), (Names{"biases", "all"}));
  EXPECT_EQ(Selected(*set, "gradient/fc1.bias"), (Names{"gradients", "all"}));
  EXPECT_EQ(Selected(*set, "relu1_output_0"), (Names{"activations", "all"}));
  EXPECT_EQ(Selected(*set, "activations/block3"), (Names{"activations", "all"}));
  EXPECT_EQ(Selected(*set, "conv1_input_0"), (Names{"inputs", "all"}));
  EXPECT_EQ(Selected(*set, "labels"), (Names{"labels", "all"}));
  EXPECT_EQ(Selected(*set, "batch/label"), (Names{"labels", "all"}));
  EXPECT_EQ(Selected(*set, "labelsmith"), (Names{"default", "all"}));
  EXPECT_EQ(Selected(*set, "CrossEntropyLoss_output_0"), (Names{"activations", "losses", "all"}));
  EXPECT_EQ(Selected(*set, "CrossEntropyLoss_input_0"), (Names{"inputs", "all"}));
  EXPECT_EQ(Selected(*set, "something_else"), (Names{"default", "all"}));
}

TEST(CollectionsTest, ScalarsGoToScalarsPlusRegexMatches) {
  auto set = Make({});
  EXPECT_EQ(Selected(*set, "loss", TensorKind::kScalar), (Names{"losses", "scalars", "all"}));
  EXPECT_EQ(Selected(*set, "learning_rate", TensorKind::kScalar), (Names{"scalars", "all"}));
}

TEST(CollectionsTest, ActiveByDefaultIsEveryBuiltInButAll) {
  auto set = Make({});
  for (int i = 0; i < set->size(); ++i) {
    EXPECT_EQ(set->at(i).active, set->at(i).name != "all") << set->at(i).name;
  }
}

TEST(CollectionsTest, IncludeCollectionsLimitsAndConfiguredCollectionsAreIncluded) {
  SessionConfig c;
  c.include_collections = {"losses"};
  CollectionConfig mine;
  mine.name = "mine";
  mine.tensor_names = {"x"};
  c.collections.push_back(mine);
  auto set = Make(c);
  EXPECT_TRUE(set->at(set->Find("losses")).active);
  EXPECT_TRUE(set->at(set->Find("mine")).active);  // configured: included (as smdebug)
  EXPECT_FALSE(set->at(set->Find("weights")).active);
  EXPECT_FALSE(set->at(set->Find("default")).active);
}

TEST(CollectionsTest, CustomCollectionsWithIncludeExcludeAndNames) {
  SessionConfig c;
  CollectionConfig enc;
  enc.name = "encoder";
  enc.include_regex = {"^encoder\\."};
  enc.exclude_regex = {"norm"};
  enc.tensor_names = {"shared.embedding"};
  c.collections.push_back(enc);
  auto set = Make(c);
  // Custom collections come first in the order.
  EXPECT_EQ(set->at(0).name, "encoder");
  EXPECT_EQ(Selected(*set, "encoder.layer0.weight"), (Names{"encoder", "weights", "all"}));
  EXPECT_EQ(Selected(*set, "encoder.norm.weight"), (Names{"weights", "all"}));
  EXPECT_EQ(Selected(*set, "shared.embedding"), (Names{"encoder", "all"}));
  EXPECT_EQ(Selected(*set, "xencoder.a"), (Names{"default", "all"}));  // anchored regex
}

TEST(CollectionsTest, UserRegexesReplaceBuiltInOnes) {
  SessionConfig c;
  CollectionConfig w;
  w.name = "weights";
  w.include_regex = {"\\.W$"};
  c.collections.push_back(w);
  auto set = Make(c);
  EXPECT_EQ(Selected(*set, "fc.W"), (Names{"weights", "all"}));
  EXPECT_EQ(Selected(*set, "fc.weight"), (Names{"default", "all"}));
}

TEST(CollectionsTest, ExplicitMembershipAndUnknownCollections) {
  auto set = Make({});
  EXPECT_EQ(Selected(*set, "h", TensorKind::kTensor, {"activations"}),
            (Names{"activations", "all"}));
  auto bad = set->Select("h", TensorKind::kTensor, {"activation"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown collection \"activation\""), std::string::npos);
}

TEST(CollectionsTest, MergedOptionsAreTheUnionFirstCollectionWinsConflicts) {
  SessionConfig c;
  c.stats.band_lo = -0.5;
  CollectionConfig a, b;
  a.name = "a";
  a.tensor_names = {"t"};
  a.stats.histogram_bins = 8;
  a.stats.band_hi = 0.25;
  b.name = "b";
  b.tensor_names = {"t"};
  b.stats.per_channel_axis = 0;
  b.stats.histogram_bins = 32;
  b.stats.sample_count = 5;
  b.stats.exponent_histogram = false;
  c.collections = {a, b};
  auto set = Make(c);
  const StatsOptions o = MergeOptions(*set, {set->Find("a"), set->Find("b")}).stats;
  EXPECT_EQ(o.linear_histogram.bins, 8);  // a's
  EXPECT_EQ(o.per_channel_axis, 0);       // only b asks
  EXPECT_EQ(o.sample_count, 5);
  EXPECT_TRUE(o.exponent_histogram);  // a keeps the default (on)
  EXPECT_EQ(o.band_hi, 0.25);         // a's
  EXPECT_EQ(o.band_lo, -0.5);         // session's, inherited
  const StatsOptions ob = MergeOptions(*set, {set->Find("b")}).stats;
  EXPECT_FALSE(ob.exponent_histogram);
  EXPECT_EQ(ob.linear_histogram.bins, 32);
  EXPECT_FALSE(ob.linear_histogram.fixed_range);
}

}  // namespace
}  // namespace tstat::host
