// MeasureDevice for builds without CUDA: says so instead of measuring.
#include "benchmarks/device_bench.h"

namespace tstat::bench {

Result<DeviceReport> MeasureDevice(const DeviceBenchOptions& /*options*/) {
  return Status::NotSupported("tstat was built without CUDA: no device to measure");
}

}  // namespace tstat::bench
