// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file preprocessor.hpp
/// The preprocessor helper the binary losses' table is expanded with
/// (KLOSS_BINARY_LOSSES, kloss/binary_losses.hpp, which includes this
/// header): its users (src/pointwise.cpp, unit_tests/hostile.hpp,
/// perf_tests/bench_pointwise.cpp) pick a macro by a table field.

/// Pastes a prefix onto the first token of a table field: with
/// option = real(beta, ...), KLOSS_PP_CAT(P_, option) is P_real(beta, ...).
#define KLOSS_PP_CAT(a, b) KLOSS_PP_CAT_(a, b)
#define KLOSS_PP_CAT_(a, b) a##b
