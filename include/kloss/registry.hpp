// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file registry.hpp
/// One registry describes every op once (docs/design.md, principle 2): its torch
/// name, inputs, differentiable inputs, options with defaults, and the
/// runtime-typed entry points; each family registers its ops in
/// `src/<family>.cpp`. The runtime-typed API, the C API (and through it the
/// Fortran module and the Python binding), kloss-validate, kloss-ops (the
/// README's op table) and the test harness read it.
#include <kloss/config.hpp>
#include <kloss/runtime.hpp>
#include <kloss/vocab_range.hpp>

#include <functional>
#include <string_view>
#include <vector>

#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
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
#ifdef KLOSS_HAVE_MPI
  /// Vocabulary-parallel run (empty where the op has none): the call's
  /// vocabulary-sized inputs hold only this rank's slice. Collective.
  std::function<rt::Result(const rt::Call&, const VocabShard&)> run_vocab_parallel = {};
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
}  // namespace impl

}  // namespace kloss
