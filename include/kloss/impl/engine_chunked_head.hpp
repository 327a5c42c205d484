// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/engine_chunked_head.hpp
/// The chunked head: a linear layer followed by a row loss, and its
/// gradients, without the [N, V] logits (Liger-Kernel's scheme). It serves
/// fused_linear_cross_entropy (impl/fused_linear_impl.hpp) and its
/// vocabulary-parallel twin (impl/mpi_fused_impl.hpp), each with its rows.
///
/// The N tokens are processed in chunks of B rows, B chosen from a scratch
/// budget (never from N x V). Per chunk:
///   Z = X_c W^T + b                          product   [B, V]
///   the rows: loss, and dL/dZ written over Z in place, or rounded to T
///            into a 16-bit buffer on the device schedule (the caller's row
///            kernel: cross_entropy's online-softmax rows,
///            impl/engine_rows_softmax.hpp; the vocabulary-parallel op adds
///            its record allreduce)
///   grad_bias    += column sums of dZ
///   grad_input[c] = dZ W                     product   [B, D]
///   grad_weight  += dZ^T X_c                 product   [V, D]
/// The products run on impl/head_products.hpp's layer (oneDNN, cuBLAS,
/// rocBLAS or Kokkos Kernels, in the dtype the library multiplies); the
/// bias is the forward product's.
/// Gradient filtering (GradFilter): a tile of B rows x one vocabulary block
/// whose every |dL/dZ| is below the threshold takes no part in the two
/// backward products (Cut Cross-Entropy's filter); the loss and grad_bias
/// stay exact. With class-index targets the filter looks at dL/dZ without
/// the targets' entries: each row's target entry (the softmax's p_t - 1,
/// large in most rows) is taken out of the chunk's dL/dZ and applied
/// exactly as a sparse update,
///   grad_input[i] += dz_it W[t_i],   grad_weight[t_i] += dz_it X[i],
/// so that a tile is skipped when its softmax part is negligible, whether
/// or not it holds targets (with chunks of thousands of rows nearly every
/// tile holds one).
#include <cstring>
#include <kloss/fused_linear_options.hpp>
#include <kloss/grad_filter.hpp>
#include <kloss/impl/ce_keywords.hpp>
#include <kloss/impl/head_products.hpp>
#include <kloss/impl/scratch.hpp>
#include <kloss/impl/sort.hpp>
#include <kloss/impl/tuning.hpp>
#include <kloss/tensor.hpp>
#include <vector>

namespace kloss {
namespace impl {

/// Whether the fused heads run their device schedule on ExecSpace: on
/// devices, and on hosts under the test hook tuning::test_fl_device_schedule.
template <class ExecSpace>
bool fl_device_schedule() {
  return !is_host_space_v<ExecSpace> || tuning::test_fl_device_schedule != 0;
}

/// The row stride of a chunk's logits (and of its 16-bit dL/dZ) for V
/// classes: V on hosts, V rounded up to tuning::fl_device_ld_elements
/// under the device schedule (aligned rows for the row kernel's packs and
/// the products' tensor-core kernels). The budget of fl_chunk_rows counts V
/// values a row: the padding adds less than 64 a row.
template <class ExecSpace>
std::int64_t fl_logit_ld(std::int64_t V) {
  if (!fl_device_schedule<ExecSpace>()) return V;
  constexpr std::int64_t m = tuning::fl_device_ld_elements;
  return (V + m - 1) / m * m;
}

/// Scratch bytes per logit of a chunk of a head of dtype T on ExecSpace:
/// the accumulation type's, plus, under the device schedule with 16-bit
/// products, the 16-bit copy of dL/dZ the backward products read
/// (`dz_products`: grad_input or grad_weight wanted).
template <class ExecSpace, class T>
std::int64_t fl_logit_bytes(const HeadPlan& plan, bool dz_products) {
  using A = acc_t<T>;
  const bool copy = !std::is_same_v<T, A> && plan.native && dz_products && fl_device_schedule<ExecSpace>();
  return static_cast<std::int64_t>(sizeof(A) + (copy ? sizeof(T) : 0));
}

/// Rows per chunk for N tokens, V classes, a budget in bytes (0: the
/// default - on hosts a share of the N x V logits in the accumulation type
/// A, at least tuning::fl_min_chunk_rows rows; on devices (`device`, the
/// device schedule) a fixed budget, at least tuning::fl_device_min_chunk_rows
/// rows), with `logit_bytes` of scratch per logit (A's, plus the 16-bit copy
/// of dL/dZ when the products take 16-bit operands on a device).
template <class A>
std::int64_t fl_chunk_rows(std::string_view op, std::int64_t N, std::int64_t V, std::int64_t budget,
                           std::int64_t logit_bytes = sizeof(A), bool device = false) {
  const std::int64_t row_bytes = V * logit_bytes;
  if (budget <= 0) {
    const std::int64_t min_rows = device ? tuning::fl_device_min_chunk_rows : tuning::fl_min_chunk_rows;
    budget = device ? tuning::fl_device_default_budget_bytes : tuning::fl_default_budget_bytes;
    const std::int64_t share = N * V * static_cast<std::int64_t>(sizeof(A)) / tuning::fl_default_budget_divisor;
    const std::int64_t floor = min_rows * row_bytes;
    if (!device && share < budget) budget = share;
    if (budget < floor) budget = floor;
  }
  const std::int64_t rows = row_bytes > 0 ? budget / row_bytes : N;
  if (rows < 1)
    fail<InvalidArgument>(op, "option 'memory_budget_bytes' (", budget, ") is too small for one row of logits (",
                          row_bytes, " bytes)");
  return rows < N ? rows : (N > 0 ? N : 1);
}

/// Rows of W converted per block on the 16-bit path: the float copy of a
/// block (and of its grad_weight block) is about 2 MiB per D = 1024.
inline std::int64_t fl_convert_block_rows(std::int64_t V, std::int64_t D, std::int64_t requested) {
  std::int64_t bv = tuning::fl_convert_block_elements / (D > 0 ? D : 1);
  if (bv < tuning::fl_min_convert_block_rows) bv = tuning::fl_min_convert_block_rows;
  if (requested > 0) bv = requested;
  return bv < V ? bv : (V > 0 ? V : 1);
}

/// Elementwise dst[i] = A(src[i]) or, with Accumulate, dst[i] = T(A(dst[i]) +
/// src[i]) (the 16-bit path's conversions around the float gemms).
template <class ExecSpace, class D, class S>
void fl_convert(const ExecSpace& exec, D* dst, const S* src, std::int64_t n, bool accumulate) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::convert",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, n), KOKKOS_LAMBDA(const std::int64_t e) {
        using A = acc_t<D>;
        const A v = static_cast<A>(src[e]);
        dst[e] = static_cast<D>(accumulate ? static_cast<A>(dst[e]) + v : v);
      });
}

/// Rows of grad_weight per dW += dZ^T X_c gemm: OpenBLAS packs the whole
/// B x (columns of dZ) operand of one call into its workspace, so one call
/// over all V columns would allocate about a second logits chunk; blocks of
/// fl_grad_weight_block_elements / B rows keep that workspace near 1 MiB.
inline std::int64_t fl_grad_weight_block_rows(std::int64_t V, std::int64_t B) {
  std::int64_t bw = tuning::fl_grad_weight_block_elements / (B > 0 ? B : 1);
  if (bw < tuning::fl_min_grad_weight_block_rows) bw = tuning::fl_min_grad_weight_block_rows;
  return bw < V ? bw : (V > 0 ? V : 1);
}

/// The relative threshold of a gradient filter for value type T (0: exact).
template <class T>
double fl_filter_threshold(std::string_view op, GradFilter mode, double user) {
  switch (mode) {
    case GradFilter::exact:
      return 0.0;
    case GradFilter::automatic:
      return grad_filter_auto_threshold<T>();
    case GradFilter::threshold:
      require(user > 0 && std::isfinite(user), op,
              "option 'grad_filter_threshold' must be positive and finite with "
              "grad_filter 'threshold', got ",
              user);
      return user;
  }
  fail<InvalidArgument>(op, "option 'grad_filter' has an unknown value ", static_cast<int>(mode));
}

/// What the chunked head works on: raw pointers into the caller's views
/// (grads null when not wanted), the sizes, the chunk rows B, the 16-bit
/// conversion block, and the absolute filter threshold (0: exact).
template <class T>
struct FusedHeadArgs {
  const T* x = nullptr;     ///< [N, D]
  const T* w = nullptr;     ///< [V, D]
  const T* bias = nullptr;  ///< [V] or null
  T* gx = nullptr;          ///< [N, D] or null
  T* gw = nullptr;          ///< [V, D] or null
  T* gb = nullptr;          ///< [V] or null
  std::int64_t N = 0, D = 0, V = 0, B = 1;
  std::int64_t convert_block_rows = 0;
  double filter = 0;
  /// [N] each row's target column in [0, V), -1 for none (an ignored row,
  /// a target among another rank's classes): with a filter, the targets'
  /// entries of dL/dZ go as a sparse update (see the file comment). Null:
  /// no sparse terms (class-probability targets, or no filter).
  const std::int64_t* target_cols = nullptr;
  HeadPlan plan;      ///< the product library, and whether it multiplies T itself
  bool tf32 = false;  ///< float32 products in the TF32 mode (CUDA, opt-in)
  /// The rows callable can write the chunk's dL/dZ rounded to T into a
  /// buffer of its own (see fused_head_with), saving the device schedule a
  /// pass over the float gradient.
  bool rows_write_16 = false;
  bool want_grad() const { return gx || gw || gb; }
};

/// The FusedHeadArgs of the views of a call (absent views: null), chunks of
/// B rows, products as `products` asks; the filter is set by the caller.
template <class T, class M>
FusedHeadArgs<T> fused_head_args(const Tensor<const T, M>& input, const Tensor<const T, M>& weight,
                                 const Tensor<const T, M>& bias, const Tensor<T, M>& grad_input,
                                 const Tensor<T, M>& grad_weight, const Tensor<T, M>& grad_bias, std::int64_t B,
                                 std::int64_t convert_block_rows, const HeadPlan& plan, bool tf32) {
  FusedHeadArgs<T> a;
  a.x = input.data.data();
  a.w = weight.data.data();
  a.bias = bias.present ? bias.data.data() : nullptr;
  a.gx = grad_input.present ? grad_input.data.data() : nullptr;
  a.gw = grad_weight.present ? grad_weight.data.data() : nullptr;
  a.gb = grad_bias.present ? grad_bias.data.data() : nullptr;
  a.N = input.extent(0);
  a.D = input.extent(1);
  a.V = weight.extent(0);
  a.B = B;
  a.convert_block_rows = convert_block_rows;
  a.plan = plan;
  a.tf32 = tf32;
  return a;
}

/// Largest |dL/dZ| of each vocabulary block of Bv columns of the chunk's
/// logit gradient z [b, V] (row stride ld; NaN counts as +inf: a NaN tile
/// is never skipped). Asynchronous.
template <class ExecSpace, class A>
void fl_tile_max(const ExecSpace& exec, const A* z, std::int64_t b, std::int64_t V, std::int64_t ld, std::int64_t Bv,
                 A* out) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const std::int64_t blocks = (V + Bv - 1) / Bv;
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::tile_max", Policy(exec, static_cast<int>(blocks), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const std::int64_t c0 = static_cast<std::int64_t>(team.league_rank()) * Bv;
        const std::int64_t c1 = c0 + Bv < V ? c0 + Bv : V;
        A m = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, b),
            [&](const std::int64_t i, A& acc) {
              A r = 0;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(team, c1 - c0),
                  [&](const std::int64_t c, A& a) {
                    A v = z[i * ld + c0 + c];
                    v = v < A(0) ? -v : v;
                    if (!(v <= a)) a = v == v ? v : infinity<A>();
                  },
                  Kokkos::Max<A>(r));
              if (!(r <= acc)) acc = r;
            },
            Kokkos::Max<A>(m));
        Kokkos::single(Kokkos::PerTeam(team), [&]() { out[team.league_rank()] = m; });
      });
}

/// Each row's target column among a head's V classes [begin, begin + V)
/// for FusedHeadArgs::target_cols: -1 for an ignored row (`ignore`) or a
/// target outside them. tv: the N class-index targets. Asynchronous.
template <class ExecSpace, class TargetView>
Scratch<std::int64_t, typename ExecSpace::memory_space> fl_target_columns(const ExecSpace& exec, const TargetView& tv,
                                                                          std::int64_t N, std::int64_t begin,
                                                                          std::int64_t V, std::int64_t ignore) {
  auto cols = scratch<std::int64_t>(exec, N);
  std::int64_t* c = cols.data();
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::target_columns",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, N), KOKKOS_LAMBDA(const std::int64_t r) {
        const std::int64_t t = static_cast<std::int64_t>(tv(r));
        c[r] = !ignored(t, ignore) && t >= begin && t < begin + V ? t - begin : -1;
      });
  return cols;
}

/// Takes each row's target entry out of the chunk's dL/dZ z (row stride
/// ld): q[i] = z[i, tc[i]] (0 without a target; rounded to T when `round`,
/// as the backward's 16-bit operands are), and z[i, tc[i]] = 0.
/// Asynchronous.
template <class T, class ExecSpace, class A>
void fl_split_targets(const ExecSpace& exec, A* z, const std::int64_t* tc, std::int64_t b, std::int64_t ld, A* q,
                      bool round) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::split_targets",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, b), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t t = tc[i];
        A v = 0;
        if (t >= 0) {
          v = z[i * ld + t];
          z[i * ld + t] = A(0);
        }
        q[i] = round ? static_cast<A>(static_cast<T>(v)) : v;
      });
}

/// grad_input's chunk rows gx [b, D] += q[i] W[tc[i]] (the sparse target
/// terms; rows without a target unchanged). Asynchronous.
template <class ExecSpace, class T, class A>
void fl_sparse_grad_input(const ExecSpace& exec, A* gx, const T* w, const A* q, const std::int64_t* tc, std::int64_t b,
                          std::int64_t D) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::sparse_grad_input",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(exec, {0, 0}, {b, D}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t d) {
        const std::int64_t t = tc[i];
        if (t >= 0) gx[i * D + d] += q[i] * to_acc(w[t * D + d]);
      });
}

/// grad_weight [V, D] row t += the sum of q[i] X_c[i] over the chunk rows i
/// with target column t (the sparse target terms): the rows sorted by
/// their target (impl/sort.hpp), each (target, feature) summed in row
/// order by one thread and added once (16-bit T: rounded once), so the
/// result is the same for any thread count or device. Fences (the sort).
template <class ExecSpace, class T, class A>
void fl_sparse_grad_weight(const ExecSpace& exec, T* gw, const T* xc, const A* q, const std::int64_t* tc,
                           std::int64_t b, std::int64_t D, std::int64_t V) {
  const RowSort<typename ExecSpace::memory_space> s = sort_by_row(
      exec, "fused_linear_cross_entropy", b, V, KOKKOS_LAMBDA(const std::int64_t i) { return tc[i]; });
  const auto perm = s.perm;
  const auto start = s.start;
  const std::int64_t total = static_cast<std::int64_t>(perm.extent(0));
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::sparse_grad_weight",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(exec, {0, 0}, {total, D}),
      KOKKOS_LAMBDA(const std::int64_t k, const std::int64_t d) {
        const std::int64_t t = tc[perm(k)];
        if (k > 0 && tc[perm(k - 1)] == t) return;  // not the first row of its target's run
        A sum = 0;
        for (std::int64_t e = k; e < start(t + 1); ++e) {
          const std::int64_t i = perm(e);
          sum += q[i] * to_acc(xc[i * D + d]);
        }
        gw[t * D + d] = static_cast<T>(to_acc(gw[t * D + d]) + sum);
      });
}

/// Rounds b rows of V floats z [b, V] to 16-bit T in place, into a dense
/// [b, V] matrix of T at the start of the same storage (T element (i, j) at
/// T offset i V + j): the chunk's 16-bit dL/dZ needs no buffer of its own,
/// and stays dense (oneDNN's fast matmul kernels take only dense operands).
/// Row i's T values land on float rows <= i, already read, so the rows go
/// in order, one work item (a host pass over the chunk, small beside its
/// products); the floats are copied out a block at a time, so the compiler
/// cannot move a store ahead of the load it overwrites. Host spaces only.
/// Asynchronous.
template <class T, class ExecSpace>
void fl_round_rows(const ExecSpace& exec, float* z, std::int64_t b, std::int64_t V) {
  static_assert(is_host_space_v<ExecSpace> && sizeof(T) * 2 == sizeof(float));
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::round_rows", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1), [=](const int) {
        constexpr std::int64_t block = 256;
        float tmp[block];
        T out[block];
        unsigned char* bytes = reinterpret_cast<unsigned char*>(z);
        for (std::int64_t i = 0; i < b; ++i) {
          for (std::int64_t j0 = 0; j0 < V; j0 += block) {
            const std::int64_t n = j0 + block < V ? block : V - j0;
            std::memcpy(tmp, bytes + (i * V + j0) * sizeof(float), static_cast<std::size_t>(n) * sizeof(float));
            for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<T>(tmp[j]);
            std::memcpy(bytes + (i * V + j0) * sizeof(T), out, static_cast<std::size_t>(n) * sizeof(T));
          }
        }
      });
}

/// dst [b, w] (dense) = src[:, c0 .. c0 + w) of a [b, ld] matrix. Asynchronous.
template <class ExecSpace, class T>
void fl_pack_columns(const ExecSpace& exec, T* dst, const T* src, std::int64_t b, std::int64_t ld, std::int64_t c0,
                     std::int64_t w) {
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::pack",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(exec, {0, 0}, {b, w}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t c) { dst[i * w + c] = src[i * ld + c0 + c]; });
}

/// g[c] += sum_i dz[i, c] over b rows of V columns (row stride ld).
/// Asynchronous. Hosts walk the rows in order over blocks of columns (unit
/// stride, one block per work item); devices give each thread a column
/// (consecutive threads, consecutive addresses).
template <class ExecSpace, class A>
void fl_add_column_sums(const ExecSpace& exec, A* g, const A* dz, std::int64_t b, std::int64_t V, std::int64_t ld) {
  const std::int64_t width = is_host_space_v<ExecSpace> ? tuning::fl_host_column_block : 1;
  Kokkos::parallel_for(
      "kloss::fused_linear_cross_entropy::grad_bias",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, (V + width - 1) / width),
      KOKKOS_LAMBDA(const std::int64_t blk) {
        const std::int64_t c0 = blk * width, c1 = c0 + width < V ? c0 + width : V;
        for (std::int64_t i = 0; i < b; ++i) {
          const A* row = dz + i * ld;
          for (std::int64_t c = c0; c < c1; ++c) g[c] += row[c];
        }
      });
}

/// The chunk loop of the fused heads (see the file comment) as a state and
/// its steps: the sizes and modes of a call, its scratch, its report, and
/// one member function per step of a chunk; fused_head_with runs them in
/// order. Operands of type Op: the head's dtype where the product library
/// multiplies it (a.plan.native), else float (16-bit heads then convert X's
/// chunk rows and W's vocabulary blocks to float, product by product). It
/// holds no device lambda (nvcc refuses one in a function templated on the
/// caller's lambda types): its kernels are the fl_ helpers above.
template <class Op, class ExecSpace, class T>
struct FusedHeadChunks {
  using A = acc_t<T>;
  using Mem = typename ExecSpace::memory_space;
  static constexpr bool conv = !std::is_same_v<Op, T>;      // float products on converted copies of 16-bit operands
  static constexpr bool round_dz = !std::is_same_v<Op, A>;  // 16-bit operands: dL/dZ rounded to T for the backward

  const ExecSpace& exec;
  const FusedHeadArgs<T>& a;
  const ProductLibrary lib;
  const std::int64_t N, D, V, B;
  const bool want_grad, filtering;
  const bool sparse;      ///< the targets' entries of dL/dZ as a sparse update (filtering, class indices)
  const std::int64_t ld;  ///< the chunk's row stride
  const std::int64_t Bv;  ///< vocabulary blocks: the 16-bit conversion blocks, also the filter's tiles
  const std::int64_t blocks;
  /// 16-bit dL/dZ over the chunk's own float rows (hosts, fl_round_rows),
  /// not in a buffer of its own (devices: dzh)
  const bool round_in_place;
  /// 16-bit dL/dZ written into dzh by the row pass itself
  const bool rows_round;
  /// grad_weight: without filtering the first chunk's products overwrite it
  /// (no accumulation), which saves a pass over V x D; zeroed first when
  /// there is no chunk or when a filtered tile may leave rows of it unwritten.
  const bool gw_zeroed;
  /// vocabulary rows per forward product: one conversion block when
  /// converting, else all of V
  const std::int64_t step_fwd;
  FusedLinearReport report;
  // scratch (impl/scratch.hpp): one chunk of logits (Zs); the converted
  // blocks; its 16-bit dL/dZ (dzh)
  Scratch<A, Mem> Zs, xf, dxf, wf, dwb, gb_acc, tmax, bias_f;
  Scratch<T, Mem> dzh;
  /// the tile maxima on the host (a plain vector: no Kokkos allocation)
  std::vector<A> tmax_host;
  const Kokkos::View<A*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> tmax_h;
  std::vector<char> keep;       ///< which vocabulary blocks take part in the backward products
  Scratch<A, Mem> tq;           ///< the chunk rows' target entries of dL/dZ (sparse)
  Scratch<Op, Mem> tile;        ///< a dense copy of one filter tile of dL/dZ (oneDNN, filtering)
  A* gbp = nullptr;             ///< grad_bias accumulates here (float for 16-bit T)
  const Op* bias_op = nullptr;  ///< the bias as operands (16-bit converted: bias_f)

  /// The sizes and modes of the call `a`; no scratch yet.
  FusedHeadChunks(const ExecSpace& exec_, const FusedHeadArgs<T>& a_)
      : exec(exec_),
        a(a_),
        lib(a_.plan.library),
        N(a_.N),
        D(a_.D),
        V(a_.V),
        B(a_.B),
        want_grad(a_.want_grad()),
        filtering(want_grad && a_.filter > 0),
        sparse(filtering && a_.target_cols && (a_.gx || a_.gw)),
        ld(fl_logit_ld<ExecSpace>(V)),
        Bv(fl_convert_block_rows(V, D, a_.convert_block_rows)),
        blocks(V > 0 ? (V + Bv - 1) / Bv : 0),
        round_in_place(!fl_device_schedule<ExecSpace>()),
        rows_round(round_dz && !round_in_place && a_.rows_write_16 && !filtering && !a_.gb && (a_.gx || a_.gw)),
        gw_zeroed(a_.gw && (N == 0 || filtering)),
        step_fwd(conv ? Bv : V),
        tmax_host(filtering ? static_cast<std::size_t>(blocks) : 0),
        tmax_h(tmax_host.data(), tmax_host.size()),
        keep(static_cast<std::size_t>(blocks), 1) {
    report.threshold = filtering ? a.filter : 0.0;
  }

  /// Takes the scratch: the chunk's logits, the 16-bit conversion buffers
  /// (and the bias converted), the 16-bit dL/dZ buffer, the float grad_input
  /// chunk and grad_bias (zeroed), the filter's tile maxima and dense tile,
  /// the sparse target entries.
  void take_scratch() {
    Zs = scratch<A>(exec, B * ld);
    if constexpr (conv) {
      xf = scratch<A>(exec, B * D);
      wf = scratch<A>(exec, Bv * D);
      if (a.gw) dwb = scratch<A>(exec, Bv * D);
      if (a.bias) {
        bias_f = scratch<A>(exec, V);
        fl_convert(exec, bias_f.data(), a.bias, V, false);
      }
    }
    if constexpr (round_dz) {
      if (!round_in_place && (a.gx || a.gw)) dzh = scratch<T>(exec, B * ld);
    }
    if constexpr (!std::is_same_v<T, A>) {
      if (a.gx) dxf = scratch<A>(exec, B * D);
      if (a.gb) gb_acc = scratch_zeroed<A>(exec, V);
    }
    if (filtering) tmax = scratch<A>(exec, blocks);
    if (sparse) tq = scratch<A>(exec, B);
    if (filtering && lib == ProductLibrary::onednn && (a.gx || a.gw)) tile = scratch<Op>(exec, B * Bv);
  }

  /// Zeroes grad_weight (gw_zeroed) and grad_bias, and points gbp and
  /// bias_op at where grad_bias accumulates and the bias operands lie.
  void zero_gradients() {
    if (gw_zeroed)
      Kokkos::deep_copy(exec, Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(a.gw, V * D), T(0.0f));
    if (a.gb) Kokkos::deep_copy(exec, Kokkos::View<T*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(a.gb, V), T(0.0f));
    if constexpr (std::is_same_v<T, A>)
      gbp = a.gb;
    else
      gbp = gb_acc.data();
    if constexpr (conv)
      bias_op = a.bias ? bias_f.data() : nullptr;
    else
      bias_op = a.bias;
  }

  /// C (+)= op(x) op(y) (+ bias) on the call's product library.
  template <class C>
  void product(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, const Op* x, std::int64_t ldx,
               const Op* y, std::int64_t ldy, const Op* bias, C* c, std::int64_t ldc, bool accumulate) const {
    head_product(exec, lib, RowMajorProduct{ta, tb, m, n, k, ldx, ldy, ldc}, x, y, bias, c, accumulate, a.tf32);
  }

  /// W's rows [v0, v0 + bv) as operands (16-bit converted: into wf).
  const Op* w_rows(std::int64_t v0, std::int64_t bv) {
    if constexpr (conv) {
      fl_convert(exec, wf.data(), a.w + v0 * D, bv * D, false);
      return wf.data();
    } else {
      return a.w + v0 * D;
    }
  }

  /// Z = X_c W^T + bias for the chunk of b rows from r0, into Zs (row stride
  /// ld); returns the chunk's input rows as operands (16-bit converted: xf).
  const Op* forward(std::int64_t r0, std::int64_t b) {
    A* Z = Zs.data();
    const Op* xc = nullptr;
    if constexpr (conv) {
      fl_convert(exec, xf.data(), a.x + r0 * D, b * D, false);
      xc = xf.data();
    } else {
      xc = a.x + r0 * D;
    }
    for (std::int64_t v0 = 0; v0 < V; v0 += step_fwd) {
      const std::int64_t bv = v0 + step_fwd < V ? step_fwd : V - v0;
      // columns [v0, v0 + bv) of the chunk: row stride ld
      product('N', 'T', b, bv, D, xc, D, w_rows(v0, bv), D, bias_op ? bias_op + v0 : nullptr, Z + v0, ld, false);
    }
    return xc;
  }

  /// Where the row pass writes the chunk's 16-bit dL/dZ (rows_round: dzh),
  /// or null: over Z in place.
  T* rows_dz16() const {
    T* dz16 = nullptr;
    if constexpr (round_dz) dz16 = rows_round ? dzh.data() : nullptr;
    return dz16;
  }

  /// The chunk's rows of FusedHeadArgs::target_cols (sparse), or null.
  const std::int64_t* chunk_targets(std::int64_t r0) const { return sparse ? a.target_cols + r0 : nullptr; }

  /// grad_bias over the chunk's whole dL/dZ; the targets' entries out of it
  /// (sparse); which tiles take part (filtering: their maxima reach the
  /// host, a fence), counted in the report.
  void grad_bias_and_tiles(std::int64_t r0, std::int64_t b) {
    A* Z = Zs.data();
    report.tiles += blocks;
    if (a.gb) fl_add_column_sums(exec, gbp, Z, b, V, ld);
    const std::int64_t* tcc = chunk_targets(r0);
    if (sparse) fl_split_targets<T>(exec, Z, tcc, b, ld, tq.data(), round_dz);
    if (filtering) {
      fl_tile_max(exec, Z, b, V, ld, Bv, tmax.data());
      Kokkos::deep_copy(exec, tmax_h, tmax.view());
      exec.fence();
      for (std::int64_t j = 0; j < blocks; ++j) {
        const double m = static_cast<double>(tmax_h(j));
        keep[j] = !(m < a.filter);
        if (!keep[j]) {
          ++report.skipped_tiles;
          if (m > report.max_skipped) report.max_skipped = m;
        }
      }
    }
  }

  /// The backward's operand dL/dZ of the chunk's b rows (16-bit operands:
  /// rounded to T, over Z's own rows on hosts, into dzh on devices unless
  /// the row pass wrote it there).
  const Op* dz_operand(std::int64_t b) {
    A* Z = Zs.data();
    const Op* dz = nullptr;
    if constexpr (round_dz) {
      if (round_in_place) {
        if constexpr (is_host_space_v<ExecSpace>) fl_round_rows<T>(exec, Z, b, V);  // (hosts: ld = V)
        dz = reinterpret_cast<const Op*>(Z);
      } else {
        if (!rows_round) fl_convert(exec, dzh.data(), Z, b * ld, false);
        dz = dzh.data();
      }
    } else {
      dz = Z;
    }
    return dz;
  }

  /// The chunk's grad_input in A (grad_input's rows from r0 itself when T
  /// is A, else dxf), or null without grad_input.
  A* chunk_grad_input(std::int64_t r0) const {
    A* gxc = nullptr;
    if constexpr (std::is_same_v<T, A>)
      gxc = a.gx ? a.gx + r0 * D : nullptr;
    else
      gxc = a.gx ? dxf.data() : nullptr;
    return gxc;
  }

  /// grad_input_c = dZ W (into gxc, when not null) and grad_weight += dZ^T
  /// X_c over the kept tiles: runs of consecutive kept blocks, each one
  /// product per operand step. Returns whether gxc was written.
  bool backward_products(std::int64_t r0, std::int64_t b, const Op* xc, const Op* dz, A* gxc) {
    bool gx_written = false;
    const bool gw_accumulate = r0 != 0 || gw_zeroed;
    // vocabulary rows per backward product: one conversion block when
    // converting, the grad_weight row block on Kokkos Kernels (its BLAS
    // packs a whole operand, see fl_grad_weight_block_rows), one filter tile
    // packed dense on oneDNN when filtering (its fast kernels take dense
    // operands only: a column range of dZ would go to its slower gemm, which
    // also holds a float copy of a 16-bit grad_weight), else a run
    const bool pack = filtering && lib == ProductLibrary::onednn;
    const std::int64_t step_bwd =
        conv || pack ? Bv : (lib == ProductLibrary::kokkos_blas ? fl_grad_weight_block_rows(V, b) : V);
    for (std::int64_t j = 0; j < blocks;) {
      if (!keep[j]) {
        ++j;
        continue;
      }
      std::int64_t k = j;
      while (k < blocks && keep[k]) ++k;
      const std::int64_t c0 = j * Bv, c1 = k * Bv < V ? k * Bv : V;
      j = k;
      for (std::int64_t v0 = c0; v0 < c1; v0 += step_bwd) {
        const std::int64_t bv = v0 + step_bwd < c1 ? step_bwd : c1 - v0;
        const Op* dzv = dz + v0;  // dZ[:, v0 .. v0 + bv), row stride ldz
        std::int64_t ldz = ld;
        if (pack && bv < V) {
          fl_pack_columns(exec, tile.data(), dz, b, ld, v0, bv);
          dzv = tile.data();
          ldz = bv;
        }
        if (gxc) {  // dX_c (+)= dZ[:, v0..] W[v0..]
          product('N', 'N', b, D, bv, dzv, ldz, w_rows(v0, bv), D, nullptr, gxc, D, gx_written);
          gx_written = true;
        }
        if (a.gw) {  // dW[v0..] (+)= dZ[:, v0..]^T X_c
          if constexpr (conv) {
            product('T', 'N', bv, D, b, dzv, ldz, xc, D, nullptr, dwb.data(), D, false);
            fl_convert(exec, a.gw + v0 * D, dwb.data(), bv * D, gw_accumulate);
          } else {
            product('T', 'N', bv, D, b, dzv, ldz, xc, D, nullptr, a.gw + v0 * D, D, gw_accumulate);
          }
        }
      }
    }
    return gx_written;
  }

  /// The chunk's sparse target terms (grad_weight, then grad_input), and its
  /// grad_input rows finished: zeroed when no product wrote them, shown to
  /// gx_done in A, stored (16-bit T: rounded once).
  template <class GxDone>
  void finish_chunk(std::int64_t r0, std::int64_t b, A* gxc, bool gx_written, GxDone&& gx_done) {
    const std::int64_t* tcc = chunk_targets(r0);
    if (sparse && a.gw) fl_sparse_grad_weight(exec, a.gw, a.x + r0 * D, tq.data(), tcc, b, D, V);
    if (gxc) {
      if (!gx_written)
        Kokkos::deep_copy(exec, Kokkos::View<A*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(gxc, b * D), A(0));
      if (sparse) fl_sparse_grad_input(exec, gxc, a.w, tq.data(), tcc, b, D);
      gx_done(gxc, b * D);
      if constexpr (!std::is_same_v<T, A>) fl_convert(exec, a.gx + r0 * D, gxc, b * D, false);
    }
  }

  /// grad_bias stored from its float sums (16-bit T).
  void store_grad_bias() {
    if constexpr (!std::is_same_v<T, A>) {
      if (a.gb) fl_convert(exec, a.gb, gb_acc.data(), V, false);
    }
  }
};

/// The chunk loop of the fused heads (see the file comment), with operands
/// of type Op (see FusedHeadChunks, whose steps it runs). `rows(Zc, ld, r0,
/// b, dz16)` turns the chunk's logits Zc [b, V] (rows r0.. of the call, in
/// the accumulation type, row stride ld = fl_logit_ld(V)) into its losses
/// and, when gradients are wanted, its logit gradient: in place when dz16
/// is null, else rounded to T into dz16 [b, V] (the same row stride; only
/// when a.rows_write_16: the device schedule with 16-bit operands, no
/// grad_bias and no filter, which read the float gradient); it returns
/// false to stop the loop (the vocabulary-parallel op's bad rows).
/// `gx_done(p, count)` sees each chunk's grad_input rows in the
/// accumulation type before they are stored (the vocabulary-parallel op
/// sums them over the ranks there). The gradients are overwritten.
/// 16-bit T: the logits, the row kernel and grad_bias are float; with
/// 16-bit operands the chunk's dL/dZ is rounded to T for the two backward
/// products (as a 16-bit autograd head computes them), grad_input is
/// rounded once, and grad_weight is accumulated over the token chunks in T
/// (each chunk's float product added and rounded once).
/// Fences once per chunk when filtering (the tile maxima reach the host).
template <class Op, class ExecSpace, class T, class Rows, class GxDone>
FusedLinearReport fused_head_with(const ExecSpace& exec, const FusedHeadArgs<T>& a, Rows&& rows, GxDone&& gx_done) {
  using A = acc_t<T>;
  FusedHeadChunks<Op, ExecSpace, T> h(exec, a);
  h.take_scratch();
  h.zero_gradients();
  for (std::int64_t r0 = 0; r0 < h.N; r0 += h.B) {
    const std::int64_t b = r0 + h.B < h.N ? h.B : h.N - r0;
    const Op* xc = h.forward(r0, b);
    // the rows: losses, and dL/dZ over Z in place or into dzh
    if (!rows(h.Zs.data(), h.ld, r0, b, h.rows_dz16())) break;
    if (!h.want_grad) continue;
    h.grad_bias_and_tiles(r0, b);
    if (!a.gx && !a.gw) continue;
    const Op* dz = h.dz_operand(b);
    A* gxc = h.chunk_grad_input(r0);
    const bool gx_written = h.backward_products(r0, b, xc, dz, gxc);
    h.finish_chunk(r0, b, gxc, gx_written, gx_done);
  }
  h.store_grad_bias();
  return h.report;
}

/// The chunk loop on the operand type of a.plan (see fused_head_with).
template <class ExecSpace, class T, class Rows, class GxDone>
FusedLinearReport fused_head(const ExecSpace& exec, const FusedHeadArgs<T>& a, Rows&& rows, GxDone&& gx_done) {
  using A = acc_t<T>;
  if constexpr (!std::is_same_v<T, A>) {
    if (!a.plan.native) return fused_head_with<A>(exec, a, rows, gx_done);
  }
  return fused_head_with<T>(exec, a, rows, gx_done);
}

/// max |v_i| (0 for no element; NaN wins). Fences.
template <class ExecSpace, class T>
double fl_max_abs(const ExecSpace& exec, const Kokkos::View<const T*, typename ExecSpace::memory_space>& v) {
  double m = 0;
  Kokkos::parallel_reduce(
      "kloss::fused_linear_cross_entropy::max_abs",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, static_cast<std::int64_t>(v.extent(0))),
      KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
        double x = static_cast<double>(to_acc(v(i)));
        x = x < 0 ? -x : x;
        if (!(x <= acc)) acc = x;
      },
      Kokkos::Max<double>(m));
  return m;
}

/// The largest |upstream factor| of a row: max |grad_output| (1 without
/// one), over the mean's divisor for reduction mean. Fences.
template <class ExecSpace, class T>
double fl_max_row_scale(const ExecSpace& exec, const Kokkos::View<const T*, typename ExecSpace::memory_space>& go,
                        bool has_go, bool mean, double total_weight) {
  const double m = has_go ? fl_max_abs<ExecSpace, T>(exec, go) : 1.0;
  return mean ? m / total_weight : m;
}

}  // namespace impl
}  // namespace kloss
