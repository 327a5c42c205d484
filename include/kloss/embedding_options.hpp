// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file embedding_options.hpp
/// Options of embedding and embedding_bag (torch's keywords and defaults,
/// kloss's extensions and launch overrides), apart from the kernels.
#include <kloss/checks.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace kloss {

/// Options of embedding (torch: `padding_idx=None, max_norm=None,
/// norm_type=2., scale_grad_by_freq=False, sparse=False`) plus kloss's
/// backward flavour and a tuning override.
struct EmbeddingOptions {
  /// Row whose gradient stays zero; negative counts from the end; empty = None.
  std::optional<std::int64_t> padding_idx;
  /// Renormalise looked-up rows with a larger norm, in place (needs a
  /// writable weight); empty = None.
  std::optional<double> max_norm;
  /// The p of the p-norm for max_norm (inf and 0 allowed, as torch.norm).
  double norm_type = 2.0;
  /// Divide each row's gradient by the row's number of occurrences in input.
  bool scale_grad_by_freq = false;
  /// torch's flag; kloss computes the row-sparse gradient with
  /// embedding_backward_sparse (the runtime API does so when it is set).
  bool sparse = false;
  /// kloss extension: sort-based backward, bitwise reproducible.
  bool deterministic = false;
  /// kloss tuning override: threads per team (0 = Kokkos::AUTO).
  int team_size = 0;
  /// kloss tuning override of the backward's scatter (without
  /// `deterministic`): 0 = automatic (owner computes with one work item per
  /// thread on host spaces, the sorted backward on device spaces; both
  /// bitwise reproducible), -1 = atomic adds (fastest on devices, NOT
  /// reproducible: opt-in), k > 0 = owner computes over k work items (see
  /// scatter_owner_kernel). embedding_bag's max mode: automatic is owner
  /// computes on host spaces (rows x features over the threads) and atomic
  /// adds on device spaces (as torch: not reproducible; `deterministic`
  /// gives the host's bits there, by a sort of the bags' entries by row).
  /// k > 0 takes owner computes on every space.
  int scatter_items = 0;
};

/// embedding_bag's reduction of each bag.
enum class EmbeddingBagMode { sum, mean, max };

/// "sum", "mean", "max".
inline std::string_view to_string(EmbeddingBagMode m) {
  return m == EmbeddingBagMode::sum ? "sum" : m == EmbeddingBagMode::mean ? "mean" : "max";
}

/// Parses torch's spelling; throws InvalidArgument otherwise.
inline EmbeddingBagMode parse_embedding_bag_mode(std::string_view s) {
  if (s == "sum") return EmbeddingBagMode::sum;
  if (s == "mean") return EmbeddingBagMode::mean;
  if (s == "max") return EmbeddingBagMode::max;
  fail<InvalidArgument>("embedding_bag", "option 'mode' must be 'sum', 'mean' or 'max', got '", s, "'");
}

/// Options of embedding_bag (torch: `max_norm=None, norm_type=2,
/// scale_grad_by_freq=False, mode='mean', sparse=False,
/// include_last_offset=False, padding_idx=None`) plus kloss's extensions.
struct EmbeddingBagOptions {
  EmbeddingBagMode mode = EmbeddingBagMode::mean;  ///< how a bag's rows are reduced
  std::optional<double> max_norm;                  ///< as EmbeddingOptions::max_norm
  double norm_type = 2.0;                          ///< as EmbeddingOptions::norm_type
  bool scale_grad_by_freq = false;                 ///< as EmbeddingOptions::scale_grad_by_freq (not with max)
  bool sparse = false;                             ///< as EmbeddingOptions::sparse
  /// offsets has one more entry than there are bags: the end of the last.
  bool include_last_offset = false;
  std::optional<std::int64_t> padding_idx;  ///< as EmbeddingOptions::padding_idx; such rows are left out of their bag
  bool deterministic = false;               ///< as EmbeddingOptions::deterministic
  int team_size = 0;                        ///< as EmbeddingOptions::team_size
  /// As EmbeddingOptions::scatter_items.
  int scatter_items = 0;
};

}  // namespace kloss
