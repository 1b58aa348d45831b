// See h5_type_check.h.
#include "io/h5/h5_type_check.h"

#include <hdf5.h>

#include <vector>

#include "io/h5/h5_error.h"

namespace tstat::io {
namespace {

constexpr std::size_t kMaxStoredElementBytes = std::size_t{1} << 20;
constexpr int kMaxNesting = 8;

const char* ClassName(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER:
      return "an integer";
    case H5T_FLOAT:
      return "a float";
    case H5T_STRING:
      return "a string";
    case H5T_COMPOUND:
      return "a compound";
    case H5T_VLEN:
      return "a variable-length sequence";
    case H5T_ARRAY:
      return "an array";
    case H5T_ENUM:
      return "an enum";
    case H5T_OPAQUE:
      return "an opaque type";
    case H5T_BITFIELD:
      return "a bitfield";
    case H5T_REFERENCE:
      return "a reference";
    case H5T_TIME:
      return "a time";
    default:
      return "an unknown class";
  }
}

bool IsNumber(H5T_class_t c) { return c == H5T_INTEGER || c == H5T_FLOAT; }

// Empty when the bit fields of the number type `t` lie inside its bytes, else
// why not. libhdf5 converts numbers by these fields without checking them
// against the size: a crafted integer of 4 bytes with 200 bits of precision
// made H5Tconvert read past its buffer (H5T__bit_find, found by fuzzing).
std::string BadNumberFields(hid_t t) {
  const std::size_t bits = 8 * H5Tget_size(t);
  const std::size_t precision = H5Tget_precision(t);
  const int offset = H5Tget_offset(t);
  if (precision == 0 || offset < 0 || precision > bits ||
      static_cast<std::size_t>(offset) > bits - precision) {
    return "a number whose " + std::to_string(precision) + " bits at offset " +
           std::to_string(offset) + " do not fit its " + std::to_string(bits / 8) + " bytes";
  }
  if (H5Tget_class(t) != H5T_FLOAT) return "";
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) {
    return "a float type HDF5 cannot describe";
  }
  const auto inside = [&](std::size_t pos, std::size_t size) {
    return size <= precision && pos <= precision - size;
  };
  if (!inside(spos, 1) || esize == 0 || !inside(epos, esize) || !inside(mpos, msize) ||
      esize > 64 || msize > 1024) {
    return "a float whose sign, exponent or mantissa lies outside its precision";
  }
  return "";
}

// Whether `type` holds variable-length data (a sequence or a string) at any
// depth (up to kMaxNesting; deeper counts as yes).
bool HasVariableParts(hid_t type, int depth) {
  if (depth > kMaxNesting) return true;
  switch (H5Tget_class(type)) {
    case H5T_VLEN:
      return true;
    case H5T_STRING:
      return H5Tis_variable_str(type) != 0;
    case H5T_ARRAY: {
      H5Type base(H5Tget_super(type));
      return !base.valid() || HasVariableParts(base.get(), depth + 1);
    }
    case H5T_COMPOUND: {
      const int n = H5Tget_nmembers(type);
      if (n < 0) return true;
      for (int i = 0; i < n; ++i) {
        H5Type member(H5Tget_member_type(type, static_cast<unsigned>(i)));
        if (!member.valid() || HasVariableParts(member.get(), depth + 1)) return true;
      }
      return false;
    }
    default:
      return false;
  }
}

// Empty when `stored` may be read as `wanted`, else why not.
std::string Incompatible(hid_t stored, hid_t wanted, int depth) {
  if (depth > kMaxNesting) return "types nested more than 8 levels deep";
  const H5T_class_t sc = H5Tget_class(stored);
  const H5T_class_t wc = H5Tget_class(wanted);
  if (sc == H5T_NO_CLASS || wc == H5T_NO_CLASS) return "a type HDF5 cannot describe";
  const std::size_t size = H5Tget_size(stored);
  if (size == 0 || size > kMaxStoredElementBytes) {
    return "elements of " + std::to_string(size) + " bytes";
  }
  const std::string mismatch =
      std::string("stored as ") + ClassName(sc) + ", not readable as " + ClassName(wc);
  if (IsNumber(wc)) return IsNumber(sc) ? BadNumberFields(stored) : mismatch;
  if (sc != wc) return mismatch;
  switch (wc) {
    case H5T_STRING: {
      const htri_t sv = H5Tis_variable_str(stored), wv = H5Tis_variable_str(wanted);
      if (sv < 0 || wv < 0) return "a string type HDF5 cannot describe";
      if (sv != wv) {
        return sv ? "a variable-length string where a fixed-length one belongs"
                  : "a fixed-length string where a variable-length one belongs";
      }
      return "";
    }
    case H5T_VLEN: {
      H5Type sb(H5Tget_super(stored)), wb(H5Tget_super(wanted));
      if (!sb.valid() || !wb.valid()) return "a sequence of undescribable elements";
      return Incompatible(sb.get(), wb.get(), depth + 1);
    }
    case H5T_ARRAY: {
      const int sn = H5Tget_array_ndims(stored), wn = H5Tget_array_ndims(wanted);
      if (sn < 0 || sn != wn || sn > 32) return "an array of another rank";
      std::vector<hsize_t> sd(static_cast<std::size_t>(sn)), wd(static_cast<std::size_t>(wn));
      if (H5Tget_array_dims2(stored, sd.data()) < 0 || H5Tget_array_dims2(wanted, wd.data()) < 0 ||
          sd != wd) {
        return "an array of other dimensions";
      }
      H5Type sb(H5Tget_super(stored)), wb(H5Tget_super(wanted));
      if (!sb.valid() || !wb.valid()) return "an array of undescribable elements";
      return Incompatible(sb.get(), wb.get(), depth + 1);
    }
    case H5T_COMPOUND: {
      const int n = H5Tget_nmembers(wanted);
      const int stored_n = H5Tget_nmembers(stored);
      if (n < 0 || stored_n < 0) return "a compound HDF5 cannot describe";
      // A member past the end of its compound (a crafted offset) makes
      // HDF5's conversion read and write outside its buffers.
      for (int i = 0; i < stored_n; ++i) {
        H5Type st(H5Tget_member_type(stored, static_cast<unsigned>(i)));
        const std::size_t member_size = st.valid() ? H5Tget_size(st.get()) : 0;
        const std::size_t offset = H5Tget_member_offset(stored, static_cast<unsigned>(i));
        if (member_size == 0 || offset > size || member_size > size - offset) {
          return "member " + std::to_string(i) + " (" + std::to_string(member_size) +
                 " bytes at byte " + std::to_string(offset) + ") lies outside its " +
                 std::to_string(size) + "-byte compound";
        }
        // A member the reader does not ask for is still walked by HDF5's
        // conversion; variable-length data there would be read unchecked.
        char* stored_name = H5Tget_member_name(stored, static_cast<unsigned>(i));
        const bool wanted_too =
            stored_name != nullptr && H5Tget_member_index(wanted, stored_name) >= 0;
        H5free_memory(stored_name);
        if (!wanted_too && HasVariableParts(st.get(), depth + 1)) {
          return "member " + std::to_string(i) +
                 " holds variable-length data the reader does "
                 "not read";
        }
      }
      for (int i = 0; i < n; ++i) {
        char* name = H5Tget_member_name(wanted, static_cast<unsigned>(i));
        if (name == nullptr) return "a compound member without a name";
        const std::string member = name;
        H5free_memory(name);
        const int at = H5Tget_member_index(stored, member.c_str());
        if (at < 0) continue;  // read as zero
        H5Type st(H5Tget_member_type(stored, static_cast<unsigned>(at)));
        H5Type wt(H5Tget_member_type(wanted, static_cast<unsigned>(i)));
        if (!st.valid() || !wt.valid()) return "member '" + member + "' cannot be described";
        const std::string why = Incompatible(st.get(), wt.get(), depth + 1);
        if (!why.empty()) return "member '" + member + "': " + why;
      }
      return "";
    }
    default:
      return H5Tequal(stored, wanted) > 0 ? "" : mismatch;
  }
}

}  // namespace

bool HasVariableLengthParts(hid_t type) {
  const bool has = HasVariableParts(type, 0);
  TakeH5ErrorStack();
  return has;
}

Status CheckReadableAs(hid_t stored, hid_t wanted, const std::string& what) {
  std::string why = Incompatible(stored, wanted, 0);
  TakeH5ErrorStack();  // member lookups of absent names leave errors behind
  if (why.empty()) return Status::OK();
  return Status::Corruption(what + ": " + why);
}

}  // namespace tstat::io
