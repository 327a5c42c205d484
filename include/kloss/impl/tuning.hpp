// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/tuning.hpp
/// Every tuning constant of kloss's kernels, each with where and when it was
/// measured. Change them here, nowhere else.
///
/// Every kernel picks its launch shape with one question, is_host_space_v:
/// host spaces (Serial, OpenMP, Threads, HPX) give a thread a whole row or a
/// long chunk and vectorise a lane loop; every other space (CUDA, HIP, SYCL,
/// OpenMPTarget) is a device, whose threads must read consecutive elements.
/// The answer depends on the execution space, not on which memory it can
/// reach: a GPU with unified memory (GH200, MI300A, CUDA UVM) still wants
/// device shapes.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kloss::impl {

template <class ExecSpace>
struct is_host_space : std::false_type {};
#if defined(KOKKOS_ENABLE_SERIAL)
template <>
struct is_host_space<Kokkos::Serial> : std::true_type {};
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
template <>
struct is_host_space<Kokkos::OpenMP> : std::true_type {};
#endif
#if defined(KOKKOS_ENABLE_THREADS)
template <>
struct is_host_space<Kokkos::Threads> : std::true_type {};
#endif
#if defined(KOKKOS_ENABLE_HPX)
template <>
struct is_host_space<Kokkos::Experimental::HPX> : std::true_type {};
#endif
/// True for host execution spaces; false for device ones.
template <class ExecSpace>
inline constexpr bool is_host_space_v = is_host_space<std::remove_cv_t<ExecSpace>>::value;

}  // namespace kloss::impl

namespace kloss::impl::tuning {

/// Element-wise engine (impl/engine_elementwise.hpp): elements per work item on
/// host spaces, and independent double partial sums per work item in the
/// reductions (lets GCC vectorise the lane loop without -ffast-math).
/// Measured 2026-11-22 on the 2-core EPYC (AVX-512, GCC 12, -O3
/// -march=native, machine shared and loaded), per element in L2, float32:
///   lanes     8     16    32
///   mse     0.15  0.12  0.11 ns
///   bce     2.61  2.26  2.11 ns
///   bce_logits 3.15 2.08 2.08 ns
///   kl_div  1.19  0.85  0.86 ns
/// 16 lanes = one zmm of floats computed, two zmm of double sums; 32 adds
/// nothing. chunk 4096 (16 KiB of float per operand) keeps the per-chunk
/// overhead (one Kokkos reduction join, one tail) below 1 %.
inline constexpr std::int64_t pointwise_chunk = 4096;
inline constexpr int pointwise_lanes = 16;
/// Losses buffered per block before they are summed (host spaces; a float
/// buffer of 256 is 1 KiB of L1). binary_cross_entropy float forward, 16M
/// elements, Zen 4: 0.81 ns/element at 64, 0.72 at 256, 0.71 at 1024.
inline constexpr int pointwise_sum_block = 256;
/// float16 operands read and results written per block by the host
/// element-wise kernels (impl::OperandBlock): this many values widened
/// into a float buffer, computed, and stored by one block conversion
/// (impl::floats_to_bits_block; 4 vcvtps2ph on AVX-512). 64 is 256 bytes
/// of float per operand, a multiple of every block conversion's width.
inline constexpr int pointwise_store_block = 64;
/// Device spaces: 16-byte packs of each operand per work item (4 floats, 8
/// bfloat16 a pack), item c's k-th pack at pack index k x items + c, so
/// consecutive threads read consecutive packs (coalesced) and each thread
/// keeps this many loads per operand in flight. Chosen, not measured on a
/// GPU: 4 packs = 64 bytes per operand per thread, the depth a stream
/// needs to cover DRAM latency at full occupancy on an H100 / H200.
inline constexpr int pointwise_device_packs = 4;
/// Test hook: non-zero runs the element-wise losses' device kernels (16-byte
/// packs, ExactMath) on host spaces too, so that CI runs them. Set by the
/// test programs only (unit_main.cpp reads KLOSS_TEST_POINTWISE_DEVICE).
inline int test_pointwise_device = 0;

// --- row engine, online-softmax rows (impl/engine_rows*.hpp) ---------------
/// Independent lanes of the online log-sum-exp row loop: 16 floats = one
/// AVX-512 register, so GCC vectorises the per-lane max/sum and the inline
/// exp without reassociating. Measured 2026-11-22 (2-core EPYC, Serial,
/// GCC -O3 -march=native, (128, 32000) float32 row pass alone): 16, 32 and
/// 64 lanes within 5 % of each other (about 1.45 ms); a two-step block
/// variant (block max, then one exp per element) was slower under GCC.
inline constexpr int ce_lanes = 16;
/// The same loop in device code (a thread's slice of a strided row, or a
/// whole row under row_slices = 1): a warp's lanes already run 32 slices
/// side by side, and 16 running maxima and sums per thread are 48 registers
/// that every row kernel holding the loop reserves. Measured on an H200
/// (docs/gpu.md): with 2, the forward's registers fell from 168 to 114
/// (float) and 128 (bfloat16) per thread, two 256-thread teams a
/// multiprocessor instead of one.
inline constexpr int ce_lanes_device = 2;
/// The largest |lse| whose saved value the cross-entropy backward uses as
/// it is; a row beyond it (or with a confident target) takes its shift from
/// its partials again (impl::ce_saved_lse_is_coarse). 64 in float: the lse's
/// rounding, at most 64 x 2^-24 = 4e-6, moves each softmax_c by at most 32
/// ulp, about torch's own error where log softmax_c is near -64. Larger
/// logits (an unscaled head, logits shifted by 1e4) cost the backward one
/// more read of those rows and keep the digits torch's log_softmax keeps.
inline constexpr double ce_saved_lse_limit = 64;
/// Logits per batch of the strided cross-entropy backward (read all, then
/// write all: reads in flight per thread) - a device's lanes, and on any
/// space K-dimensional input or row_slices > 1.
inline constexpr int ce_bwd_batch = 8;
/// Threads per team: host spaces give each thread whole rows (team of 1);
/// on devices a team thread is a warp of vector lanes, one row at a time.
/// Chosen, not measured on a device (none here).
inline constexpr int ce_team_size_host = 1;
inline constexpr int ce_team_size_device = 8;
/// The device form of the contiguous rows (impl/engine_rows_softmax.hpp,
/// impl/packs.hpp' RowPacks): 16-byte packs per lane per group, 4 = 64
/// bytes in flight per lane (16 float / 32 bfloat16 logits), as the
/// element-wise device form. Chosen, not measured on a device.
inline constexpr int ce_device_packs = 4;
/// Test hook: non-zero gives cross_entropy, nll_loss's backward, the fused
/// heads' rows and the vocabulary-parallel cross-entropy the device's row
/// mapping on host spaces too (each row over 32 lanes, in the device form
/// for contiguous rows; the host's team size), so that CI runs it. Set by the test programs only (unit_main.cpp
/// reads KLOSS_TEST_CE_DEVICE).
inline int test_ce_device = 0;
/// Interleaved class slices per row on devices: one per lane of a warp, so
/// a warp reads 32 consecutive logits per load (host spaces: 1, the whole
/// row). With ce_team_size_device rows a team is 8 warps (256 threads).
/// Chosen, not measured on a device (none here).
inline constexpr int ce_row_slices_device = 32;
/// With fewer rows than workers (ce_split_host_workers; device warps, concurrency
/// / 32), cross_entropy splits each row into contiguous class segments run
/// by different teams (a second kernel merges the forward's partials); a
/// segment keeps at least this many classes, so the merge and the extra
/// launch stay small against the segment's read. Chosen, not measured.
inline constexpr std::int64_t ce_split_min_classes = 8192;
/// The worker count the few-rows split is sized for on host spaces: a
/// constant rather than the space's concurrency, so that the split, and with
/// it the bits of the forward's log-sum-exp, do not change with the number
/// of threads (one thread pays a few merges of segment partials: nothing
/// against the segments' reads).
inline constexpr std::int64_t ce_split_host_workers = 64;
/// Elements (rows x C) per team: small vocabularies pack many rows into one
/// team so the league is not dominated by launch overhead; at C >= 64K a team
/// is one row. Chosen (2026-11-22), insensitive on Serial.
inline constexpr std::int64_t ce_block_elements = std::int64_t(1) << 16;

// --- chunked head (impl/engine_chunked_head.hpp) ---------------------------
/// Default logits-chunk scratch: 1/12 (8.3 %) of the full N x V float
/// logits, at most 512 MiB, never fewer than 64 rows: the extra memory of a
/// call stays under 10 % of the logits with the products' own workspace
/// (docs/fused_linear.md). Time falls as the chunk grows: each chunk reads
/// all of W twice and accumulates all of grad_weight once, an overhead of
/// about 1 / B of the product work, and small chunks multiply at a lower
/// rate (the table in docs/fused_linear.md).
inline constexpr std::int64_t fl_default_budget_bytes = std::int64_t(512) << 20;
inline constexpr std::int64_t fl_default_budget_divisor = 12;
inline constexpr std::int64_t fl_min_chunk_rows = 64;
/// 16-bit inputs: W is converted to float in blocks of
/// fl_convert_block_elements / D rows (at least fl_min_convert_block_rows):
/// 2 MiB of float per block, enough for the gemm to run at full rate.
inline constexpr std::int64_t fl_convert_block_elements = std::int64_t(1) << 19;
inline constexpr std::int64_t fl_min_convert_block_rows = 64;
/// dW += dZ^T X_c runs in blocks of fl_grad_weight_block_elements / B rows
/// of dW (at least fl_min_grad_weight_block_rows): OpenBLAS packs a call's
/// whole B x rows operand into its workspace (measured: one call over V =
/// 128256 at B = 256 grew the resident set by 103 MB; blocked, ~1 MB).
inline constexpr std::int64_t fl_grad_weight_block_elements = std::int64_t(1) << 18;
inline constexpr std::int64_t fl_min_grad_weight_block_rows = 256;
/// grad_bias on hosts: columns per work item of the row-by-row column sums.
inline constexpr std::int64_t fl_host_column_block = 1024;
/// Devices: token chunks of at least this many rows by default (whatever
/// the budget: the tensor cores reach their rate only on products of about
/// this many rows, and each chunk is one grad_weight product); at (8192,
/// 2048, 128256) bfloat16 that is 788 MB of chunk (float logits and their
/// bfloat16 copy) against 4.2 GB of float logits.
inline constexpr std::int64_t fl_device_min_chunk_rows = 1024;
/// Devices: the default chunk scratch (float logits and, with 16-bit
/// operands, their 16-bit gradient), 2 GiB: at (8192, 2048, 128256)
/// bfloat16 chunks of 2789 rows, one chunk at (4096, 2048, 32000). Larger
/// chunks mean fewer passes over grad_weight (each chunk reads and writes
/// it once) and larger products; measured on an H200 (docs/gpu.md), 2048-
/// and 4096-row chunks ran the bfloat16 heads 4-8 % faster than 1024-row
/// ones, float32 3-6 %.
inline constexpr std::int64_t fl_device_default_budget_bytes = std::int64_t(2) << 30;
/// Devices: a chunk's logits (and its 16-bit dL/dZ) lie in rows of V
/// rounded up to a multiple of this many elements (256 bytes of float), so
/// that every row starts on a 256-byte boundary: whole 16-byte packs for
/// the row kernel, 16-byte aligned leading dimensions for the products'
/// 16-bit tensor-core kernels. V = 50257 (GPT-2's vocabulary) would put
/// nearly every row off both.
inline constexpr std::int64_t fl_device_ld_elements = 64;
/// The vocabulary-parallel head's chunk on hosts when its chunk_bytes is 0
/// (automatic): 64 MiB of logits per rank (the main job's 1024-token batch
/// at 25128 classes a rank is 667-row chunks).
inline constexpr std::int64_t vp_fl_host_chunk_bytes = std::int64_t(64) << 20;
/// Test hook: non-zero runs the fused heads' device schedule on host spaces
/// (the 16-bit dL/dZ in a buffer of its own instead of over the chunk's
/// floats, the device's chunk rows), so that CI runs it. Set by the test
/// programs only (unit_main.cpp reads KLOSS_TEST_FUSED_DEVICE_SCHEDULE).
inline int test_fl_device_schedule = 0;

// --- ctc_loss (impl/ctc_impl.hpp) ---------------------------------------
/// ctc_loss: extended-label states (and classes, in the gradient rows) per
/// work item on host execution spaces - one plain loop the compiler
/// vectorises (16 floats per AVX-512 register, 4 registers). Device spaces
/// use one state per thread. Chosen, not measured.
inline constexpr int ctc_host_chunk = 64;
/// ctc_loss keeps its rolling lattice rows (the forward's two alpha rows,
/// the backward's two beta rows and gamma) in team scratch, level 0
/// (on-chip on GPUs), when they take at most this many bytes (2 * max
/// target length + 1 states a row): up to a max target length of ~1300
/// (float) or ~680 (double) in the backward. Chosen: below the 48 KiB a
/// CUDA block gets without opting in, on every space alike.
inline constexpr std::size_t ctc_team_scratch_bytes = 32 * 1024;

// --- scatter engine, embedding family (impl/engine_scatter.hpp) -----------
/// Output rows (embedding forward) or input positions (atomic backward) or
/// grad_weight rows (sorted backward) per team: amortises the team launch
/// on CPU backends, where a team is one thread and a row of D = 64..768
/// is little work. Measured 2026-11-22, 2-core EPYC, Serial, (50257, 768):
/// 1 vs 8 vs 32 rows per team within noise for D = 768; 8 kept for D = 64.
inline constexpr std::int64_t embedding_rows_per_team = 8;
/// Host embedding backward (owner computes): grad_weight is cut into row
/// blocks while each keeps at least embedding_owner_min_rows rows, and
/// into feature blocks no narrower than embedding_owner_min_features (4
/// AVX-512 registers of floats) only below that. Measured 2026-11-24,
/// 2-core EPYC, Kokkos 4.7 OpenMP, bench_embedding (262144 indices into
/// (50257, 768)): two feature blocks take 107 ms at 1 thread and 119 ms at
/// 2 (each thread reads half of every upstream row), two row blocks 107
/// and 76 ms (docs/thread-scaling.md). The row minimum is chosen.
inline constexpr std::int64_t embedding_owner_min_rows = 64;
/// Sorted embedding backward on device spaces: a row's segment of sorted
/// positions longer than this is sorted by a team of
/// embedding_sort_team_size threads (a sorting network), a shorter one by
/// one thread (insertion sort). Chosen, not measured on a GPU: a frequent
/// token (padding) can hold most of a batch's positions, which one thread
/// would sort alone.
inline constexpr std::int64_t embedding_team_sort_min = 32;
inline constexpr int embedding_sort_team_size = 128;
/// Test hook: non-zero sorts every segment of two or more positions with
/// the team network on every space (host spaces too, with one thread a
/// team), so that CI runs the device path; 0 (the default) chooses by
/// space. Set by the test programs only (unit_main.cpp reads
/// KLOSS_TEST_EMBEDDING_TEAM_SORT).
inline int test_embedding_team_sort = 0;
inline constexpr std::int64_t embedding_owner_min_features = 64;
/// Vector lanes per team thread (the embedding dimension runs across
/// them); 0 = Kokkos::AUTO (1 on CPU backends, the backend's choice on
/// GPUs). Not measured on a GPU.
inline constexpr int embedding_vector_length = 0;
/// Features per chunk of the embedding dimension: a chunk's accumulators
/// live in a local array (registers) and its loop over features has a
/// compile-time trip count, so it vectorises (16 floats = one AVX-512
/// register). Measured 2026-11-22, 2-core EPYC (loaded), Serial,
/// embedding_bag sum (1e6, 64) x 65536 bags of 20, CPU time: team-scratch
/// accumulators ~320 ms, 16-wide register chunks ~95 ms (with the mode
/// and per-sample-weight tests hoisted out of the kernel; with them inside
/// ~350 ms).
inline constexpr int embedding_chunk = 16;
/// The same for embedding_bag's forward on host execution spaces (one
/// thread per team, so nothing is lost by giving it fewer, wider chunks):
/// a whole D = 64 row per entry in one go (4 AVX-512 registers of
/// accumulators) reads each gathered row's four cache lines together and
/// keeps several rows' misses in flight. Measured 2026-11-22, 2-core EPYC
/// (load average 5-6), Serial, embedding_bag sum (1e6, 64) x 65536 bags
/// of 20, best of 5: 16 -> ~1000 ms, 32 -> ~450 ms, 64 -> ~370 ms. The
/// per-feature sums keep entry order, so results do not depend on it.
inline constexpr int embedding_chunk_host = 64;
/// embedding_bag forward on host spaces: while summing bag b, prefetch the
/// rows of bag b + embedding_prefetch_bags_ahead (random rows of a large
/// table: DRAM latency, not bandwidth, bounds the gather).
inline constexpr std::int64_t embedding_prefetch_bags_ahead = 2;

// --- margin family (impl/margin_*.hpp) --------------------------------------
/// The element-wise margin losses (hinge_embedding, margin_ranking) run on
/// the element-wise engine and its constants (pointwise_chunk, pointwise_lanes).
/// Row-wise margin losses: independent partial sums per row (lets GCC
/// vectorise the row loop without -ffast-math). Chosen, not tuned: 8
/// floats or doubles per partial vector (2026-11-22, 2-core EPYC, Serial;
/// no other value was measured).
inline constexpr int margin_lanes = 8;
/// Row-wise margin losses on device spaces, on the row engine
/// (impl/engine_rows.hpp): a row per team thread, its elements in this many
/// interleaved slices over the thread's vector lanes (a warp: consecutive
/// lanes read consecutive elements), rows per team as cross-entropy's
/// device teams. Chosen, as cross-entropy's launch; not measured on a GPU.
inline constexpr int margin_row_slices_device = 32;
inline constexpr int margin_rows_per_team_device = 8;
/// Test hook: > 0 runs the row-wise margin losses on the device mapping
/// with this many slices on every space (host spaces too), so that CI runs
/// the device kernels; 0 (the default) chooses by space. Set by the test
/// programs only (unit_main.cpp reads KLOSS_TEST_MARGIN_ROW_SLICES).
inline int test_margin_row_slices = 0;
/// multilabel_margin_loss keeps a per-row int32 flag array of C entries in
/// team scratch; up to this many bytes it goes to level 0 (on-chip on GPUs),
/// beyond it to level 1. 32 KiB fits every GPU's shared memory.
inline constexpr std::int64_t margin_scratch_level0_bytes = 32 * 1024;

}  // namespace kloss::impl::tuning
