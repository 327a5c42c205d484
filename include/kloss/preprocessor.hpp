// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file preprocessor.hpp
/// The few preprocessor helpers kloss's tables are expanded with: the
/// binary losses' lines (KLOSS_BINARY_LOSSES, kloss/binary_losses.hpp) and
/// the explicit-instantiation lines of KLOSS_LOSS_INSTANTIATE
/// (kloss/checks.hpp; margin.hpp's instance lists).

/// Pastes a prefix onto the first token of a table field: with
/// option = real(beta, ...), KLOSS_PP_CAT(P_, option) is P_real(beta, ...).
#define KLOSS_PP_CAT(a, b) KLOSS_PP_CAT_(a, b)
#define KLOSS_PP_CAT_(a, b) a##b

/// The elements of a parenthesised list: KLOSS_PP_EXPAND (a, b) is a, b.
#define KLOSS_PP_EXPAND(...) __VA_ARGS__
/// The first element of a list: KLOSS_PP_FIRST (a, b) is a.
#define KLOSS_PP_FIRST(...) KLOSS_PP_FIRST_(__VA_ARGS__, )
#define KLOSS_PP_FIRST_(a, ...) a
/// The second element of a pair: KLOSS_PP_SECOND (a, b) is b.
#define KLOSS_PP_SECOND(a, b) b
/// M(args...) after the arguments are expanded, so that a list built by a
/// macro counts as several arguments of M.
#define KLOSS_PP_CALL(M, ...) M(__VA_ARGS__)
/// Separators for KLOSS_PP_MAP.
#define KLOSS_PP_COMMA() ,
#define KLOSS_PP_NOTHING()

/// F(D, x1) S() F(D, x2) S() ... F(D, xn) for the n (1 to 9) elements of a
/// parenthesised list, D passed to each: KLOSS_PP_MAP(F, D, KLOSS_PP_COMMA,
/// (a, b)) is F(D, a), F(D, b).
#define KLOSS_PP_MAP(F, D, S, list) KLOSS_PP_MAP_(F, D, S, KLOSS_PP_EXPAND list)
#define KLOSS_PP_MAP_(F, D, S, ...) KLOSS_PP_CAT(KLOSS_PP_MAP_, KLOSS_PP_COUNT(__VA_ARGS__))(F, D, S, __VA_ARGS__)
#define KLOSS_PP_COUNT(...) KLOSS_PP_COUNT_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, )
#define KLOSS_PP_COUNT_(x1, x2, x3, x4, x5, x6, x7, x8, x9, n, ...) n
#define KLOSS_PP_MAP_1(F, D, S, x) F(D, x)
#define KLOSS_PP_MAP_2(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_1(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_3(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_2(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_4(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_3(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_5(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_4(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_6(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_5(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_7(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_6(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_8(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_7(F, D, S, __VA_ARGS__)
#define KLOSS_PP_MAP_9(F, D, S, x, ...) F(D, x) S() KLOSS_PP_MAP_8(F, D, S, __VA_ARGS__)
