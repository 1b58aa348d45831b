// See h5_error.h.
#include "io/h5/h5_error.h"

#include <hdf5.h>

namespace tstat::io {
namespace {

herr_t AppendRecord(unsigned n, const H5E_error2_t* err, void* client) {
  auto* text = static_cast<std::string*>(client);
  if (n > 0) text->append(" <- ");
  text->append(err->func_name ? err->func_name : "?");
  text->append("(): ");
  text->append(err->desc ? err->desc : "");
  char minor[128] = {0};
  if (H5Eget_msg(err->min_num, nullptr, minor, sizeof(minor)) > 0) {
    text->append(" (");
    text->append(minor);
    text->append(")");
  }
  return 0;
}

}  // namespace

std::string TakeH5ErrorStack() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, AppendRecord, &text);
  H5Eclear2(H5E_DEFAULT);
  // HDF5's descriptions embed ctime() output: keep the message on one line.
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

Status H5Failure(StatusCode code, const std::string& what) {
  std::string stack = TakeH5ErrorStack();
  std::string message = what;
  if (!stack.empty()) message += ": " + stack;
  if (stack.find("No space left on device") != std::string::npos) {
    code = StatusCode::kResourceExhausted;
  }
  return Status(code, message);
}

}  // namespace tstat::io
