#pragma once
/// \file kloss.hpp
/// Umbrella header: every public kloss header.
#include <kloss/checks.hpp>
#include <kloss/cross_entropy.hpp>
#include <kloss/ctc.hpp>
#include <kloss/error.hpp>
#include <kloss/fused_linear.hpp>
#include <kloss/half.hpp>
#include <kloss/pointwise.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <kloss/tensor.hpp>
#include <kloss/types.hpp>
