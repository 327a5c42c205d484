// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file cross_entropy_options.hpp
/// Options of cross_entropy and nll_loss (torch's keywords and defaults,
/// kloss's extensions and launch overrides), apart from the kernels so that
/// code holding options needs no kernel header.
#include <kloss/check_flag.hpp>
#include <kloss/types.hpp>

#include <cstdint>

namespace kloss {

/// Launch overrides of the cross-entropy kernels (0 = chosen from C and the
/// execution space, see impl/tuning.hpp).
struct CrossEntropyTuning {
  int team_size = 0;               ///< threads per team
  std::int64_t rows_per_team = 0;  ///< rows handled by one team (a row block)
  /// Interleaved class slices per row, run across a team thread's vector
  /// lanes: 1 on host spaces (a thread walks its row alone), a warp's lanes
  /// on devices. Forcing it above 1 on a host runs the device mapping.
  int row_slices = 0;
  /// Teams per row (index-target cross_entropy and its backward): each row
  /// cut into this many contiguous class segments, the forward's segment
  /// partials merged by a second kernel. 0 = automatic: 1 unless there are
  /// fewer rows than workers (host threads, device warps), then enough to
  /// occupy them with segments of at least tuning::ce_split_min_classes.
  int row_splits = 0;
};

/// The cross-entropy family's keywords: torch's, with torch's defaults,
/// plus two extensions that are off by default. The options of
/// cross_entropy, fused_linear_cross_entropy and their vocabulary-parallel
/// forms derive from it (set the fields by name: the base comes first in a
/// brace list).
struct CrossEntropyKeywords {
  std::int64_t ignore_index = -100;      ///< class-index targets equal to this are skipped
  Reduction reduction = Reduction::mean; ///< none | mean | sum
  double label_smoothing = 0.0;          ///< in [0, 1]
  double z_loss = 0.0;     ///< extension (PaLM): adds z_loss * lse^2 to every non-ignored row's loss
  double softcap = 0.0;    ///< extension (Gemma 2): logits -> softcap * tanh(x / softcap) first; 0 = off
};

/// Options of cross_entropy: the family's keywords (CrossEntropyKeywords),
/// the launch overrides and the deferred target check.
struct CrossEntropyOptions : CrossEntropyKeywords {
  /// Launch overrides of the kernels (0 = automatic).
  CrossEntropyTuning tuning = {};
  /// Empty (default): a bad target throws at the call, which fences. A flag
  /// (kloss/check_flag.hpp): bad targets are recorded in it and the call
  /// does not wait for its kernels; CheckFlag::verdict() throws later.
  CheckFlag deferred_check = {};
};

/// Options of nll_loss (torch's keywords and defaults).
struct NllLossOptions {
  std::int64_t ignore_index = -100;       ///< targets equal to this are skipped
  Reduction reduction = Reduction::mean;  ///< none | mean | sum
  CrossEntropyTuning tuning = {};         ///< as CrossEntropyOptions::tuning
  CheckFlag deferred_check = {};          ///< as CrossEntropyOptions::deferred_check
};

}  // namespace kloss
