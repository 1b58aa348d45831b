// RowCopyPlan (io/h5/h5_row_copy.h) must read rows exactly as H5Tconvert
// does whenever it makes a plan, and make none when a value needs converting.
// Each case converts the same packed rows both ways and compares the bytes.
#include "io/h5/h5_row_copy.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/h5/h5_lock.h"

namespace tstat::io::testing {
namespace {

struct Inner {
  double a;
  std::uint8_t b;
};
struct Mem {  // padded, as tstat's row structs are
  std::int64_t step;
  std::uint8_t mode;
  Inner inner;
  std::uint32_t id;
  double missing;  // not in the stored type: stays as the background
};

H5Type InnerMem() {
  H5Type t(H5Tcreate(H5T_COMPOUND, sizeof(Inner)));
  H5Tinsert(t.get(), "a", HOFFSET(Inner, a), H5T_NATIVE_DOUBLE);
  H5Tinsert(t.get(), "b", HOFFSET(Inner, b), H5T_NATIVE_UINT8);
  return t;
}

H5Type MemType() {
  H5Type inner = InnerMem();
  H5Type t(H5Tcreate(H5T_COMPOUND, sizeof(Mem)));
  H5Tinsert(t.get(), "step", HOFFSET(Mem, step), H5T_NATIVE_INT64);
  H5Tinsert(t.get(), "mode", HOFFSET(Mem, mode), H5T_NATIVE_UINT8);
  H5Tinsert(t.get(), "inner", HOFFSET(Mem, inner), inner.get());
  H5Tinsert(t.get(), "id", HOFFSET(Mem, id), H5T_NATIVE_UINT32);
  H5Tinsert(t.get(), "missing", HOFFSET(Mem, missing), H5T_NATIVE_DOUBLE);
  return t;
}

// Packed, members in another order, an extra member the memory type lacks,
// `id` stored as `id_type`.
H5Type StoredType(hid_t id_type) {
  H5Type inner(H5Tcreate(H5T_COMPOUND, 9));
  H5Tinsert(inner.get(), "b", 0, H5T_NATIVE_UINT8);
  H5Tinsert(inner.get(), "a", 1, H5T_NATIVE_DOUBLE);
  const std::size_t id_size = H5Tget_size(id_type);
  H5Type t(H5Tcreate(H5T_COMPOUND, 8 + 1 + 9 + 2 + id_size));
  H5Tinsert(t.get(), "step", 0, H5T_NATIVE_INT64);
  H5Tinsert(t.get(), "mode", 8, H5T_NATIVE_UINT8);
  H5Tinsert(t.get(), "inner", 9, inner.get());
  H5Tinsert(t.get(), "extra", 18, H5T_NATIVE_UINT16);
  H5Tinsert(t.get(), "id", 20, id_type);
  return t;
}

std::vector<unsigned char> PackedRows(hid_t stored, int rows) {
  const std::size_t size = H5Tget_size(stored);
  std::vector<unsigned char> out(size * static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    unsigned char* p = out.data() + size * static_cast<std::size_t>(r);
    const std::int64_t step = 1000 + r;
    const double a = 0.5 * r - 3.25;
    const std::uint16_t extra = 7;
    const std::uint32_t id = 40000u + static_cast<std::uint32_t>(r);
    std::memcpy(p, &step, 8);
    p[8] = static_cast<unsigned char>(r % 4);
    p[9] = static_cast<unsigned char>(200 + r);
    std::memcpy(p + 10, &a, 8);
    std::memcpy(p + 18, &extra, 2);
    std::memcpy(p + 20, &id, size - 20);  // little-endian: the low bytes
  }
  return out;
}

// The rows through H5Tconvert, on a background of 0xAB bytes.
std::vector<Mem> Converted(hid_t stored, hid_t mem, const std::vector<unsigned char>& packed,
                           int rows) {
  std::vector<Mem> out(static_cast<std::size_t>(rows));
  std::memset(out.data(), 0xAB, out.size() * sizeof(Mem));
  std::vector<unsigned char> buf(std::max(H5Tget_size(stored), sizeof(Mem)) *
                                 static_cast<std::size_t>(rows));
  std::memcpy(buf.data(), packed.data(), packed.size());
  EXPECT_GE(
      H5Tconvert(stored, mem, static_cast<std::size_t>(rows), buf.data(), out.data(), H5P_DEFAULT),
      0);
  std::memcpy(out.data(), buf.data(), out.size() * sizeof(Mem));
  return out;
}

TEST(RowCopyPlanTest, CopiesWhatH5TconvertConvertsByteForByte) {
  H5Lock lock;
  constexpr int kRows = 37;
  H5Type mem = MemType();
  H5Type stored = StoredType(H5T_NATIVE_UINT32);
  const std::vector<unsigned char> packed = PackedRows(stored.get(), kRows);
  const std::optional<RowCopyPlan> plan = RowCopyPlan::Build(stored.get(), mem.get());
  ASSERT_TRUE(plan.has_value());
  std::vector<Mem> copied(kRows);
  std::memset(copied.data(), 0xAB, copied.size() * sizeof(Mem));
  plan->Apply(packed.data(), kRows, reinterpret_cast<unsigned char*>(copied.data()));
  const std::vector<Mem> want = Converted(stored.get(), mem.get(), packed, kRows);
  ASSERT_EQ(std::memcmp(copied.data(), want.data(), sizeof(Mem) * kRows), 0);
  EXPECT_EQ(copied[5].step, 1005);
  EXPECT_EQ(copied[5].mode, 1);
  EXPECT_EQ(copied[5].inner.a, -0.75);
  EXPECT_EQ(copied[5].inner.b, 205);
  EXPECT_EQ(copied[5].id, 40005u);
  // Every run lies inside both rows (adjacent members merged, never past).
  for (const RowCopyPlan::Run& r : plan->runs()) {
    EXPECT_LE(r.dst + r.bytes, sizeof(Mem));
    EXPECT_LE(r.src + r.bytes, H5Tget_size(stored.get()));
  }
}

TEST(RowCopyPlanTest, NoPlanWhenAValueNeedsConverting) {
  H5Lock lock;
  H5Type mem = MemType();
  H5Type narrow = StoredType(H5T_NATIVE_UINT16);  // id widened on read
  H5Type swapped = StoredType(H5T_STD_U32BE);     // id byte-swapped on read
  EXPECT_FALSE(RowCopyPlan::Build(narrow.get(), mem.get()).has_value());
  EXPECT_FALSE(RowCopyPlan::Build(swapped.get(), mem.get()).has_value());
  // A number stored where the memory type has a compound.
  H5Type flat(H5Tcreate(H5T_COMPOUND, 8));
  H5Tinsert(flat.get(), "inner", 0, H5T_NATIVE_DOUBLE);
  EXPECT_FALSE(RowCopyPlan::Build(flat.get(), mem.get()).has_value());
}

// Integers stored narrower than they are read: widened as H5Tconvert widens
// them (sign-extended when signed); never for another byte order or a
// narrowing.
TEST(RowCopyPlanTest, WidensIntegersAsH5TconvertDoes) {
  H5Lock lock;
  struct Case {
    hid_t stored, mem;
  };
  const Case cases[] = {{H5T_STD_U16LE, H5T_NATIVE_UINT64}, {H5T_STD_I16LE, H5T_NATIVE_INT64},
                        {H5T_STD_U8LE, H5T_NATIVE_UINT32},  {H5T_STD_I32LE, H5T_NATIVE_INT64},
                        {H5T_STD_U32LE, H5T_NATIVE_UINT64}, {H5T_STD_I8LE, H5T_NATIVE_INT16}};
  for (const Case& c : cases) {
    const std::size_t from = H5Tget_size(c.stored), to = H5Tget_size(c.mem);
    SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to));
    constexpr std::size_t kRows = 300;
    std::vector<unsigned char> packed(kRows * from);
    for (std::size_t i = 0; i < packed.size(); ++i) {
      packed[i] = static_cast<unsigned char>(i * 37 + 11);  // high bits set in many values
    }
    const std::optional<RowCopyPlan> plan = RowCopyPlan::Build(c.stored, c.mem);
    ASSERT_TRUE(plan.has_value());
    std::vector<unsigned char> widened(kRows * to, 0xCD);
    plan->Apply(packed.data(), kRows, widened.data());
    std::vector<unsigned char> want(kRows * to);
    std::memcpy(want.data(), packed.data(), packed.size());
    ASSERT_GE(H5Tconvert(c.stored, c.mem, kRows, want.data(), nullptr, H5P_DEFAULT), 0);
    EXPECT_EQ(widened, want);
  }
  EXPECT_FALSE(RowCopyPlan::Build(H5T_STD_U16BE, H5T_NATIVE_UINT64).has_value());
  EXPECT_FALSE(RowCopyPlan::Build(H5T_STD_U64LE, H5T_NATIVE_UINT16).has_value());
  EXPECT_FALSE(RowCopyPlan::Build(H5T_STD_I16LE, H5T_NATIVE_UINT64).has_value());
}

}  // namespace
}  // namespace tstat::io::testing
