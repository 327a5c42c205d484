// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// MPI glue of kloss (vocabulary-parallel ops): the communicator, the
// online-LSE reduction operator, the agreement collective, explicit
// instantiations and the runtime-typed vocabulary-parallel adapters.
#include "runtime_support.hpp"
#include <kloss/mpi.hpp>
#include <kloss/registry.hpp>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>

#define KLOSS_MPI_DEFINE(T, I) KLOSS_MPI_INSTANTIATE(, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MPI_DEFINE)
#define KLOSS_MPI_FUSED_DEFINE(T, I) KLOSS_MPI_FUSED_INSTANTIATE(, T, I)
KLOSS_FOR_EACH_SCALAR_INDEX(KLOSS_MPI_FUSED_DEFINE)
#undef KLOSS_MPI_FUSED_DEFINE

namespace kloss::mpi {
namespace {

/// The online-LSE merge of row records (impl::RecordLayout): field 0 the
/// max, field 1 the sum of exp(z - max), every other field a sum. Symmetric
/// in its two arguments bit for bit (the larger max always plays the same
/// role), so MPI may combine in any order and every rank gets the same bits.
template <class A>
void merge_rows(void* in, void* inout, int* len, MPI_Datatype* type) {
  int bytes = 0;
  MPI_Type_size(*type, &bytes);
  const int k = bytes / static_cast<int>(sizeof(A));
  const A* a = static_cast<const A*>(in);
  A* b = static_cast<A*>(inout);
  for (int i = 0; i < *len; ++i, a += k, b += k) {
    const A ma = a[0], mb = b[0];
    A m, s;
    if (std::isnan(ma) || std::isnan(mb)) {
      m = s = std::numeric_limits<A>::quiet_NaN();
    } else {
      const bool a_hi = ma > mb || (ma == mb && a[1] >= b[1]);
      const A mh = a_hi ? ma : mb, ml = a_hi ? mb : ma;
      const A sh = a_hi ? a[1] : b[1], sl = a_hi ? b[1] : a[1];
      m = mh;
      // Both -inf: both sums are 0 (no mass); avoid exp(-inf + inf).
      s = mh == -std::numeric_limits<A>::infinity() ? sh + sl : sh + sl * std::exp(ml - mh);
    }
    b[0] = m;
    b[1] = s;
    for (int f = 2; f < k; ++f) b[f] = a[f] + b[f];
  }
}

[[noreturn]] void throw_kind(int kind, const std::string& msg) {
  switch (kind) {
    case 2:
      throw InvalidArgument(msg);
    case 3:
      throw DimensionMismatch(msg);
    case 4:
      throw IndexOutOfRange(msg);
    case 5:
      throw NotImplemented(msg);
    case 6:
      throw MpiError(msg);
    default:
      throw Error(msg);
  }
}

}  // namespace

bool detect_gpu_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

Communicator::Communicator(MPI_Comm comm, const CommunicatorOptions& options) : options_(options) {
  constexpr std::string_view op = "mpi::Communicator";
  int initialized = 0;
  impl::check_mpi(MPI_Initialized(&initialized), op, "MPI_Initialized");
  if (!initialized) fail<MpiError>(op, "MPI is not initialised (call MPI_Init first)");
  if (comm == MPI_COMM_NULL) fail<InvalidArgument>(op, "argument 'comm' is MPI_COMM_NULL");
  impl::check_mpi(MPI_Comm_dup(comm, &comm_), op, "MPI_Comm_dup");
  try {
    impl::check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), op, "MPI_Comm_set_errhandler");
    impl::check_mpi(MPI_Comm_rank(comm_, &rank_), op, "MPI_Comm_rank");
    impl::check_mpi(MPI_Comm_size(comm_, &size_), op, "MPI_Comm_size");
    impl::check_mpi(MPI_Op_create(&merge_rows<float>, 1, &merge_float_), op, "MPI_Op_create");
    impl::check_mpi(MPI_Op_create(&merge_rows<double>, 1, &merge_double_), op, "MPI_Op_create");
  } catch (...) {
    release();
    throw;
  }
}

void Communicator::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (merge_float_ != MPI_OP_NULL) MPI_Op_free(&merge_float_);
    if (merge_double_ != MPI_OP_NULL) MPI_Op_free(&merge_double_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  merge_float_ = merge_double_ = MPI_OP_NULL;
  comm_ = MPI_COMM_NULL;
}

Communicator::~Communicator() { release(); }

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(o.comm_),
      rank_(o.rank_),
      size_(o.size_),
      options_(o.options_),
      merge_float_(o.merge_float_),
      merge_double_(o.merge_double_),
      stats_(o.stats_) {
  o.comm_ = MPI_COMM_NULL;
  o.merge_float_ = o.merge_double_ = MPI_OP_NULL;
}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    release();
    comm_ = o.comm_;
    rank_ = o.rank_;
    size_ = o.size_;
    options_ = o.options_;
    merge_float_ = o.merge_float_;
    merge_double_ = o.merge_double_;
    stats_ = o.stats_;
    o.comm_ = MPI_COMM_NULL;
    o.merge_float_ = o.merge_double_ = MPI_OP_NULL;
  }
  return *this;
}

ClassRange balanced_range(std::int64_t total, const Communicator& comm) {
  return balanced_range(total, comm.rank(), comm.size());
}

namespace impl {

void check_mpi(int rc, std::string_view op, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail<MpiError>(op, call, " failed (error ", rc, "): ", std::string(text, static_cast<std::size_t>(len)));
}

void abort_job(const Communicator& comm, std::string_view op, const char* what) noexcept {
  std::fprintf(stderr,
               "kloss::%.*s: rank %d of %d failed after the ranks agreed on the call: %s\n"
               "kloss::%.*s: the other ranks wait in a collective it cannot join; calling MPI_Abort (exit code %d)\n",
               static_cast<int>(op.size()), op.data(), comm.rank(), comm.size(), what, static_cast<int>(op.size()),
               op.data(), abort_exit_code);
  std::fflush(stderr);
  MPI_Abort(comm.get(), abort_exit_code);
  std::abort();  // MPI_Abort does not return; if it did, the process must still end
}

int error_kind_of(const Error& e) {
  if (dynamic_cast<const InvalidArgument*>(&e)) return 2;
  if (dynamic_cast<const DimensionMismatch*>(&e)) return 3;
  if (dynamic_cast<const IndexOutOfRange*>(&e)) return 4;
  if (dynamic_cast<const NotImplemented*>(&e)) return 5;
  if (dynamic_cast<const MpiError*>(&e)) return 6;
  return 1;
}

MPI_Datatype mpi_bits_type(std::size_t bytes) {
  switch (bytes) {
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    case 8:
      return MPI_UINT64_T;
    default:
      fail<NotImplemented>("vocab_parallel_embedding", "no MPI integer type of ", bytes, " bytes");
  }
}

RowType::RowType(int k, MPI_Datatype base, std::string_view op) {
  check_mpi(MPI_Type_contiguous(k, base, &type_), op, "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&type_), op, "MPI_Type_commit");
}
RowType::~RowType() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

std::vector<std::pair<std::string, std::int64_t>> option_fingerprint(const CrossEntropyKeywords& k, bool weighted,
                                                                     std::int64_t extra) {
  auto bits = [](double d) {
    std::int64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  };
  return {{"reduction", static_cast<std::int64_t>(k.reduction)},
          {"ignore_index", k.ignore_index},
          {"label_smoothing", bits(k.label_smoothing)},
          {"z_loss", bits(k.z_loss)},
          {"softcap", bits(k.softcap)},
          {"weight (given or not)", weighted ? 1 : 0},
          {"extra", extra}};
}

std::vector<double> agree_collective(const Communicator& comm, std::string_view op, bool check, const Agreement& mine,
                                     int error_kind, const std::string& error_message) {
  const int p = comm.size();
  const std::size_t nsums = mine.sums.size();
  if (nsums > 2) fail<Error>(op, "internal: at most two sums travel with the agreement");
  if (!check) {
    std::vector<double> s(mine.sums);
    if (nsums > 0) {
      const double t0 = MPI_Wtime();
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, s.data(), static_cast<int>(nsums), MPI_DOUBLE, MPI_SUM, comm.get()), op,
                "MPI_Allreduce");
      comm.record(static_cast<std::int64_t>(nsums * sizeof(double)), MPI_Wtime() - t0);
    }
    return s;
  }
  Signature me{};
  me.rows = mine.rows;
  me.begin = mine.range.begin;
  me.count = mine.range.count;
  me.total = mine.range.total;
  if (mine.options.size() > 8) fail<Error>(op, "internal: at most eight options are compared");
  for (std::size_t i = 0; i < mine.options.size(); ++i) me.options[i] = mine.options[i].second;
  me.error_kind = error_kind;
  me.error_len = static_cast<std::int64_t>(error_message.size());
  for (std::size_t i = 0; i < nsums; ++i) me.sums[i] = mine.sums[i];
  std::vector<Signature> all(static_cast<std::size_t>(p));
  const double t0 = MPI_Wtime();
  check_mpi(MPI_Allgather(&me, sizeof(Signature), MPI_BYTE, all.data(), sizeof(Signature), MPI_BYTE, comm.get()), op,
            "MPI_Allgather");
  comm.record(static_cast<std::int64_t>(sizeof(Signature)), MPI_Wtime() - t0);

  // 1. A rank whose own checks failed: its message, broadcast, on every rank.
  for (int r = 0; r < p; ++r) {
    const Signature& s = all[static_cast<std::size_t>(r)];
    if (s.error_kind == 0) continue;
    std::string msg(static_cast<std::size_t>(s.error_len), '\0');
    if (r == comm.rank()) msg = error_message;
    if (s.error_len > 0)
      check_mpi(MPI_Bcast(msg.data(), static_cast<int>(s.error_len), MPI_CHAR, r, comm.get()), op, "MPI_Bcast");
    throw_kind(static_cast<int>(s.error_kind), msg + " (on rank " + std::to_string(r) + ")");
  }
  std::vector<std::string> names;
  for (const auto& o : mine.options) names.push_back(o.first);
  check_signatures(op, all, names);
  // 4. The sums, in rank order (same bits everywhere).
  std::vector<double> sums(nsums, 0.0);
  for (int r = 0; r < p; ++r)
    for (std::size_t i = 0; i < nsums; ++i) sums[i] += all[static_cast<std::size_t>(r)].sums[i];
  return sums;
}

void check_signatures(std::string_view op, const std::vector<Signature>& all, const std::vector<std::string>& names) {
  const int p = static_cast<int>(all.size());
  if (p == 0) return;
  // 2. Ranks that disagree on the call.
  const Signature& r0 = all[0];
  for (int r = 1; r < p; ++r) {
    const Signature& s = all[static_cast<std::size_t>(r)];
    if (s.rows != r0.rows)
      fail<MpiError>(op, "ranks disagree on the number of rows: rank 0 has ", r0.rows, ", rank ", r, " has ", s.rows);
    if (s.total != r0.total)
      fail<MpiError>(op, "ranks disagree on the vocabulary size: rank 0 has ", r0.total, ", rank ", r, " has ",
                     s.total);
    for (std::size_t i = 0; i < names.size() && i < 8; ++i)
      if (s.options[i] != r0.options[i])
        fail<MpiError>(op, "ranks disagree on option '", names[i], "' (rank 0 and rank ", r, ")");
  }
  // 3. The class ranges must tile [0, total).
  std::vector<int> order(static_cast<std::size_t>(p));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Signature &sa = all[static_cast<std::size_t>(a)], &sb = all[static_cast<std::size_t>(b)];
    return sa.begin != sb.begin ? sa.begin < sb.begin : sa.count < sb.count;
  });
  std::int64_t covered = 0;
  int prev = -1;
  for (int r : order) {
    const Signature& s = all[static_cast<std::size_t>(r)];
    if (s.count < 0) fail<MpiError>(op, "rank ", r, " has a negative class count ", s.count);
    if (s.count == 0) continue;  // a rank may own nothing
    if (s.begin > covered)
      fail<MpiError>(op, "inconsistent class ranges: classes [", covered, ", ", s.begin, ") belong to no rank");
    if (s.begin < covered)
      fail<MpiError>(op, "inconsistent class ranges: rank ", prev, " and rank ", r, " both own classes from ", s.begin,
                     " to ", std::min(covered, s.begin + s.count));
    covered = s.begin + s.count;
    prev = r;
  }
  if (covered != r0.total)
    fail<MpiError>(op, "inconsistent class ranges: classes [", covered, ", ", r0.total, ") belong to no rank");
}

void throw_bad_row(std::string_view op, const VpSums& s, std::int64_t target_value, const ClassRange& range) {
  if (s.bad_kind == 2)
    fail<MpiError>(op, "ranks disagree on whether row ", s.bad_row, " is ignored (target ", target_value,
                   " on this rank): the targets must be the same on every rank");
  if (s.bad_kind == 1)
    fail<MpiError>(op, "target[", s.bad_row, "] = ", target_value,
                   " is owned by several ranks: the targets must be the same on every rank");
  fail<IndexOutOfRange>(op, "target[", s.bad_row, "] = ", target_value, " is outside every rank's class range [0, ",
                        range.total, ") and is not ignore_index (", s.bad, " such row", s.bad == 1 ? "" : "s", ")");
}

}  // namespace impl
}  // namespace kloss::mpi

// ---------------------------------------------------------------------------
// Runtime-typed vocabulary-parallel adapters (OpInfo::run_vocab_parallel),
// attached to the registry lines of cross_entropy, embedding and
// fused_linear_cross_entropy. The call's vocabulary-sized inputs hold this
// rank's slice (docs/golden-schema.md).
// ---------------------------------------------------------------------------
namespace kloss::impl {

namespace {

mpi::ClassRange range_of(const VocabShard& s) { return {s.begin, s.count, s.total}; }

/// [N, C_r, d...] (or [C_r]) -> rows-major [N * prod(d), C_r] and back:
/// the vocabulary-parallel kernels take one row per position.
std::vector<double> permute_rows(const std::vector<double>& v, std::int64_t n, std::int64_t c, std::int64_t inner,
                                 bool to_rows) {
  if (inner == 1) return v;
  std::vector<double> r(v.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t m = 0; m < inner; ++m) {
        const auto by_class = static_cast<std::size_t>((i * c + k) * inner + m);
        const auto by_row = static_cast<std::size_t>((i * inner + m) * c + k);
        if (to_rows)
          r[by_row] = v[by_class];
        else
          r[by_class] = v[by_row];
      }
  return r;
}

rt::Result run_vocab_parallel_cross_entropy(const rt::Call& c, const VocabShard& shard) {
  auto o = read_ce_options<mpi::VocabParallelCrossEntropyOptions>(c);
  auto iit = c.inputs.find("input");
  auto tit = c.inputs.find("target");
  if (iit == c.inputs.end()) fail<InvalidArgument>(c.op, "input 'input' is missing");
  if (tit == c.inputs.end()) fail<InvalidArgument>(c.op, "input 'target' is missing");
  if (rt::is_floating(tit->second.dtype()))
    fail<NotImplemented>(c.op, "vocabulary-parallel runs take class-index targets, not class probabilities");
  const Shape in_shape = iit->second.shape();
  // input [C_r] (one sample), [N, C_r] or [N, C_r, d...]
  const std::int64_t n = in_shape.rank <= 1 ? 1 : in_shape[0];
  const std::int64_t cr = in_shape.rank <= 1 ? (in_shape.rank == 1 ? in_shape[0] : 1) : in_shape[1];
  const std::int64_t inner = in_shape.rank <= 2 ? 1 : in_shape.prod(2, in_shape.rank);
  const std::int64_t rows = n * inner;
  Shape row_shape;  // the loss's none-shape: [] for [C], [N, d...] otherwise
  if (in_shape.rank >= 2) {
    std::vector<std::int64_t> r{in_shape[0]};
    for (int i = 2; i < in_shape.rank; ++i) r.push_back(in_shape[i]);
    row_shape = Shape(r);
  }
  const rt::Buffer* swb = given(c, "sample_weight");
  if (swb && swb->shape() != row_shape)
    fail<DimensionMismatch>(c.op, "argument 'sample_weight' must have shape ", row_shape.str(),
                            " (one weight per row), got ", swb->shape().str());
  mpi::Communicator comm(shard.comm);
  const mpi::ClassRange range = range_of(shard);
  return dispatch_scalar(c.dtype, c.op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    RtExec exec;
    // (the rows follow the target's flat order, as the sample weights do)
    DeviceTensor<T> sw;
    if (swb)
      sw = to_device<T>(rt::Buffer::from_doubles(c.dtype, Shape{rows}, swb->to_doubles()), "kloss::rt::sample_weight");
    auto x = to_device<T>(
        rt::Buffer::from_doubles(c.dtype, Shape{rows, cr}, permute_rows(iit->second.to_doubles(), n, cr, inner, true)),
        "kloss::rt::input");
    auto w = input<T>(c, "weight", false);
    auto out = device_zeros<T>(o.reduction == Reduction::none ? Shape{rows} : Shape{}, "kloss::rt::output");
    auto saved = device_zeros<A>(Shape{mpi::saved_extent(rows)}, "kloss::rt::saved");
    return dispatch_index(c.index_dtype, c.op, [&](auto itag) {
      using I = typename decltype(itag)::type;
      auto tg =
          to_device<I>(rt::Buffer::from_int64(c.index_dtype, Shape{rows}, tit->second.to_int64()), "kloss::rt::target");
      mpi::impl::vocab_parallel_cross_entropy<RtExec, T, I>(exec, comm, range, x.ctensor(), tg.ctensor(), w.ctensor(),
                                                            sw.ctensor(), out.tensor(), saved.tensor(), o);
      rt::Result r;
      r.output = to_host(out, c.dtype);
      if (o.reduction == Reduction::none)
        r.output = rt::Buffer::from_doubles(c.dtype, row_shape, r.output.to_doubles());
      if (c.grad_output) {
        auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
        go.shape = o.reduction == Reduction::none ? Shape{rows} : Shape{};
        auto gi = device_zeros<T>(Shape{rows, cr}, "kloss::rt::grad_input");
        mpi::impl::vocab_parallel_cross_entropy_backward<RtExec, T, I>(exec, range, go.ctensor(), x.ctensor(),
                                                                       tg.ctensor(), w.ctensor(), sw.ctensor(),
                                                                       saved.ctensor(), gi.tensor(), o);
        r.grads["input"] = rt::Buffer::from_doubles(
            c.dtype, in_shape, permute_rows(to_host(gi, c.dtype).to_doubles(), n, cr, inner, false));
      }
      return r;
    });
  });
}

rt::Result run_vocab_parallel_embedding(const rt::Call& c, const VocabShard& shard) {
  auto o = read_embedding_options<mpi::VocabParallelEmbeddingOptions>(c);
  // torch's sparse=True only changes the gradient's storage: the runtime
  // API returns it dense, so a sharded run computes the dense slice.
  o.sparse = false;
  mpi::Communicator comm(shard.comm);
  const mpi::ClassRange range = range_of(shard);
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    auto in = input<I>(c, "input");
    auto w = input<T>(c, "weight");
    require(w.shape.rank == 2, c.op, "argument 'weight' must have rank 2, got shape ", w.shape.str());
    const std::int64_t D = w.shape[1];
    auto out = device_zeros<T>(lookup_shape(c.op, in.shape, D), "kloss::rt::output");
    RtExec exec;
    if (o.max_norm)
      mpi::impl::vocab_parallel_embedding_renorm<RtExec, T, I>(exec, range, in.ctensor(), w.tensor(), *o.max_norm,
                                                               o.norm_type);
    mpi::impl::vocab_parallel_embedding<RtExec, T, I>(exec, comm, range, in.ctensor(), w.ctensor(), out.tensor(), o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) {
      auto go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      auto gw = device_zeros<T>(w.shape, "kloss::rt::grad_weight");
      mpi::impl::vocab_parallel_embedding_backward<RtExec, T, I>(exec, range, go.ctensor(), in.ctensor(), gw.tensor(),
                                                                 o);
      r.grads["weight"] = to_host(gw, c.dtype);
    }
    exec.fence();
    return r;
  });
}

rt::Result run_vocab_parallel_fused_linear_cross_entropy(const rt::Call& c, const VocabShard& shard) {
  auto o = read_ce_options<mpi::VocabParallelFusedLinearOptions>(c);
  mpi::Communicator comm(shard.comm);
  const mpi::ClassRange range = range_of(shard);
  return dispatch_scalar_index(c, [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    RtExec exec;
    FusedLinearTensors<T, I> f(c);
    auto sw = input<T>(c, "sample_weight", false);
    auto out = f.zero_output(c, o.reduction);
    DeviceTensor<T> go;
    if (c.grad_output) {
      go = to_device<T>(*c.grad_output, "kloss::rt::grad_output");
      f.zero_grads(c);
    }
    mpi::impl::vocab_parallel_fused_linear_cross_entropy<RtExec, T, I>(
        exec, comm, range, f.x.ctensor(), f.w.ctensor(), f.t.ctensor(), f.b.ctensor(), f.cw.ctensor(), sw.ctensor(),
        go.ctensor(), out.tensor(), f.gx.tensor(), f.gw.tensor(), f.gb.tensor(), o);
    rt::Result r;
    r.output = to_host(out, c.dtype);
    if (c.grad_output) f.grads_to_host(r, c.dtype);
    return r;
  });
}

}  // namespace

void register_vocab_parallel(std::vector<OpInfo>& ops) {
  const std::pair<std::string_view, rt::Result (*)(const rt::Call&, const VocabShard&)> runs[] = {
      {"cross_entropy", run_vocab_parallel_cross_entropy},
      {"embedding", run_vocab_parallel_embedding},
      {"fused_linear_cross_entropy", run_vocab_parallel_fused_linear_cross_entropy}};
  for (const auto& [name, run] : runs) {
    auto op = ops.begin();
    while (op != ops.end() && op->name != name) ++op;
    if (op == ops.end()) fail<Error>("ops", "internal: no registry line '", name, "' for its vocabulary-parallel form");
    op->run_vocab_parallel = run;
  }
}

}  // namespace kloss::impl
