// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The balanced vocabulary split (include/kloss/vocab_range.hpp).
#include <kloss/checks.hpp>
#include <kloss/vocab_range.hpp>

#include <algorithm>

namespace kloss {

VocabRange vocab_split(std::int64_t total, int rank, int size, std::string_view op) {
  require(total >= 0, op, "argument 'total' must be non-negative, got ", total);
  require(size > 0, op, "argument 'size' must be positive, got ", size);
  require(rank >= 0 && rank < size, op, "argument 'rank' must be in [0, ", size, "), got ", rank);
  const std::int64_t q = total / size, r = total % size;
  VocabRange v;
  v.begin = rank * q + std::min<std::int64_t>(rank, r);
  v.count = q + (rank < r ? 1 : 0);
  v.total = total;
  return v;
}

}  // namespace kloss
