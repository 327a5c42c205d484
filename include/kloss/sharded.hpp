// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file sharded.hpp
/// Every registered loss over a domain decomposition (namespace kloss::mpi):
/// each rank of a Communicator holds a shard of the batch - its grid cells,
/// rows or samples, any number of them, none included - and the call
/// returns the loss of the whole batch, the same value on every rank.
///
/// A loss with reduction `mean` is a sum over a denominator (the element
/// count, the sum of the weights, the counted targets' class weights, the
/// batch: the op's OpInfo::mean_parts, kloss/registry.hpp). Each rank
/// computes its part of both; one collective adds them in rank order, and
/// the global mean is the global sum over the global denominator - not the
/// mean of the ranks' means, which is wrong whenever the ranks hold
/// different numbers of counted elements. The backward scales each rank's
/// gradient by the same global denominator.
/// Needs KLOSS_ENABLE_MPI (the kloss target then defines KLOSS_HAVE_MPI).
#include <kloss/communicator.hpp>
#include <kloss/runtime.hpp>

namespace kloss::mpi {

/// Options of the sharded call.
struct ShardedOptions {
  /// The same bits on any decomposition: the loss and the gradients of a
  /// reduced call are bitwise identical for any number of ranks, any split
  /// of the batch over them and any thread count (docs/sharded.md,
  /// "Reproducible mode"). Each rank computes its elements' terms (the
  /// `none` reduction) and adds them exactly (kloss::ExactSum::add_all,
  /// whose ranks' parts are added as integers); the denominator is exact
  /// too, and each element's gradient is taken with the global denominator
  /// alone (an upstream gradient g / D); the element-wise kernels run libm's
  /// exp and log (vmath's ExactMathOnly). Costs one more forward (the
  /// `none` terms), their exact sum and two more MPI_Allreduce of 568
  /// bytes (the denominator, the numerator). Not for the grid losses
  /// (their norms are no sums of terms): NotImplemented.
  bool reproducible = false;
};

/// Runs `call` (kloss/runtime.hpp) as this rank's shard of one loss over
/// the ranks of `comm`, on Kokkos::DefaultExecutionSpace.
///
/// Collective: every rank calls it with the same op, dtypes, options and
/// upstream gradient, and with its own shard of the inputs that run along
/// the batch (rows, elements, samples); inputs that are not per sample
/// (cross_entropy's class weights) are the whole tensor on every rank.
/// - reduction `mean` (kl_div's `batchmean`): the sum over all ranks
///   divided by the denominator over all ranks, on every rank;
/// - `sum`: the sum over all ranks, on every rank;
/// - `none`: this rank's elements (the ranks still agree on the call).
/// With a grad_output (a scalar for `mean` and `sum`, the same on every
/// rank), Result::grads holds the gradients of this rank's inputs: the
/// gradients of the global loss. Partial sums travel and are added in
/// double, in rank order, so every rank gets the same bits.
/// float16 and bfloat16 calls compute in float32 and round once.
///
/// Communication: one MPI_Allgather of 128 bytes per rank, which carries
/// the partial sums and checks that the ranks agree (op, dtypes, options,
/// the inputs given and their ranks, the upstream gradient); a `mean` with
/// a gradient gathers its denominator first and runs the shard with the
/// upstream gradient over it (in float32 and float64, without a weight that
/// sums into the denominator, the gradients are final where the op writes
/// them), then gathers the numerators in a second 128-byte round.
/// Borrowed inputs are read where they are, and results are written into
/// the call's borrowed destinations (rt::Call::output_to, grads_to), as
/// rt::run does. A rank whose
/// own checks fail makes every rank throw its kloss::Error ("... (on rank
/// r)"); ranks that disagree all throw MpiError; none waits forever.
/// The grid losses (lp_loss, h1_loss) take a shard as a slab of grid axis
/// 0 of every function, or a block of a Cartesian communicator's process
/// grid, and run decomposed, halos exchanged (OpInfo::run_decomposed,
/// kloss/grid_mpi.hpp).
/// Throws NotImplemented for an op without a reduction (embedding,
/// embedding_bag: run them on each rank's shard with kloss::rt::run).
/// `options.reproducible`: see ShardedOptions; the ranks must agree on it.
rt::Result run_sharded(const Communicator& comm, const rt::Call& call, const ShardedOptions& options = {});

}  // namespace kloss::mpi
