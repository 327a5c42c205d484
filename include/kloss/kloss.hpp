// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file kloss.hpp
/// Umbrella header: every public kloss header (the MPI and HDF5 ones when
/// kloss was built with them) but kloss/version.hpp, whose git hash
/// changes with every configured commit: include it where the version is
/// asked for, so that only those files are rebuilt.
#include <kloss/check_flag.hpp>
#include <kloss/checks.hpp>
#include <kloss/config.hpp>
#include <kloss/cross_entropy.hpp>
#include <kloss/cross_entropy_loss.hpp>
#include <kloss/cross_entropy_options.hpp>
#include <kloss/ctc.hpp>
#include <kloss/embedding.hpp>
#include <kloss/embedding_options.hpp>
#include <kloss/ensemble.hpp>
#include <kloss/error.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/fused_linear_options.hpp>
#include <kloss/grid.hpp>
#include <kloss/half.hpp>
#include <kloss/losses.hpp>
#include <kloss/margin.hpp>
#include <kloss/pointwise.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <kloss/scratch.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
#ifdef KLOSS_HAVE_MPI
#include <kloss/mpi.hpp>
#include <kloss/sharded.hpp>
#endif
#ifdef KLOSS_HAVE_HDF5
#include <kloss/golden.hpp>
#endif
