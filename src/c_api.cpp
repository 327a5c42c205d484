// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The C API (include/kloss/c_api.h) over the runtime-typed registry: a loss
// object is an rt::Call being filled in (op, dtypes, options, inputs) plus
// the rt::Result of its last run. Every entry point runs its body inside
// guarded(), which turns any exception into a status code and a
// thread-local message, so none crosses into C or Fortran.
#include <kloss/c_api.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <kloss/checks.hpp>
#include <kloss/error.hpp>
#include <kloss/registry.hpp>
#include <kloss/runtime.hpp>
#include <kloss/version.hpp>
#ifdef KLOSS_HAVE_MPI
#include <kloss/sharded.hpp>
#endif
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <variant>
#include <vector>

struct kloss_loss {
  const kloss::OpInfo* info = nullptr;
  kloss::rt::Call call;
  std::optional<kloss::rt::Result> result;
  bool has_grads = false;
  bool changed = true;  // inputs or options set since the last run
  int memory = KLOSS_MEMORY_HOST;  // where the caller's buffers live
#ifdef KLOSS_HAVE_MPI
  std::unique_ptr<kloss::mpi::Communicator> comm;  // set: calls are shards (kloss_loss_set_communicator)
  kloss::mpi::ShardedOptions sharded;              // kloss_loss_set_reproducible
#endif
};

namespace {

using kloss::fail;
using kloss::rt::DType;

thread_local std::string last_error;

// A call made in the wrong order (a gradient before any backward).
class InvalidState : public kloss::Error {
 public:
  using kloss::Error::Error;
};

bool kokkos_owned = false;      // kloss_initialize() initialised Kokkos
bool kokkos_finalized = false;  // and kloss_finalize() finalised it

// The status of a failure, its message kept for kloss_last_error().
int failure(int status, std::string message) {
  last_error = std::move(message);
  return status;
}

// An exception class of kloss's and the status code it maps to.
template <class E, int Status>
struct StatusOf {
  static constexpr int status = Status;
  static bool matches(const std::exception& e) { return dynamic_cast<const E*>(&e) != nullptr; }
};

// The status of the first of Maps (StatusOf) whose class `e` is of;
// KLOSS_ERROR_INTERNAL where none.
template <class... Maps>
int status_of(const std::exception& e) {
  int status = KLOSS_ERROR_INTERNAL;
  (void)((Maps::matches(e) && (status = Maps::status, true)) || ...);
  return status;
}

// Runs `body`, mapping each kloss exception class to its status code.
template <class F>
int guarded(F&& body) {
  try {
    body();
    last_error.clear();
    return KLOSS_OK;
  } catch (const std::bad_alloc&) {
    return failure(KLOSS_ERROR_OUT_OF_MEMORY, "kloss: out of memory");
  } catch (const std::exception& e) {
    const int status =
        status_of<StatusOf<InvalidState, KLOSS_ERROR_INVALID_STATE>,
                  StatusOf<kloss::InvalidArgument, KLOSS_ERROR_INVALID_ARGUMENT>,
                  StatusOf<kloss::DimensionMismatch, KLOSS_ERROR_DIMENSION_MISMATCH>,
                  StatusOf<kloss::IndexOutOfRange, KLOSS_ERROR_INDEX_OUT_OF_RANGE>,
                  StatusOf<kloss::NotImplemented, KLOSS_ERROR_NOT_IMPLEMENTED>,
                  StatusOf<kloss::MpiError, KLOSS_ERROR_MPI>, StatusOf<kloss::Hdf5Error, KLOSS_ERROR_HDF5>>(e);
    return failure(status,
                   status == KLOSS_ERROR_INTERNAL ? std::string("kloss: internal error: ") + e.what() : e.what());
  } catch (...) {
    return failure(KLOSS_ERROR_INTERNAL, "kloss: internal error: unknown exception");
  }
}

// Checks shared by the entry points: non-null pointers and Kokkos ready.
// Returns KLOSS_OK or the failing status (with its message set).
int precheck(const char* fn, const void* loss, bool need_kokkos = true) {
  if (!loss) return failure(KLOSS_ERROR_NULL_POINTER, std::string("kloss::") + fn + ": argument 'loss' is NULL");
  if (need_kokkos && !Kokkos::is_initialized())
    return failure(KLOSS_ERROR_NOT_INITIALIZED,
                   std::string("kloss::") + fn + ": Kokkos is not initialised (call kloss_initialize first)");
  return KLOSS_OK;
}

int null_arg(const char* fn, const char* arg) {
  return failure(KLOSS_ERROR_NULL_POINTER, std::string("kloss::") + fn + ": argument '" + arg + "' is NULL");
}

// The runtime dtype of a C dtype value (which may be any int from C or
// Fortran); throws InvalidArgument for a value outside the enum.
DType to_dtype(int d, const char* fn, const char* arg) {
  // The runtime dtypes by kloss_dtype value.
  constexpr DType dtypes[] = {DType::float32,  DType::float64, DType::float16,
                              DType::bfloat16, DType::int32,   DType::int64};
  static_assert(KLOSS_FLOAT32 == 0 && KLOSS_FLOAT64 == 1 && KLOSS_FLOAT16 == 2 && KLOSS_BFLOAT16 == 3 &&
                KLOSS_INT32 == 4 && KLOSS_INT64 == 5);
  if (d >= 0 && d < static_cast<int>(std::size(dtypes))) return dtypes[d];
  fail<kloss::InvalidArgument>(fn, "argument '", arg, "' is ", d, ", not a kloss_dtype (0-5)");
}

// The op's input names without the '?' that marks optional ones.
bool is_input_of(const kloss::OpInfo& info, std::string_view name) {
  for (auto n : info.inputs) {
    if (!n.empty() && n.back() == '?') n.remove_suffix(1);
    if (n == name) return true;
  }
  return false;
}

std::string input_list(const kloss::OpInfo& info) {
  std::string s;
  for (auto n : info.inputs) {
    if (!n.empty() && n.back() == '?') n.remove_suffix(1);
    s += (s.empty() ? "" : ", ") + std::string(n);
  }
  return s;
}

// Throws DimensionMismatch unless a caller's buffer holds exactly `want`
// elements.
void check_numel(const std::string& fn, const char* arg, std::int64_t got, const kloss::Shape& shape) {
  if (got != shape.numel())
    fail<kloss::DimensionMismatch>(fn, "argument '", arg, "' holds ", got, " elements, the ", "result ", shape.str(),
                                   " has ", shape.numel());
}

// Throws InvalidArgument unless a caller's result buffer has the loss's
// dtype.
void check_result_dtype(const kloss_loss& loss, int dtype, const char* arg) {
  const DType dt = to_dtype(dtype, loss.call.op.c_str(), "dtype");
  if (dt != loss.call.dtype)
    fail<kloss::InvalidArgument>(loss.call.op, "argument '", arg, "' has dtype ", kloss::rt::to_string(dt),
                                 "; this loss computes in ", kloss::rt::to_string(loss.call.dtype));
}

// Where a loss's caller buffers live, as the runtime names it.
kloss::rt::Memory memory_of(int memory) {
  return memory == KLOSS_MEMORY_HOST ? kloss::rt::Memory::host : kloss::rt::Memory::device;
}

// Copies n bytes from a caller's buffer (host or Kokkos' default memory, as
// `memory` says) into kloss's host staging.
void copy_in(void* host_dst, const void* src, std::size_t n, int memory) {
  kloss::rt::copy_bytes(host_dst, kloss::rt::Memory::host, src, memory_of(memory), n);
}

// Copies a result buffer (kloss's, or a borrowed destination) to a caller's
// buffer (host or default memory).
void copy_out(const kloss::rt::Buffer& b, void* dst, int memory) {
  if (b.is_borrowed() && b.data() == dst) return;
  kloss::rt::copy_bytes(dst, memory_of(memory), b.data(), b.memory(), b.bytes());
}

// The shape of an input given to kloss_loss_set_input or
// kloss_loss_borrow_input, checked: a known input of the loss's dtype or
// index dtype, a rank within KLOSS_MAX_RANK, extents that are not negative
// and whose byte count fits int64, data for a shape with elements.
kloss::Shape checked_input(const kloss_loss& loss, const char* name, DType dt, const void* data, int ndim,
                           const int64_t* shape) {
  const std::string& op = loss.call.op;
  if (!is_input_of(*loss.info, name))
    fail<kloss::NotImplemented>(op, "input '", name,
                                "' is not an argument of this op (its inputs: ", input_list(*loss.info), ")");
  if (dt != loss.call.dtype && dt != loss.call.index_dtype)
    fail<kloss::InvalidArgument>(op, "input '", name, "' has dtype ", kloss::rt::to_string(dt), "; this loss takes ",
                                 kloss::rt::to_string(loss.call.dtype), " (floating inputs) or ",
                                 kloss::rt::to_string(loss.call.index_dtype), " (integer inputs)");
  if (ndim < 0 || ndim > KLOSS_MAX_RANK)
    fail<kloss::DimensionMismatch>(op, "input '", name, "' has rank ", ndim, ", not in 0..", KLOSS_MAX_RANK);
  std::vector<std::int64_t> ext(shape, shape + ndim);
  bool empty = false;
  for (int i = 0; i < ndim; ++i) {
    if (ext[i] < 0) fail<kloss::DimensionMismatch>(op, "input '", name, "' has extent ", ext[i], " in dimension ", i);
    empty = empty || ext[i] == 0;
  }
  // Byte counts must fit int64: refuse extents whose product overflows.
  std::int64_t count = 1;
  for (int i = 0; i < ndim && !empty; ++i) {
    if (count > (INT64_MAX / 8) / ext[i])
      fail<kloss::DimensionMismatch>(op, "input '", name, "' has too many elements (extents ",
                                     kloss::Shape(std::vector<std::int64_t>(ext.begin(), ext.begin() + i + 1)).str(),
                                     "...)");
    count *= ext[i];
  }
  const kloss::Shape sh(ext);
  if (sh.numel() > 0 && !data)
    fail<kloss::InvalidArgument>(op, "input '", name, "': data is NULL for shape ", sh.str());
  return sh;
}

// Throws NotImplemented unless input `name` of the loss's op has a gradient.
void check_differentiable(const kloss_loss& loss, const char* name) {
  bool differentiable = false;
  for (auto d : loss.info->differentiable) differentiable = differentiable || d == name;
  if (differentiable) return;
  std::string names;
  for (auto d : loss.info->differentiable) names += (names.empty() ? "" : ", ") + std::string(d);
  fail<kloss::NotImplemented>(loss.call.op, "input '", name, "' has no gradient (this op's gradients: ", names, ")");
}

// A caller's result buffer of `numel` elements (kloss_loss_borrow_output,
// kloss_loss_borrow_grad) as a borrowed destination.
kloss::rt::Buffer destination(const kloss_loss& loss, int dtype, const char* arg, void* data, std::int64_t numel) {
  check_result_dtype(loss, dtype, arg);
  if (numel < 0) fail<kloss::DimensionMismatch>(loss.call.op, "argument '", arg, "' holds ", numel, " elements");
  return kloss::rt::Buffer::borrowed(loss.call.dtype, kloss::Shape{numel}, data, memory_of(loss.memory));
}

// The shape of the forward output: a scalar for a reduced loss, otherwise
// the last run's if nothing changed since, otherwise a forward's.
kloss::Shape output_shape(kloss_loss& loss) {
  bool has_reduction = false;
  for (const auto& o : loss.info->options) has_reduction = has_reduction || o.name == "reduction";
  if (has_reduction) {
    const auto& v = loss.call.options.values();
    auto it = v.find("reduction");
    const std::string* r = it == v.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (it == v.end() || (r && *r != "none")) return kloss::Shape{};
  }
  if (loss.result && !loss.changed) return loss.result->output.shape();
  loss.call.grad_output.reset();
  return kloss::rt::run(loss.call).output.shape();
}

// Runs the call of `loss` (with or without a grad_output) and keeps its
// result.
void run_call(kloss_loss* loss, bool with_grads) {
  loss->result.reset();
  loss->has_grads = false;
#ifdef KLOSS_HAVE_MPI
  if (loss->comm)
    loss->result = kloss::mpi::run_sharded(*loss->comm, loss->call, loss->sharded);
  else
#endif
    loss->result = kloss::rt::run(loss->call);
  loss->has_grads = with_grads;
  loss->changed = false;
}

// kloss_loss_set_input (a copy) and kloss_loss_borrow_input (`borrow`: the
// caller's buffer itself).
int give_input(const char* fn, kloss_loss* loss, const char* name, int dtype, const void* data, int ndim,
               const int64_t* shape, bool borrow) {
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (!name) return null_arg(fn, "name");
  if (ndim > 0 && !shape) return null_arg(fn, "shape");
  return guarded([&] {
    const DType dt = to_dtype(dtype, loss->call.op.c_str(), "dtype");
    const kloss::Shape sh = checked_input(*loss, name, dt, data, ndim, shape);
    if (borrow) {
      loss->call.inputs[name] = kloss::rt::Buffer::borrowed(dt, sh, const_cast<void*>(data), memory_of(loss->memory));
    } else {
      kloss::rt::Buffer b(dt, sh);
      copy_in(b.data(), data, b.bytes(), loss->memory);
      loss->call.inputs[name] = std::move(b);
    }
    loss->changed = true;
  });
}

template <class V>
int set_option(const char* fn, kloss_loss* loss, const char* name, V value) {
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (!name) return null_arg(fn, "name");
  return guarded([&] {
    bool known = false;
    std::string names;
    for (const auto& o : loss->info->options) {
      known = known || o.name == name;
      names += (names.empty() ? "" : ", ") + std::string(o.name);
    }
    if (!known)
      fail<kloss::NotImplemented>(loss->call.op, "option '", name,
                                  "' is not an option of this op (its options: ", names.empty() ? "none" : names, ")");
    loss->call.options.set(name, kloss::rt::OptionValue(std::move(value)));
    loss->changed = true;
  });
}

}  // namespace

extern "C" {

int kloss_initialize(void) {
  if (Kokkos::is_initialized()) return failure(KLOSS_OK, "");
  if (kokkos_finalized)
    return failure(KLOSS_ERROR_INVALID_STATE,
                   "kloss_initialize: Kokkos was finalised by kloss_finalize and cannot be initialised again");
  return guarded([] {
    int argc = 0;
    char* argv[] = {nullptr};
    Kokkos::initialize(argc, argv);
    kokkos_owned = true;
  });
}

int kloss_finalize(void) {
  return guarded([] {
    if (kokkos_owned && Kokkos::is_initialized()) {
      Kokkos::finalize();
      kokkos_owned = false;
      kokkos_finalized = true;
    }
  });
}

int kloss_is_initialized(void) { return Kokkos::is_initialized() ? 1 : 0; }

const char* kloss_version(void) { return KLOSS_VERSION_STRING; }

int kloss_op_count(void) { return static_cast<int>(kloss::ops().size()); }

const char* kloss_op_json(int index) {
  static const std::vector<std::string> json = [] {
    const auto quoted = [](std::string_view text) {
      std::string q = "\"";
      for (const char ch : text) {
        if (ch == '"' || ch == '\\') q += '\\';
        if (static_cast<unsigned char>(ch) < 0x20) {
          q += ' ';
          continue;
        }
        q += ch;
      }
      return q + "\"";
    };
    const auto list = [&](const std::vector<std::string_view>& items) {
      std::string l = "[";
      for (std::size_t i = 0; i < items.size(); ++i) l += (i ? ", " : "") + quoted(items[i]);
      return l + "]";
    };
    std::vector<std::string> all;
    for (const auto& op : kloss::ops()) {
      std::string o = "{\"name\": " + quoted(op.name) + ", \"header\": " + quoted(op.header) +
                      ", \"summary\": " + quoted(op.summary) + ", \"inputs\": " + list(op.inputs) +
                      ", \"differentiable\": " + list(op.differentiable) + ", \"index_inputs\": " +
                      list(op.index_inputs) + ", \"index_or_real_inputs\": " + list(op.index_or_real_inputs) +
                      ", \"options\": [";
      for (std::size_t i = 0; i < op.options.size(); ++i) {
        const auto& opt = op.options[i];
        o += std::string(i ? ", " : "") + "{\"name\": " + quoted(opt.name) + ", \"type\": " + quoted(opt.type) +
             ", \"default\": " + quoted(opt.default_value) + ", \"doc\": " + quoted(opt.doc) + "}";
      }
      all.push_back(o + "]}");
    }
    return all;
  }();
  if (index < 0 || static_cast<std::size_t>(index) >= json.size()) {
    last_error = "kloss_op_json: index " + std::to_string(index) + " is outside [0, " + std::to_string(json.size()) +
                 ")";
    return nullptr;
  }
  last_error.clear();
  return json[static_cast<std::size_t>(index)].c_str();
}

const char* kloss_last_error(void) { return last_error.c_str(); }

const char* kloss_status_name(int status) {
  switch (status) {
#define KLOSS_STATUS_NAME(STATUS) \
  case STATUS:                    \
    return #STATUS;
    KLOSS_STATUS_NAME(KLOSS_OK)
    KLOSS_STATUS_NAME(KLOSS_ERROR_INVALID_ARGUMENT)
    KLOSS_STATUS_NAME(KLOSS_ERROR_DIMENSION_MISMATCH)
    KLOSS_STATUS_NAME(KLOSS_ERROR_INDEX_OUT_OF_RANGE)
    KLOSS_STATUS_NAME(KLOSS_ERROR_NOT_IMPLEMENTED)
    KLOSS_STATUS_NAME(KLOSS_ERROR_MPI)
    KLOSS_STATUS_NAME(KLOSS_ERROR_HDF5)
    KLOSS_STATUS_NAME(KLOSS_ERROR_NOT_INITIALIZED)
    KLOSS_STATUS_NAME(KLOSS_ERROR_NULL_POINTER)
    KLOSS_STATUS_NAME(KLOSS_ERROR_INVALID_STATE)
    KLOSS_STATUS_NAME(KLOSS_ERROR_OUT_OF_MEMORY)
    KLOSS_STATUS_NAME(KLOSS_ERROR_INTERNAL)
#undef KLOSS_STATUS_NAME
  }
  return "unknown status";
}

int kloss_loss_create(kloss_loss** loss, const char* op, int dtype, int index_dtype) {
  if (!loss) return null_arg("kloss_loss_create", "loss");
  *loss = nullptr;
  if (!op) return null_arg("kloss_loss_create", "op");
  if (int s = precheck("kloss_loss_create", loss); s != KLOSS_OK) return s;
  return guarded([&] {
    const kloss::OpInfo* info = kloss::find_op(op);
    if (!info) fail<kloss::NotImplemented>(op, "no such op in kloss (kloss-ops lists them)");
    const DType dt = to_dtype(dtype, op, "dtype");
    const DType it = to_dtype(index_dtype, op, "index_dtype");
    if (!kloss::rt::is_floating(dt))
      fail<kloss::InvalidArgument>(op, "argument 'dtype' must be a floating dtype, got ", kloss::rt::to_string(dt));
    if (kloss::rt::is_floating(it))
      fail<kloss::InvalidArgument>(op, "argument 'index_dtype' must be KLOSS_INT32 or KLOSS_INT64, got ",
                                   kloss::rt::to_string(it));
    auto l = std::make_unique<kloss_loss>();
    l->info = info;
    l->call.op = std::string(info->name);
    l->call.dtype = dt;
    l->call.index_dtype = it;
    *loss = l.release();
  });
}

int kloss_loss_destroy(kloss_loss* loss) {
  delete loss;
  return KLOSS_OK;
}

int kloss_loss_set_option_int(kloss_loss* loss, const char* name, int64_t value) {
  return set_option("kloss_loss_set_option_int", loss, name, static_cast<std::int64_t>(value));
}

int kloss_loss_set_option_real(kloss_loss* loss, const char* name, double value) {
  return set_option("kloss_loss_set_option_real", loss, name, value);
}

int kloss_loss_set_option_string(kloss_loss* loss, const char* name, const char* value) {
  if (!value) return null_arg("kloss_loss_set_option_string", "value");
  return set_option("kloss_loss_set_option_string", loss, name, std::string(value));
}

int kloss_loss_set_input(kloss_loss* loss, const char* name, int dtype, const void* data, int ndim,
                         const int64_t* shape) {
  return give_input("kloss_loss_set_input", loss, name, dtype, data, ndim, shape, false);
}

int kloss_loss_borrow_input(kloss_loss* loss, const char* name, int dtype, const void* data, int ndim,
                            const int64_t* shape) {
  return give_input("kloss_loss_borrow_input", loss, name, dtype, data, ndim, shape, true);
}

int kloss_loss_borrow_output(kloss_loss* loss, int dtype, void* output, int64_t output_numel) {
  constexpr const char* fn = "kloss_loss_borrow_output";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (!output && output_numel != 0) return null_arg(fn, "output");
  return guarded([&] {
    // the last result keeps its values, not the address being given back
    if (loss->result && loss->result->output.is_borrowed()) loss->result->output = loss->result->output.owned();
    if (!output) {
      loss->call.output_to.reset();
      return;
    }
    loss->call.output_to = destination(*loss, dtype, "output", output, output_numel);
  });
}

int kloss_loss_borrow_grad(kloss_loss* loss, const char* name, int dtype, void* grad, int64_t grad_numel) {
  constexpr const char* fn = "kloss_loss_borrow_grad";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (!name) return null_arg(fn, "name");
  if (!grad && grad_numel != 0) return null_arg(fn, "grad");
  return guarded([&] {
    check_differentiable(*loss, name);
    // the last result keeps its values, not the address being given back
    if (loss->result) {
      const auto it = loss->result->grads.find(name);
      if (it != loss->result->grads.end() && it->second.is_borrowed()) it->second = it->second.owned();
    }
    if (!grad) {
      loss->call.grads_to.erase(name);
      return;
    }
    loss->call.grads_to[name] = destination(*loss, dtype, "grad", grad, grad_numel);
  });
}

int kloss_fence(void) {
  if (!Kokkos::is_initialized())
    return failure(KLOSS_ERROR_NOT_INITIALIZED, "kloss_fence: Kokkos is not initialised (call kloss_initialize first)");
  return guarded([] { Kokkos::fence(); });
}

int kloss_loss_set_memory(kloss_loss* loss, int memory) {
  if (int s = precheck("kloss_loss_set_memory", loss, false); s != KLOSS_OK) return s;
  if (memory != KLOSS_MEMORY_HOST && memory != KLOSS_MEMORY_DEVICE)
    return failure(KLOSS_ERROR_INVALID_ARGUMENT, "kloss::" + loss->call.op +
                                                     ": argument 'memory' must be KLOSS_MEMORY_HOST (0) or "
                                                     "KLOSS_MEMORY_DEVICE (1), got " +
                                                     std::to_string(memory));
  loss->memory = memory;
  last_error.clear();
  return KLOSS_OK;
}

int kloss_loss_set_communicator(kloss_loss* loss, int comm) {
  constexpr const char* fn = "kloss_loss_set_communicator";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
#ifdef KLOSS_HAVE_MPI
  return guarded([&] {
    // (MPI_Comm_f2c before MPI_Init ends the process in Open MPI)
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
      fail<kloss::MpiError>(loss->call.op, "MPI is not initialised (call MPI_Init first) or already finalised");
    const MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(comm));
    loss->comm.reset();
    if (c != MPI_COMM_NULL) loss->comm = std::make_unique<kloss::mpi::Communicator>(c);
    loss->changed = true;
  });
#else
  (void)comm;
  return failure(KLOSS_ERROR_NOT_IMPLEMENTED,
                 "kloss::" + loss->call.op + ": this kloss was built without MPI (KLOSS_ENABLE_MPI)");
#endif
}

int kloss_loss_set_reproducible(kloss_loss* loss, int reproducible) {
  constexpr const char* fn = "kloss_loss_set_reproducible";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (reproducible != 0 && reproducible != 1)
    return failure(
        KLOSS_ERROR_INVALID_ARGUMENT,
        "kloss::" + loss->call.op + ": argument 'reproducible' must be 0 or 1, got " + std::to_string(reproducible));
#ifdef KLOSS_HAVE_MPI
  loss->sharded.reproducible = reproducible == 1;
  loss->changed = true;
  last_error.clear();
  return KLOSS_OK;
#else
  return failure(KLOSS_ERROR_NOT_IMPLEMENTED,
                 "kloss::" + loss->call.op + ": this kloss was built without MPI (KLOSS_ENABLE_MPI)");
#endif
}

int kloss_device_memory_is_host(void) {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible ? 1
                                                                                                                : 0;
}

int kloss_loss_clear_input(kloss_loss* loss, const char* name) {
  if (int s = precheck("kloss_loss_clear_input", loss, false); s != KLOSS_OK) return s;
  if (!name) return null_arg("kloss_loss_clear_input", "name");
  loss->call.inputs.erase(name);
  loss->changed = true;
  last_error.clear();
  return KLOSS_OK;
}

int kloss_loss_forward(kloss_loss* loss, int dtype, void* output, int64_t output_numel) {
  constexpr const char* fn = "kloss_loss_forward";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  if (!output && output_numel != 0) return null_arg(fn, "output");
  return guarded([&] {
    check_result_dtype(*loss, dtype, "output");
    loss->call.grad_output.reset();
    run_call(loss, false);
    const auto& out = loss->result->output;
    if (output) {
      check_numel(loss->call.op, "output", output_numel, out.shape());
      copy_out(out, output, loss->memory);
    }
  });
}

int kloss_loss_backward(kloss_loss* loss, int dtype, const void* grad_output, int64_t grad_output_numel) {
  constexpr const char* fn = "kloss_loss_backward";
  if (int s = precheck(fn, loss); s != KLOSS_OK) return s;
  return guarded([&] {
    const std::string& op = loss->call.op;
    check_result_dtype(*loss, dtype, "grad_output");
    const kloss::Shape shape = output_shape(*loss);
    kloss::rt::Buffer go;
    if (grad_output) {
      if (grad_output_numel != shape.numel())
        fail<kloss::DimensionMismatch>(op, "argument 'grad_output' holds ", grad_output_numel, " elements, the output ",
                                       shape.str(), " has ", shape.numel());
      // (read where it is during this call: borrowed, not copied)
      go =
          kloss::rt::Buffer::borrowed(loss->call.dtype, shape, const_cast<void*>(grad_output), memory_of(loss->memory));
    } else {
      go = kloss::rt::Buffer::from_doubles(loss->call.dtype, shape,
                                           std::vector<double>(static_cast<std::size_t>(shape.numel()), 1.0));
    }
    loss->call.grad_output = std::move(go);
    try {
      run_call(loss, true);
    } catch (...) {
      loss->call.grad_output.reset();
      throw;
    }
    loss->call.grad_output.reset();
  });
}

int kloss_loss_output_shape(const kloss_loss* loss, int* ndim, int64_t* shape) {
  constexpr const char* fn = "kloss_loss_output_shape";
  if (int s = precheck(fn, loss, false); s != KLOSS_OK) return s;
  if (!ndim) return null_arg(fn, "ndim");
  if (!shape) return null_arg(fn, "shape");
  if (!loss->result)
    return failure(KLOSS_ERROR_INVALID_STATE,
                   "kloss::" + loss->call.op + ": no output yet (call kloss_loss_forward first)");
  const auto& s = loss->result->output.shape();
  *ndim = s.rank;
  for (int i = 0; i < s.rank; ++i) shape[i] = s.extent[i];
  last_error.clear();
  return KLOSS_OK;
}

int kloss_loss_get_output(const kloss_loss* loss, int dtype, void* output, int64_t output_numel) {
  constexpr const char* fn = "kloss_loss_get_output";
  if (int s = precheck(fn, loss, false); s != KLOSS_OK) return s;
  if (!output && output_numel != 0) return null_arg(fn, "output");
  if (!loss->result)
    return failure(KLOSS_ERROR_INVALID_STATE,
                   "kloss::" + loss->call.op + ": no output yet (call kloss_loss_forward first)");
  return guarded([&] {
    check_result_dtype(*loss, dtype, "output");
    check_numel(loss->call.op, "output", output_numel, loss->result->output.shape());
    copy_out(loss->result->output, output, loss->memory);
  });
}

int kloss_loss_get_grad(const kloss_loss* loss, const char* name, int dtype, void* grad, int64_t grad_numel) {
  constexpr const char* fn = "kloss_loss_get_grad";
  if (int s = precheck(fn, loss, false); s != KLOSS_OK) return s;
  if (!name) return null_arg(fn, "name");
  if (!grad && grad_numel != 0) return null_arg(fn, "grad");
  return guarded([&] {
    const std::string& op = loss->call.op;
    check_result_dtype(*loss, dtype, "grad");
    check_differentiable(*loss, name);
    if (!loss->result || !loss->has_grads)
      throw InvalidState("kloss::" + op + ": no gradients yet (call kloss_loss_backward first)");
    auto it = loss->result->grads.find(name);
    if (it == loss->result->grads.end()) {
      const auto in = loss->call.inputs.find(name);
      if (in != loss->call.inputs.end() && !kloss::rt::is_floating(in->second.dtype()))
        fail<kloss::NotImplemented>(op, "input '", name, "' holds integers (", kloss::rt::to_string(in->second.dtype()),
                                    ", class indices): it has no gradient");
      fail<kloss::InvalidArgument>(op, "input '", name, "' was not given, so it has no gradient");
    }
    check_numel(op, "grad", grad_numel, it->second.shape());
    copy_out(it->second, grad, loss->memory);
  });
}

}  // extern "C"
