// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The hostile-call harness shared by test_hostile (a seeded GoogleTest) and
// fuzz/fuzz_runtime_api (libFuzzer): a random source draws one call of a
// registered op - dtypes, shapes (0-sized, 1, odd, mismatched), options
// (valid and out of range), index values (in range, ignore_index,
// negative, past the end, huge), inputs sharing memory - either valid or
// broken in exactly one named way. Three drivers run it:
//  - the runtime-typed API (kloss::rt::run),
//  - the canonical tensor entry points every public overload forwards to
//    (kloss::impl::<op> on unmanaged views), each output in a buffer with
//    guard bytes before and after, pre-filled with garbage, optionally
//    aliasing an input or another output,
//  - the C API (kloss/c_api.h), with its own hostile arguments (dtype ints
//    out of range, NULL pointers, negative ranks and extents, wrong sizes).
// The contract each call must meet: a valid call matches the float64
// reference of unit_tests/reference.hpp within the dtype's tolerance; an
// invalid one throws kloss::Error (the C API: returns an error status)
// whose message names the op and the offending argument; never a crash, a
// write outside the outputs (guards intact), a write to an input, a
// non-kloss exception, or a silent wrong number.
//
// Its parts, under hostile/, each including what it uses:
//   core.hpp            the random source, the call (Case), values, options,
//                       the registry's look-ups (op families), breakages
//   classes.hpp         class indices and cross-entropy options, shared by
//                       the families that take them
//   check.hpp           what a valid call must give (Expected), tolerances,
//                       verdicts
//   typed_run.hpp       a typed call's guarded, aliased buffers (TypedRun)
//   <family>.hpp        one per op family, named as its header
//                       kloss/<family>.hpp (pointwise, cross_entropy, margin,
//                       ctc, embedding, fused_linear, ensemble, grid): its
//                       generator, float64 reference and typed calls
//   dispatch.hpp        each op to its family by the registry; a whole call
//                       (generate) and its reference (reference)
//   runtime_driver.hpp, typed_driver.hpp, c_driver.hpp   the three drivers
#include "hostile/c_driver.hpp"
#include "hostile/dispatch.hpp"
#include "hostile/runtime_driver.hpp"
#include "hostile/typed_driver.hpp"
