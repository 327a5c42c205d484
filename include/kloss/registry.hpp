// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file registry.hpp
/// One registry describes every op once (docs/design.md, principle 2): its torch
/// name, inputs, differentiable inputs, options with defaults, and the
/// runtime-typed entry points; each family registers its ops in
/// `src/<family>.cpp`. The runtime-typed API, the C API (and through it the
/// Fortran module and the Python binding), kloss-validate, kloss-ops (the
/// README's op table) and the test harness read it.
#include <functional>
#include <kloss/config.hpp>
#include <kloss/exact_sum.hpp>
#include <kloss/runtime.hpp>
#include <kloss/vocab_range.hpp>
#include <string_view>
#include <vector>

#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
#endif

#ifdef KLOSS_HAVE_MPI
namespace kloss::mpi {
class Communicator;
}
#endif

namespace kloss {

/// One option of an op, as torch's keyword.
struct OptionInfo {
  std::string_view name;           ///< torch's keyword, e.g. "reduction"
  std::string_view type;           ///< "real", "int", "bool", "string"
  std::string_view default_value;  ///< torch's default, as text
  std::string_view doc;            ///< one line on what the option does
};

#ifdef KLOSS_HAVE_MPI
/// How the vocabulary is split for a vocabulary-parallel run: this rank owns
/// classes (or embedding rows) [begin, begin + count) of `total`, over comm.
struct VocabShard : VocabRange {
  MPI_Comm comm = MPI_COMM_NULL;  ///< the ranks that share the vocabulary
};
#endif

/// How an op's reduced loss splits over shards of its batch
/// (kloss::mpi::run_sharded, kloss/sharded.hpp): with reduction `mean` (or
/// kl_div's `batchmean`) the loss is a numerator over a denominator, and
/// both are sums over the shards.
struct MeanParts {
  /// The denominator of this call's inputs for reduction `mean` or
  /// `batchmean`: the element count, the sum of the weights (mse_loss and
  /// l1_loss with weight=), the counted targets' class weights
  /// (cross_entropy, nll_loss), the batch (kl_div's batchmean, ctc_loss).
  /// Empty for an op without a reduction. May throw kloss::Error on bad
  /// input. Exact (a sum of weights in any order has the same bits), so
  /// that the sharded call's reproducible mode can add the ranks' parts.
  std::function<ExactSum(const rt::Call&, Reduction)> denominator;
  /// The numerator is the `sum` reduction's value (true), or the `mean`'s
  /// times the denominator (ctc_loss: its mean divides each sample's loss by
  /// its target length before the batch mean; its sum does not).
  bool sum_is_numerator = true;
  /// The differentiable input the denominator sums (mse_loss and l1_loss:
  /// "weight"): its gradient carries the mean's own dependence on it.
  std::string_view denominator_input = {};
  /// For a numerator that is not the `sum` (ctc_loss): the factor of each
  /// element of the `none` output in the mean's numerator (ctc_loss: 1 /
  /// max(target length, 1)). The reproducible mode sums the terms of the
  /// `none` output; empty where each element counts once.
  std::function<std::vector<double>(const rt::Call&)> term_factors = {};
  /// The derivative of the denominator w.r.t. each element of
  /// denominator_input (a masked loss: the counted elements each weight
  /// element meets); empty where it is 1 for every element (torch's
  /// weight=, whose mean divides by the weight's own sum).
  std::function<std::vector<double>(const rt::Call&)> denominator_derivative = {};
};

/// One registered op: what kloss-ops lists and what the runtime-typed API
/// (kloss/runtime.hpp) and kloss-validate call.
struct OpInfo {
  std::string_view name;                         ///< torch's name, e.g. "cross_entropy"
  std::string_view header;                       ///< the public header, e.g. "kloss/cross_entropy.hpp"
  std::vector<std::string_view> inputs;          ///< torch's argument names; a trailing '?' marks optional
  std::vector<std::string_view> differentiable;  ///< the inputs that have a gradient
  std::vector<OptionInfo> options;               ///< torch's keywords, with their defaults
  std::string_view summary;                      ///< one line on what the op computes
  /// Runs the op on a call's inputs and options: the forward, and the
  /// backward when the call gives a grad_output.
  std::function<rt::Result(const rt::Call&)> run;
  /// Inputs that hold integer indices (class indices, lengths, offsets):
  /// int64 datasets in a golden file (docs/golden-schema.md, "Ops").
  std::vector<std::string_view> index_inputs = {};
  /// Inputs that hold either indices or real values (cross_entropy's
  /// target: class indices or probabilities).
  std::vector<std::string_view> index_or_real_inputs = {};
  /// Its mean as numerator over denominator, each a sum over shards of the
  /// batch (what kloss::mpi::run_sharded reduces); empty without a reduction.
  MeanParts mean_parts = {};
#ifdef KLOSS_HAVE_MPI
  /// Vocabulary-parallel run (empty where the op has none): the call's
  /// vocabulary-sized inputs hold only this rank's slice. Collective.
  std::function<rt::Result(const rt::Call&, const VocabShard&)> run_vocab_parallel = {};
  /// Run over a grid split over the ranks - in slabs of its first axis, or
  /// in blocks along a Cartesian communicator's dimensions (the grid
  /// losses, kloss/grid_mpi.hpp) - what kloss::mpi::run_sharded calls
  /// instead of reducing mean_parts; empty for the other ops. Collective.
  std::function<rt::Result(const rt::Call&, const mpi::Communicator&)> run_decomposed = {};
#endif
};

/// Every registered op, in a stable order.
const std::vector<OpInfo>& ops();
/// The op named `name`, or nullptr.
const OpInfo* find_op(std::string_view name);

namespace impl {
// One registration function per op family (src/\<family\>.cpp).
void register_pointwise(std::vector<OpInfo>&);
void register_cross_entropy(std::vector<OpInfo>&);
void register_margin(std::vector<OpInfo>&);
void register_ctc(std::vector<OpInfo>&);
void register_embedding(std::vector<OpInfo>&);
void register_fused_linear(std::vector<OpInfo>&);
void register_ensemble(std::vector<OpInfo>&);
void register_grid(std::vector<OpInfo>&);
}  // namespace impl

}  // namespace kloss
