// TensorIdSet (io/read/tensor_id_set.h): ids below kDenseIds as bits, larger
// ones hashed; membership is the same either way, and an id never inserted
// is absent whichever side of the bound it falls.
#include "io/read/tensor_id_set.h"

#include <gtest/gtest.h>

namespace tstat::io::testing {
namespace {

TEST(TensorIdSetTest, MembershipOnBothSidesOfTheDenseBound) {
  constexpr std::uint32_t kBound = TensorIdSet::kDenseIds;
  TensorIdSet ids;
  EXPECT_FALSE(ids.Contains(0));
  for (std::uint32_t id : {0u, 1u, 7u, 1000u, kBound - 1, kBound, kBound + 5, 0xFFFFFFFFu}) {
    ids.Insert(id);
  }
  for (std::uint32_t id : {0u, 1u, 7u, 1000u, kBound - 1, kBound, kBound + 5, 0xFFFFFFFFu}) {
    EXPECT_TRUE(ids.Contains(id)) << id;
  }
  for (std::uint32_t id : {2u, 999u, 1001u, kBound - 2, kBound + 1, 0xFFFFFFFEu}) {
    EXPECT_FALSE(ids.Contains(id)) << id;
  }
}

}  // namespace
}  // namespace tstat::io::testing
