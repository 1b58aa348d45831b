// Confusion matrix on the CPU. The labels are cut into blocks of
// kAuxBlockElems; for each block the predictions are resolved first (integer
// class ids, or the first-maximum argmax of each logits row, -1 for a row
// with NaN; FirstArgmax of kernels/aux_ops.h) into a buffer, then the
// (label, prediction) cells are counted. Each worker counts into a private
// matrix, merged at the end; when classes^2 private matrices would be too
// large the workers add into the result with atomic integer adds instead.
// Integer counts: the result does not depend on the partition.
#include <algorithm>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/cpu/cpu_aux.h"
#include "kernels/cpu/cpu_passes.h"

namespace tstat::kernels::cpu {
namespace {

// Private matrices of all workers together stay below this many cells.
constexpr std::int64_t kMaxPrivateCells = std::int64_t{1} << 22;  // 32 MiB

// Predictions of elements [begin, end) into pred[0, end - begin).
template <DType P>
void ResolvePredictions(const unsigned char* base, bool argmax, std::int64_t classes,
                        std::int64_t begin, std::int64_t end, std::int64_t* pred) {
  if constexpr (IsIntegerDType(P)) {
    (void)argmax;
    (void)classes;
    for (std::int64_t i = begin; i < end; ++i) pred[i - begin] = LoadInteger<P>(base, i);
  } else {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t row = i * classes;
      pred[i - begin] =
          FirstArgmax(classes, [&](std::int64_t k) { return LoadCompute<P>(base, row + k); });
    }
  }
}

// Counts the cells of elements [begin, end); returns the invalid pairs.
template <DType L, bool kAtomic>
std::uint64_t CountCells(const unsigned char* labels, const std::int64_t* pred,
                         std::int64_t classes, std::int64_t begin, std::int64_t end,
                         std::uint64_t* cells) {
  std::uint64_t invalid = 0;
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t cell = ConfusionCell(LoadInteger<L>(labels, i), pred[i - begin], classes);
    if (cell < 0) {
      ++invalid;
    } else if constexpr (kAtomic) {
#pragma omp atomic
      ++cells[cell];
    } else {
      ++cells[cell];
    }
  }
  return invalid;
}

template <DType L, bool kAtomic>
void ConfusionTyped(const ReductionRequest& r, int parts, std::uint64_t* shared_cells,
                    std::vector<std::vector<std::uint64_t>>* private_cells,
                    std::vector<std::uint64_t>* invalid) {
  const ConfusionOptions& c = r.options.confusion;
  const std::int64_t classes = r.options.label_classes;
  const std::int64_t n = r.tensor.numel;
  const auto* labels = static_cast<const unsigned char*>(r.tensor.data);
  const auto* preds = static_cast<const unsigned char*>(c.predictions);
  const std::int64_t blocks = (n + kAuxBlockElems - 1) / kAuxBlockElems;
#pragma omp parallel num_threads(parts) if (parts > 1)
  {
    std::vector<std::int64_t> pred(static_cast<std::size_t>(std::min(n, kAuxBlockElems)));
#pragma omp for schedule(static)
    for (int part = 0; part < parts; ++part) {
      std::uint64_t* cells = kAtomic ? shared_cells : (*private_cells)[part].data();
      std::uint64_t bad = 0;
      for (std::int64_t b = RangeStart(blocks, parts, part),
                        e = RangeStart(blocks, parts, part + 1);
           b < e; ++b) {
        const std::int64_t begin = b * kAuxBlockElems;
        const std::int64_t end = std::min(n, begin + kAuxBlockElems);
        DispatchDType(c.predictions_dtype, [&](auto tag) {
          ResolvePredictions<decltype(tag)::value>(preds, c.argmax, classes, begin, end,
                                                   pred.data());
        });
        bad += CountCells<L, kAtomic>(labels, pred.data(), classes, begin, end, cells);
      }
      (*invalid)[part] = bad;
    }
  }
}

}  // namespace

void ComputeConfusion(const ReductionRequest& r, int workers, ConfusionMatrix* out) {
  const std::int64_t classes = r.options.label_classes;
  const std::int64_t cells = classes * classes;
  const std::int64_t n = r.tensor.numel;
  const std::int64_t blocks = (n + kAuxBlockElems - 1) / kAuxBlockElems;
  const int parts =
      n >= kParallelMinElems
          ? static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(workers, blocks)))
          : 1;
  const bool atomic = parts > 1 && cells * parts > kMaxPrivateCells;
  out->classes = static_cast<int>(classes);
  out->counts.assign(static_cast<std::size_t>(cells), 0);
  std::vector<std::vector<std::uint64_t>> private_cells;
  if (!atomic) {
    private_cells.assign(parts, {});
    private_cells[0].swap(out->counts);  // part 0 counts in place
    for (int p = 1; p < parts; ++p) private_cells[p].assign(static_cast<std::size_t>(cells), 0);
  }
  std::vector<std::uint64_t> invalid(parts, 0);
  DispatchIntegerDType(r.tensor.dtype, [&](auto tag) {
    constexpr DType L = decltype(tag)::value;
    if (atomic) {
      ConfusionTyped<L, true>(r, parts, out->counts.data(), &private_cells, &invalid);
    } else {
      ConfusionTyped<L, false>(r, parts, nullptr, &private_cells, &invalid);
    }
  });
  if (!atomic) {
    out->counts.swap(private_cells[0]);
    for (int p = 1; p < parts; ++p) {
      for (std::int64_t k = 0; k < cells; ++k) out->counts[k] += private_cells[p][k];
    }
  }
  out->invalid = 0;
  for (std::uint64_t v : invalid) out->invalid += v;
}

}  // namespace tstat::kernels::cpu
