// libtstat.so is assembled from the whole tstat_host archive (see
// host/CMakeLists.txt); CMake wants every library to have a source of its own.
//
// It also anchors the reader: the Trial API (tstat/trial.h) is part of the
// installed interface but lives in tstat_io, an ordinary archive whose
// objects enter the library only when something references them.
#include "tstat/trial.h"

namespace tstat {
namespace {

// Never called: its references make the linker keep the reader.
[[maybe_unused]] __attribute__((used)) void KeepReader() {
  (void)Trial::Open("");
  (void)StatFieldName(StatField::kCount);
  StatField field;
  (void)ParseStatField("", &field);
  (void)StatValue(TensorStats(), StatField::kCount);
  (void)RawTensor().ToDoubles();
}

}  // namespace
}  // namespace tstat
