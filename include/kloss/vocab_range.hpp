// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file vocab_range.hpp
/// A rank's share of a vocabulary (the classes of a cross-entropy, the rows
/// of an embedding table) and the balanced split of the golden schema
/// (docs/golden-schema.md): the one range type of the
/// vocabulary-parallel ops (kloss::mpi::ClassRange), the registry's
/// vocabulary-parallel runs (VocabShard) and the golden validation.
#include <cstdint>
#include <string_view>

namespace kloss {

/// Classes (or rows) [begin, begin + count) of `total`.
struct VocabRange {
  std::int64_t begin = 0;  ///< the first class (row) of the range
  std::int64_t count = 0;  ///< how many classes (rows) the range holds
  std::int64_t total = 0;  ///< the whole vocabulary's size
  /// One past the last class (row) of the range.
  std::int64_t end() const { return begin + count; }
};

/// The balanced split: rank r of P owns the contiguous range starting at
/// r * (V / P) + min(r, V % P), of V / P rows plus one for the first V % P
/// ranks. Throws InvalidArgument naming `op` unless total >= 0, size > 0
/// and 0 <= rank < size.
VocabRange vocab_split(std::int64_t total, int rank, int size, std::string_view op = "vocab_split");

}  // namespace kloss
