// NullSink: the StepSink of a dry run. Accepts everything, stores nothing.
// Thread safety: as StepSink (one thread).
#pragma once

#include <memory>

#include "io/write/step_sink.h"

namespace tstat::host {

class NullSink final : public io::StepSink {
 public:
  Status RegisterTensors(const std::vector<TensorInfo>&) override { return Status::OK(); }
  Status Write(const StepBatch&) override { return Status::OK(); }
  Status Flush(const PipelineCounters&) override { return Status::OK(); }
  Status Close(const PipelineCounters&) override { return Status::OK(); }
  std::uint64_t bytes_written() const override { return 0; }
  std::uint64_t records_lost() const override { return 0; }
  std::uint64_t records_unflushed() const override { return 0; }
};

}  // namespace tstat::host
