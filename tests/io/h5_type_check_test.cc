// CheckReadableAs (io/h5/h5_type_check.h) refuses stored number types whose
// bit fields lie outside their bytes: libhdf5 converts numbers by those
// fields unchecked (a crafted 4-byte integer of 200 bits read past its
// buffer in H5Tconvert, found by fuzzing segment_reader), and accepts every
// number type tstat writes.
#include "io/h5/h5_type_check.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <vector>

#include "io/h5/h5_lock.h"

namespace tstat::io::testing {
namespace {

H5Type Copy(hid_t t) { return H5Type(H5Tcopy(t)); }

TEST(H5TypeCheckTest, NumbersWhoseBitsLieOutsideTheirBytesAreRefused) {
  H5Lock lock;
  for (hid_t ok : {H5T_STD_U8LE, H5T_STD_I16LE, H5T_STD_U32LE, H5T_STD_I64BE, H5T_IEEE_F32LE,
                   H5T_IEEE_F64LE}) {
    EXPECT_TRUE(CheckReadableAs(ok, H5T_NATIVE_DOUBLE, "x").ok());
  }
  {
    // 4 bytes, 24 bits at offset 8: legal, and accepted.
    H5Type t = Copy(H5T_STD_U32LE);
    ASSERT_GE(H5Tset_precision(t.get(), 24), 0);
    ASSERT_GE(H5Tset_offset(t.get(), 8), 0);
    EXPECT_TRUE(CheckReadableAs(t.get(), H5T_NATIVE_UINT64, "x").ok());
  }
  // HDF5's own setters refuse these fields, a file's type message does not:
  // the crafted fields are written into an encoded type and decoded back.
  H5Type wide = Copy(H5T_STD_U32LE);
  std::size_t n = 0;
  ASSERT_GE(H5Tencode(wide.get(), nullptr, &n), 0);
  std::vector<unsigned char> buf(n);
  ASSERT_GE(H5Tencode(wide.get(), buf.data(), &n), 0);
  // Encoded datatype message (version 1, integer): after the 2-byte encode
  // header, 8 bytes of class/version/flags/size, then offset (2 bytes) and
  // precision (2 bytes).
  ASSERT_GE(n, 14u);
  buf[2 + 8 + 2] = 200;  // precision 200 bits in 4 bytes
  H5Type crafted(H5Tdecode(buf.data()));
  if (!crafted.valid()) GTEST_SKIP() << "this libhdf5 refuses the crafted type at decode";
  ASSERT_EQ(H5Tget_precision(crafted.get()), 200u);
  const Status s = CheckReadableAs(crafted.get(), H5T_NATIVE_UINT64, "stats");
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("do not fit its 4 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tstat::io::testing
