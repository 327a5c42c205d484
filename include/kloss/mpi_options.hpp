// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file mpi_options.hpp
/// Options of the vocabulary-parallel ops and of kloss's communicator
/// (kloss/mpi.hpp): torch's keywords where the op has a torch counterpart,
/// with torch's defaults, plus the consistency check of every collective.
#include <kloss/cross_entropy_options.hpp>
#include <kloss/embedding_options.hpp>
#include <kloss/grad_filter.hpp>
#include <kloss/head_products.hpp>

#include <cstdint>

namespace kloss::mpi {

/// How kloss hands its communication buffers to MPI.
struct CommunicatorOptions {
  /// The MPI library reads and writes device memory directly (CUDA-/ROCm-
  /// aware MPI). Default off: buffers outside host memory are staged through
  /// host mirrors. See detect_gpu_aware().
  bool gpu_aware = false;
  /// Stage through a separate host copy even for host-accessible buffers
  /// (exercises the staged path on a host-only build; for tests).
  bool force_host_staging = false;
};

/// Options of vocab_parallel_cross_entropy: cross_entropy's (torch's
/// keywords for class-index targets, the z_loss / softcap extensions, the
/// launch tuning), plus the consistency check.
struct VocabParallelCrossEntropyOptions : CrossEntropyOptions {
  /// Check before the data collective that every rank agrees (rows, class
  /// ranges tile [0, C), options, arguments accepted): one MPI_Allgather of
  /// 128 bytes per rank. Off: arguments one rank rejects throw on that rank
  /// only, and the others may wait in the collective.
  bool check_consistency = true;
};

/// Options of vocab_parallel_embedding: embedding's (padding_idx, max_norm
/// and norm_type, scale_grad_by_freq, deterministic, team_size; `sparse`
/// is not supported on a sharded table and throws NotImplemented), plus the
/// consistency check.
struct VocabParallelEmbeddingOptions : EmbeddingOptions {
  /// As VocabParallelCrossEntropyOptions::check_consistency.
  bool check_consistency = true;
};

/// Options of vocab_parallel_fused_linear_cross_entropy: cross_entropy's
/// keywords (CrossEntropyKeywords; class weights are the `ce_weight`
/// argument), the scratch budget and the consistency check.
struct VocabParallelFusedLinearOptions : CrossEntropyKeywords {
  /// Scratch budget for one chunk of logits (bytes): the token chunk is
  /// chunk_bytes / (C_r x bytes per logit) rows, at least one - never
  /// N x C_r. 0 = automatic: 64 MiB on hosts
  /// (tuning::vp_fl_host_chunk_bytes); on devices the fused head's device
  /// budget (tuning::fl_device_default_budget_bytes, at least
  /// fl_device_min_chunk_rows rows: products large enough for the tensor
  /// cores).
  std::int64_t chunk_bytes = 0;
  /// As VocabParallelCrossEntropyOptions::check_consistency.
  bool check_consistency = true;
  /// float16 / bfloat16: rows of W converted to float per block (0 = the
  /// default, as FusedLinearCrossEntropyOptions::convert_block_rows).
  std::int64_t convert_block_rows = 0;
  /// Backward tiles to skip, each rank over its own classes (see
  /// kloss::GradFilter; the report is this rank's).
  GradFilter grad_filter = GradFilter::exact;
  /// The threshold of GradFilter::threshold (> 0).
  double grad_filter_threshold = 0.0;
  /// The library of the head's products (as FusedLinearCrossEntropyOptions).
  HeadProducts products = HeadProducts::automatic;
  /// float32 on cuBLAS in the TF32 mode (as FusedLinearCrossEntropyOptions).
  bool allow_tf32 = false;
};

}  // namespace kloss::mpi
